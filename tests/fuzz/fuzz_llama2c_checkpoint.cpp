// Fuzz harness: a llama2.c .bin checkpoint (legacy or v1 header, then float32
// tensors) through parse_llama2c_checkpoint (model/llama2c.h). Seeds: tiny
// legacy and v1 checkpoints written by our own writer (corpus/llama2c_checkpoint/).
#include "fuzz_util.h"
#include "model/llama2c.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const plab::LoadLimits limits{64u << 20};
    plab::fuzz::refusal_is_fine([&] {
        plab::Llama2cInfo info;
        const plab::Weights w =
            plab::parse_llama2c_checkpoint(plab::fuzz::as_bytes(data, size), "fuzz", &info, limits);
        w.validate();  // accepted means every tensor has its config's shape
        PLAB_FUZZ_REQUIRE(info.version == 0 || info.version == 1);
        PLAB_FUZZ_REQUIRE(w.config.tied_embeddings == info.shared_classifier);
    });
    return 0;
}
