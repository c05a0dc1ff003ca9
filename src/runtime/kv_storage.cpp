#include "runtime/kv_storage.h"

#include "core/error.h"
#include "core/kv_layout.h"

namespace plab {

KvStorage::KvStorage(Backend& backend, const ModelConfig& config, int block_size, int num_blocks)
    : backend_(backend),
      n_layers_(config.n_layers),
      block_size_(block_size),
      row_size_(config.n_kv_heads * config.head_dim) {
    const std::size_t pool = std::size_t(num_blocks) * block_size * row_size_;
    for (int l = 0; l < n_layers_; ++l) {
        k_pools_.emplace_back(backend, pool);
        v_pools_.emplace_back(backend, pool);
        // Written once now, so the pool's memory is really there before the
        // first step: on a CPU the first write to each 4 KiB page of a fresh
        // allocation faults it in, and a decode step that appends one slot per
        // sequence touched a new page every few slots (~3 ms of page faults
        // in a 64-sequence step of the stories15M shape). Engines allocate and
        // touch their KV pool at start-up for the same reason.
        backend.fill(k_pools_.back().buf(), 0.0f);
        backend.fill(v_pools_.back().buf(), 0.0f);
        backend.prepare_kv_pool(k_pools_.back().buf(), block_size, row_size_);
    }
}

std::size_t KvStorage::bytes_per_token() const {
    return 2 * std::size_t(n_layers_) * row_size_ * sizeof(float);
}

std::vector<float> KvStorage::read(const Sequence& seq, int layer, KvPart part) const {
    PLAB_ASSERT(layer >= 0 && layer < n_layers_);
    const Buffer pool = part == KvPart::V ? v_pool(layer) : k_pool(layer);
    std::vector<float> out(std::size_t(seq.length) * row_size_);
    for (int pos = 0; pos < seq.length; ++pos) {
        if (kv_block_freed(seq.block_table.data(), pos, block_size_)) continue;  // stays 0
        const int slot = kv_slot(seq.block_table.data(), pos, block_size_);
        backend_.download(out.data() + std::size_t(pos) * row_size_,
                          pool.slice(std::size_t(slot) * row_size_, row_size_), row_size_);
    }
    return out;
}

void KvStorage::write(const Sequence& seq, int layer, KvPart part, const std::vector<float>& data) {
    PLAB_ASSERT(layer >= 0 && layer < n_layers_);
    PLAB_ASSERT(data.size() % static_cast<std::size_t>(row_size_) == 0);
    const int n = static_cast<int>(data.size() / static_cast<std::size_t>(row_size_));
    PLAB_ASSERT(n <= seq.length);
    const Buffer pool = part == KvPart::V ? v_pool(layer) : k_pool(layer);
    for (int pos = 0; pos < n; ++pos) {
        const int slot = kv_slot(seq.block_table.data(), pos, block_size_);
        backend_.upload(pool.slice(std::size_t(slot) * row_size_, row_size_),
                        data.data() + std::size_t(pos) * row_size_, row_size_);
    }
}

}  // namespace plab
