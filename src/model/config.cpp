#include "model/config.h"

#include <cmath>
#include <sstream>

#include "core/error.h"

namespace plab {

void ModelConfig::validate() const {
    auto positive = [](const char* name, int v, int max) {
        PLAB_CHECK(v >= 1 && v <= max,
                   "model config: " << name << " = " << v << ", expected 1.." << max);
    };
    positive("dim", dim, kMaxDim);
    positive("n_layers", n_layers, kMaxLayers);
    positive("n_heads", n_heads, kMaxHeads);
    positive("n_kv_heads", n_kv_heads, kMaxHeads);
    positive("head_dim", head_dim, kMaxHeadDim);
    positive("hidden_dim", hidden_dim, kMaxHidden);
    positive("vocab_size", vocab_size, kMaxVocab);
    positive("max_seq_len", max_seq_len, kMaxSeqLen);
    PLAB_CHECK(n_heads % n_kv_heads == 0,
               "model config: n_heads = " << n_heads
                                          << " is not a multiple of n_kv_heads = " << n_kv_heads
                                          << " (grouped-query attention shares each K/V head "
                                             "among n_heads/n_kv_heads query heads)");
    PLAB_CHECK(std::isfinite(rope_theta) && rope_theta > 1.0,
               "model config: rope_theta = " << rope_theta << ", expected a finite value > 1");
    PLAB_CHECK(std::isfinite(norm_eps) && norm_eps > 0.0f && norm_eps < 1.0f,
               "model config: norm_eps = " << norm_eps << ", expected 0 < eps < 1");
}

std::size_t ModelConfig::n_params() const {
    const std::size_t d = dim, q = std::size_t(n_heads) * head_dim,
                      kv = std::size_t(n_kv_heads) * head_dim, f = hidden_dim, v = vocab_size;
    const std::size_t per_layer = d + d * q + 2 * d * kv + q * d + d + 3 * d * f;
    return v * d + n_layers * per_layer + d + (tied_embeddings ? 0 : v * d);
}

std::size_t ModelConfig::kv_floats_per_token() const {
    return 2 * std::size_t(n_layers) * n_kv_heads * head_dim;
}

std::string ModelConfig::summary() const {
    std::ostringstream os;
    os << "D=" << dim << " L=" << n_layers << " H=" << n_heads << " Hkv=" << n_kv_heads
       << " Dh=" << head_dim << " F=" << hidden_dim << " V=" << vocab_size
       << " max_seq_len=" << max_seq_len;
    return os.str();
}

}  // namespace plab
