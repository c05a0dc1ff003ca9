// Fuzz harness: a Hugging Face config.json through config_from_json
// (model/model_io.h). An accepted config must survive config_to_json and back
// unchanged. Seeds: assets/model/config.json and the golden models' configs.
#include "fuzz_util.h"
#include "model/model_io.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    plab::fuzz::refusal_is_fine([&] {
        const std::string text(plab::fuzz::as_text(data, size));
        const plab::ModelConfig c = plab::config_from_json(text, "fuzz");
        c.validate();  // accepted means valid
        const plab::ModelConfig back =
            plab::config_from_json(plab::config_to_json(c, "byte"), "round trip");
        PLAB_FUZZ_REQUIRE(back.dim == c.dim && back.n_layers == c.n_layers &&
                          back.n_heads == c.n_heads && back.n_kv_heads == c.n_kv_heads &&
                          back.head_dim == c.head_dim && back.hidden_dim == c.hidden_dim &&
                          back.vocab_size == c.vocab_size && back.max_seq_len == c.max_seq_len &&
                          back.rope_theta == c.rope_theta && back.norm_eps == c.norm_eps &&
                          back.tied_embeddings == c.tied_embeddings);
    });
    return 0;
}
