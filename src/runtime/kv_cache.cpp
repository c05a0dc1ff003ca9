#include "runtime/kv_cache.h"

#include <algorithm>

#include "core/error.h"
#include "core/kv_layout.h"

namespace plab {

KvCache::KvCache(Backend& backend, const ModelConfig& config, int block_size, int num_blocks)
    : backend_(backend),
      n_layers_(config.n_layers),
      block_size_(block_size),
      num_blocks_(num_blocks),
      row_size_(config.n_kv_heads * config.head_dim) {
    PLAB_CHECK(block_size >= 1 && block_size <= 4096,
               "KV block size " << block_size << " must be between 1 and 4096 positions");
    PLAB_CHECK(num_blocks >= 1, "the KV cache needs at least one block, got " << num_blocks);
    const std::size_t pool = std::size_t(num_blocks) * block_size * row_size_;
    for (int l = 0; l < n_layers_; ++l) {
        k_pools_.emplace_back(backend, pool);
        v_pools_.emplace_back(backend, pool);
    }
    ref_counts_.assign(static_cast<std::size_t>(num_blocks), 0);
    for (int b = num_blocks - 1; b >= 0; --b) free_list_.push_back(b);
}

std::size_t KvCache::bytes_per_token() const {
    return 2 * std::size_t(n_layers_) * row_size_ * sizeof(float);
}

std::size_t KvCache::bytes_in_use() const {
    return std::size_t(blocks_in_use()) * block_size_ * bytes_per_token();
}

int KvCache::allocate_block() {
    PLAB_CHECK(!free_list_.empty(), "KV cache is full: all " << num_blocks_ << " blocks of "
                                                             << block_size_
                                                             << " positions are in use");
    const int b = free_list_.back();
    free_list_.pop_back();
    ref_counts_[b] = 1;
    return b;
}

std::vector<int32_t> KvCache::reserve(Sequence& seq, int n) {
    PLAB_ASSERT(n >= 0);
    // Check capacity first, so that a refused request leaves the sequence untouched.
    const int blocks_needed = (seq.length + n + block_size_ - 1) / block_size_;
    const int new_blocks = blocks_needed - static_cast<int>(seq.block_table.size());
    PLAB_CHECK(new_blocks <= free_blocks(),
               "KV cache is full: " << n << " more positions need " << new_blocks
                                    << " new blocks of " << block_size_ << " but only "
                                    << free_blocks() << " of " << num_blocks_ << " are free");
    std::vector<int32_t> slots;
    slots.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
        const int pos = seq.length + i;
        if (pos / block_size_ >= static_cast<int>(seq.block_table.size())) {
            seq.block_table.push_back(allocate_block());
        }
        slots.push_back(kv_slot(seq.block_table.data(), pos, block_size_));
    }
    seq.length += n;
    return slots;
}

int KvCache::free_forgotten(Sequence& seq, const Mask& mask) {
    int freed = 0;
    const int full_blocks = seq.length / block_size_;
    for (int lb = 0; lb < full_blocks; ++lb) {
        int32_t& entry = seq.block_table[static_cast<std::size_t>(lb)];
        if (entry == kFreedBlock) continue;
        bool forgotten = true;
        for (int p = lb * block_size_; p < (lb + 1) * block_size_ && forgotten; ++p) {
            forgotten = mask.forgets(p, seq.length);
        }
        if (!forgotten) continue;
        PLAB_ASSERT(ref_counts_[entry] > 0);
        if (--ref_counts_[entry] == 0) free_list_.push_back(entry);
        entry = kFreedBlock;
        ++freed;
    }
    return freed;
}

int KvCache::freed_blocks(const Sequence& seq) {
    return static_cast<int>(
        std::count(seq.block_table.begin(), seq.block_table.end(), kFreedBlock));
}

void KvCache::release(Sequence& seq) {
    for (int b : seq.block_table) {
        if (b == kFreedBlock) continue;  // given back already
        PLAB_ASSERT(ref_counts_[b] > 0);
        if (--ref_counts_[b] == 0) free_list_.push_back(b);
    }
    seq.block_table.clear();
    seq.length = 0;
}

void KvCache::retain(int block) {
    PLAB_ASSERT(block >= 0 && block < num_blocks_ && ref_counts_[block] > 0);
    ++ref_counts_[block];
}

std::vector<float> KvCache::read(const Sequence& seq, int layer, KvPart part) const {
    PLAB_ASSERT(layer >= 0 && layer < n_layers_);
    const Buffer pool = part == KvPart::V ? v_pools_[layer].buf() : k_pools_[layer].buf();
    std::vector<float> out(std::size_t(seq.length) * row_size_);
    for (int pos = 0; pos < seq.length; ++pos) {
        if (kv_block_freed(seq.block_table.data(), pos, block_size_)) continue;  // stays 0
        const int slot = kv_slot(seq.block_table.data(), pos, block_size_);
        backend_.download(out.data() + std::size_t(pos) * row_size_,
                          pool.slice(std::size_t(slot) * row_size_, row_size_), row_size_);
    }
    return out;
}

}  // namespace plab
