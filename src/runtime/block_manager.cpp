#include "runtime/block_manager.h"

#include <algorithm>
#include <iterator>

#include "core/error.h"
#include "core/kv_layout.h"

namespace plab {

BlockManager::BlockManager(int block_size, int num_blocks)
    : block_size_(block_size), num_blocks_(num_blocks) {
    PLAB_CHECK(block_size >= 1 && block_size <= 4096,
               "KV block size " << block_size << " must be between 1 and 4096 positions");
    PLAB_CHECK(num_blocks >= 1, "the KV cache needs at least one block, got " << num_blocks);
    ref_counts_.assign(static_cast<std::size_t>(num_blocks), 0);
    cached_.assign(static_cast<std::size_t>(num_blocks), false);
    lru_pos_.resize(static_cast<std::size_t>(num_blocks), lru_.end());
    for (int b = num_blocks - 1; b >= 0; --b) free_list_.push_back(b);
}

int BlockManager::allocate_block() {
    PLAB_CHECK(free_blocks() > 0, "KV cache is full: all " << num_blocks_ << " blocks of "
                                                           << block_size_
                                                           << " positions are in use");
    int b;
    if (!free_list_.empty()) {  // a never-cached block first: evicting costs a future hit
        b = free_list_.back();
        free_list_.pop_back();
    } else {  // then the least recently freed cached block loses its name
        b = lru_.front();
        lru_.pop_front();
        lru_pos_[b] = lru_.end();
        cached_[b] = false;
        if (forget_) forget_(b);
        ++counters_.evictions;
    }
    ref_counts_[b] = 1;
    return b;
}

void BlockManager::give_back(int b) {
    if (cached_[b]) {
        lru_.push_back(b);
        lru_pos_[b] = std::prev(lru_.end());
    } else {
        free_list_.push_back(b);
    }
}

int BlockManager::new_blocks_for(const Sequence& seq, int n) const {
    const int blocks_needed = (seq.length + n + block_size_ - 1) / block_size_;
    return std::max(0, blocks_needed - static_cast<int>(seq.block_table.size()));
}

std::vector<int32_t> BlockManager::reserve(Sequence& seq, int n) {
    PLAB_ASSERT(n >= 0);
    // Check capacity first, so that a refused request leaves the sequence untouched.
    const int new_blocks = new_blocks_for(seq, n);
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

int BlockManager::free_forgotten(Sequence& seq, const Mask& mask) {
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
        if (--ref_counts_[entry] == 0) give_back(entry);
        entry = kFreedBlock;
        ++freed;
    }
    return freed;
}

int BlockManager::freed_blocks(const Sequence& seq) {
    return static_cast<int>(
        std::count(seq.block_table.begin(), seq.block_table.end(), kFreedBlock));
}

void BlockManager::release(Sequence& seq) {
    // Last block first: on the LRU queue a prefix's tail is then evicted before
    // its head, which more requests are likely to share.
    for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
        const int b = *it;
        if (b == kFreedBlock) continue;  // given back already
        PLAB_ASSERT(ref_counts_[b] > 0);
        if (--ref_counts_[b] == 0) give_back(b);
    }
    seq.block_table.clear();
    seq.block_hashes.clear();
    seq.length = 0;
}

void BlockManager::truncate(Sequence& seq, int new_length) {
    PLAB_ASSERT(new_length >= 0 && new_length <= seq.length);
    const std::size_t keep_blocks =
        static_cast<std::size_t>((new_length + block_size_ - 1) / block_size_);
    while (seq.block_table.size() > keep_blocks) {
        const int b = seq.block_table.back();
        seq.block_table.pop_back();
        if (b == kFreedBlock) continue;
        PLAB_ASSERT(ref_counts_[b] > 0);
        if (--ref_counts_[b] == 0) give_back(b);
    }
    const std::size_t full_blocks = static_cast<std::size_t>(new_length / block_size_);
    if (seq.block_hashes.size() > full_blocks) seq.block_hashes.resize(full_blocks);
    seq.length = new_length;
}

void BlockManager::retain(int block) {
    PLAB_ASSERT(block >= 0 && block < num_blocks_ && ref_counts_[block] > 0);
    ++ref_counts_[block];
}

void BlockManager::mark_cached(int block) {
    PLAB_ASSERT(block >= 0 && block < num_blocks_ && ref_counts_[block] > 0);
    cached_[block] = true;
}

void BlockManager::reuse(int block) {
    PLAB_ASSERT(block >= 0 && block < num_blocks_ && cached_[block]);
    if (ref_counts_[block] == 0) {  // a cached free block comes back into use
        lru_.erase(lru_pos_[block]);
        lru_pos_[block] = lru_.end();
    }
    ++ref_counts_[block];
}

}  // namespace plab
