// Fuzz harness: a whole GGUF file (header, typed metadata, tensor infos,
// tensor data, tokenizer metadata) through model/gguf_model.h's parser, which
// runs model/gguf.h's container parser, the Llama mapping and the tokenizer
// reader (model/tokenizers/tokenizer_gguf.h). Seeds: tiny models written by
// `plab convert --to gguf` (corpus/gguf/, made by make_seeds.py's notes).
#include "fuzz_util.h"
#include "model/gguf_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // A small limit, so a header that asks for more memory than the input could
    // justify is refused by the limit check rather than by libFuzzer's malloc limit.
    const plab::LoadLimits limits{64u << 20};
    plab::fuzz::refusal_is_fine([&] {
        const plab::Model m =
            plab::parse_gguf_model(plab::fuzz::as_bytes(data, size), "fuzz", limits);
        // Accepted: the weights match the config, and the tokenizer round-trips a text.
        m.weights.validate();
        PLAB_FUZZ_REQUIRE(m.tokenizer != nullptr);
        PLAB_FUZZ_REQUIRE(m.tokenizer->vocab_size() <= m.weights.config.vocab_size);
        const auto ids = m.tokenizer->encode("Tom ran", false);
        for (auto id : ids) PLAB_FUZZ_REQUIRE(id >= 0 && id < m.weights.config.vocab_size);
    });
    return 0;
}
