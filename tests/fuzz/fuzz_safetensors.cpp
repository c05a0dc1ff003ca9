// Fuzz harness: a whole safetensors file (8-byte header length, JSON header,
// tensor bytes) through model/safetensors.h's parser. Seeds: tiny models
// written by our own writer (corpus/safetensors/).
#include "fuzz_util.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // A small limit, so a header that asks for more memory than the input could
    // justify is refused by the limit check rather than by libFuzzer's malloc limit.
    const plab::LoadLimits limits{64u << 20};
    plab::fuzz::refusal_is_fine([&] {
        const plab::TensorMap tensors =
            plab::parse_safetensors(plab::fuzz::as_bytes(data, size), "fuzz", limits);
        // Accepted: every tensor holds exactly the values its shape says.
        for (const auto& [name, t] : tensors) {
            std::uint64_t numel = 1;
            for (auto d : t.shape) numel *= static_cast<std::uint64_t>(d);
            PLAB_FUZZ_REQUIRE(numel == t.data.size());
            PLAB_FUZZ_REQUIRE(name != "__metadata__");
        }
    });
    return 0;
}
