#include "model/weights.h"

#include <cmath>
#include <sstream>

#include "core/error.h"
#include "core/random.h"

namespace plab {
namespace {

void check_tensor(const std::vector<float>& t, std::size_t expected, const std::string& name) {
    PLAB_CHECK(t.size() == expected, "weights: tensor " << name << " has " << t.size()
                                                        << " values, the config needs "
                                                        << expected);
    for (std::size_t i = 0; i < t.size(); ++i) {
        PLAB_CHECK(std::isfinite(t[i]), "weights: tensor " << name << " has a non-finite value ("
                                                           << t[i] << ") at index " << i
                                                           << "; every weight must be finite");
    }
}

}  // namespace

void Weights::validate() const {
    const ModelConfig& c = config;
    c.validate();
    const std::size_t d = c.dim, q = std::size_t(c.n_heads) * c.head_dim,
                      kv = std::size_t(c.n_kv_heads) * c.head_dim, f = c.hidden_dim,
                      v = c.vocab_size;
    check_tensor(tok_embeddings, v * d, "model.embed_tokens.weight");
    PLAB_CHECK(layers.size() == std::size_t(c.n_layers),
               "weights: " << layers.size() << " layers, the config says " << c.n_layers);
    for (std::size_t i = 0; i < layers.size(); ++i) {
        const LayerWeights& l = layers[i];
        const std::string p = "model.layers." + std::to_string(i) + ".";
        check_tensor(l.attn_norm, d, p + "input_layernorm.weight");
        check_tensor(l.wq, q * d, p + "self_attn.q_proj.weight");
        check_tensor(l.wk, kv * d, p + "self_attn.k_proj.weight");
        check_tensor(l.wv, kv * d, p + "self_attn.v_proj.weight");
        check_tensor(l.wo, d * q, p + "self_attn.o_proj.weight");
        check_tensor(l.ffn_norm, d, p + "post_attention_layernorm.weight");
        check_tensor(l.w_gate, f * d, p + "mlp.gate_proj.weight");
        check_tensor(l.w_up, f * d, p + "mlp.up_proj.weight");
        check_tensor(l.w_down, d * f, p + "mlp.down_proj.weight");
    }
    check_tensor(final_norm, d, "model.norm.weight");
    if (!c.tied_embeddings) check_tensor(classifier, v * d, "lm_head.weight");
}

Weights make_random_weights(const ModelConfig& config, std::uint64_t seed) {
    config.validate();
    random::Engine rng(seed);
    // Linear weights: normal with std 1/sqrt(fan_in), so activations stay O(1)
    // through the layers and logits are spread out (a clear greedy winner).
    // core/random.h's samplers: a seed gives the same model with every C++ library.
    auto normal = [&](std::size_t n, float stddev) {
        random::Normal<float> dist(0.0f, stddev);
        std::vector<float> w(n);
        for (auto& x : w) x = dist(rng);
        return w;
    };
    auto linear = [&](std::size_t out, std::size_t in) {
        return normal(out * in, 1.0f / std::sqrt(float(in)));
    };
    auto norm = [&](std::size_t n) {
        std::vector<float> w(n);
        for (auto& x : w) x = random::uniform(rng, 0.8f, 1.2f);
        return w;
    };
    const std::size_t d = config.dim, q = std::size_t(config.n_heads) * config.head_dim,
                      kv = std::size_t(config.n_kv_heads) * config.head_dim, f = config.hidden_dim,
                      v = config.vocab_size;
    Weights w;
    w.config = config;
    w.tok_embeddings = normal(v * d, 1.0f);  // looked up, not multiplied: std 1
    for (int l = 0; l < config.n_layers; ++l) {
        LayerWeights lw;
        lw.attn_norm = norm(d);
        lw.wq = linear(q, d);
        lw.wk = linear(kv, d);
        lw.wv = linear(kv, d);
        lw.wo = linear(d, q);
        lw.ffn_norm = norm(d);
        lw.w_gate = linear(f, d);
        lw.w_up = linear(f, d);
        lw.w_down = linear(d, f);
        w.layers.push_back(std::move(lw));
    }
    w.final_norm = norm(d);
    if (!config.tied_embeddings) w.classifier = linear(v, d);
    return w;
}

void check_tensor_shape(const std::string& file, const std::string& name,
                        const std::vector<std::int64_t>& got, const std::vector<std::int64_t>& want,
                        const char* needed_by) {
    if (got == want) return;
    std::ostringstream g, w;
    for (auto d : got) g << d << ' ';
    for (auto d : want) w << d << ' ';
    PLAB_CHECK(false, file << ": tensor " << name << " has shape [ " << g.str() << "], the "
                           << needed_by << " needs [ " << w.str() << "]");
}

}  // namespace plab
