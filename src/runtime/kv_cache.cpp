#include "runtime/kv_cache.h"

#include <algorithm>
#include <iterator>

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
    ref_counts_.assign(static_cast<std::size_t>(num_blocks), 0);
    named_.assign(static_cast<std::size_t>(num_blocks), false);
    hash_.assign(static_cast<std::size_t>(num_blocks), 0);
    parent_.assign(static_cast<std::size_t>(num_blocks), 0);
    tokens_.resize(static_cast<std::size_t>(num_blocks));
    lru_pos_.resize(static_cast<std::size_t>(num_blocks), lru_.end());
    for (int b = num_blocks - 1; b >= 0; --b) free_list_.push_back(b);
}

std::size_t KvCache::bytes_per_token() const {
    return 2 * std::size_t(n_layers_) * row_size_ * sizeof(float);
}

std::size_t KvCache::bytes_in_use() const {
    return std::size_t(blocks_in_use()) * block_size_ * bytes_per_token();
}

int KvCache::allocate_block() {
    PLAB_CHECK(free_blocks() > 0, "KV cache is full: all " << num_blocks_ << " blocks of "
                                                           << block_size_
                                                           << " positions are in use");
    int b;
    if (!free_list_.empty()) {  // a never-named block first: evicting costs a future hit
        b = free_list_.back();
        free_list_.pop_back();
    } else {  // then the least recently freed cached block loses its name
        b = lru_.front();
        lru_.pop_front();
        lru_pos_[b] = lru_.end();
        by_hash_.erase(hash_[b]);
        named_[b] = false;
        tokens_[b].clear();
        ++counters_.evictions;
    }
    ref_counts_[b] = 1;
    return b;
}

void KvCache::give_back(int b) {
    if (named_[b]) {
        lru_.push_back(b);
        lru_pos_[b] = std::prev(lru_.end());
    } else {
        free_list_.push_back(b);
    }
}

int KvCache::new_blocks_for(const Sequence& seq, int n) const {
    const int blocks_needed = (seq.length + n + block_size_ - 1) / block_size_;
    return std::max(0, blocks_needed - static_cast<int>(seq.block_table.size()));
}

std::vector<int32_t> KvCache::reserve(Sequence& seq, int n) {
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
        if (--ref_counts_[entry] == 0) give_back(entry);
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

std::uint64_t KvCache::block_hash(std::uint64_t parent, std::span<const int32_t> tokens,
                                  std::uint64_t salt) {
    // splitmix64 finaliser over (salt, parent, each token): every input word
    // changes every output bit. 64 bits make a collision unlikely, and
    // match_prefix checks the tokens anyway, so one would cost a miss, never a
    // wrong answer.
    auto mix = [](std::uint64_t z) {
        z += 0x9e3779b97f4a7c15ULL;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    };
    std::uint64_t h = mix(salt ^ 0x70726566696c6cULL);  // "prefill"
    h = mix(h ^ parent);
    for (int32_t t : tokens) h = mix(h ^ static_cast<std::uint32_t>(t));
    return h == 0 ? 1 : h;  // 0 is the first block's parent
}

std::vector<int> KvCache::match_prefix(std::span<const int32_t> tokens, std::uint64_t salt) const {
    std::vector<int> blocks;
    std::uint64_t parent = 0;
    for (std::size_t lb = 0; (lb + 1) * block_size_ <= tokens.size(); ++lb) {
        const auto block_tokens = tokens.subspan(lb * block_size_, block_size_);
        const std::uint64_t h = block_hash(parent, block_tokens, salt);
        const auto found = by_hash_.find(h);
        if (found == by_hash_.end()) break;
        const int b = found->second;
        if (parent_[b] != parent ||
            !std::equal(block_tokens.begin(), block_tokens.end(), tokens_[b].begin()))
            break;  // a collision: same name, other tokens
        blocks.push_back(b);
        parent = h;
    }
    return blocks;
}

void KvCache::share_prefix(Sequence& seq, const std::vector<int>& blocks) {
    PLAB_ASSERT(seq.length == 0 && seq.block_table.empty());
    for (int b : blocks) {
        PLAB_ASSERT(named_[b]);
        if (ref_counts_[b] == 0) {  // a cached free block comes back into use
            lru_.erase(lru_pos_[b]);
            lru_pos_[b] = lru_.end();
        }
        ++ref_counts_[b];
        seq.block_table.push_back(b);
        seq.block_hashes.push_back(hash_[b]);
    }
    seq.length = static_cast<int>(blocks.size()) * block_size_;
}

void KvCache::name_full_blocks(Sequence& seq, std::span<const int32_t> tokens, std::uint64_t salt) {
    PLAB_ASSERT(static_cast<int>(tokens.size()) >= seq.length);
    const std::size_t full = static_cast<std::size_t>(seq.length / block_size_);
    while (seq.block_hashes.size() < full) {
        const std::size_t lb = seq.block_hashes.size();
        const std::uint64_t parent = lb == 0 ? 0 : seq.block_hashes[lb - 1];
        const auto block_tokens = tokens.subspan(lb * block_size_, block_size_);
        const std::uint64_t h = block_hash(parent, block_tokens, salt);
        const int b = seq.block_table[lb];
        PLAB_ASSERT(b != kFreedBlock);
        if (!named_[b] && by_hash_.find(h) == by_hash_.end()) {
            named_[b] = true;
            hash_[b] = h;
            parent_[b] = parent;
            tokens_[b].assign(block_tokens.begin(), block_tokens.end());
            by_hash_.emplace(h, b);
        }
        seq.block_hashes.push_back(h);
    }
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

namespace plab {

void KvCache::write(const Sequence& seq, int layer, KvPart part, const std::vector<float>& data) {
    PLAB_ASSERT(layer >= 0 && layer < n_layers_);
    PLAB_ASSERT(data.size() % static_cast<std::size_t>(row_size_) == 0);
    const int n = static_cast<int>(data.size() / static_cast<std::size_t>(row_size_));
    PLAB_ASSERT(n <= seq.length);
    const Buffer pool = part == KvPart::V ? v_pools_[layer].buf() : k_pools_[layer].buf();
    for (int pos = 0; pos < n; ++pos) {
        const int slot = kv_slot(seq.block_table.data(), pos, block_size_);
        backend_.upload(pool.slice(std::size_t(slot) * row_size_, row_size_),
                        data.data() + std::size_t(pos) * row_size_, row_size_);
    }
}

}  // namespace plab
