#include "runtime/loaded_model.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "runtime/kv_cache.h"
#include "runtime/registry.h"

namespace plab {
namespace {

// The model's identity for the prefix cache: its shape and its token
// embeddings (every token's first contact with the model). Two models that
// differ there never share a block name; a pool belongs to one engine and
// one model anyway, so this is the salt vLLM keeps for pools shared wider.
std::uint64_t model_identity(const Weights& w) {
    const ModelConfig& c = w.config;
    std::vector<int32_t> words = {c.dim,        c.n_layers,    c.n_heads,
                                  c.n_kv_heads, c.head_dim,    c.hidden_dim,
                                  c.vocab_size, c.max_seq_len, c.tied_embeddings ? 1 : 0};
    std::int32_t bits = 0;
    std::memcpy(&bits, &c.norm_eps, sizeof bits);
    words.push_back(bits);
    std::uint64_t h = PrefixCache::block_hash(0, words, 0);
    // Hash the embeddings in chunks of 4096 floats, chained like blocks.
    const std::size_t n = w.tok_embeddings.size();
    for (std::size_t i = 0; i < n; i += 4096) {
        const std::size_t m = std::min<std::size_t>(4096, n - i);
        std::vector<int32_t> chunk(m);
        std::memcpy(chunk.data(), w.tok_embeddings.data() + i, m * sizeof(float));
        h = PrefixCache::block_hash(h, chunk, 0);
    }
    return h;
}

}  // namespace

LoadedModel::LoadedModel(const Weights& weights, const std::string& backend_name, Kernels kernels)
    : LoadedModel(weights, make_backend(backend_name, kernels)) {}

LoadedModel::LoadedModel(const Weights& weights, std::unique_ptr<Backend> backend)
    : backend_(std::move(backend)) {
    PLAB_ASSERT(backend_ != nullptr);
    device_ = std::make_unique<DeviceModel>(*backend_, weights);
    identity_ = model_identity(weights);
}

LoadedModel::~LoadedModel() {
    device_.reset();  // its arrays are the backend's
}

}  // namespace plab
