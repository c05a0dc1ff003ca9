// BlockManager: the KV cache's bookkeeping, host only (nano-vllm's block
// manager; PagedAttention, Kwon et al. 2023).
//
// What it teaches: a paged KV cache is a pool of fixed-size blocks and a
// block table per sequence (logical block -> physical block), like pages and
// a page table. Which block holds what is pure bookkeeping — a free list,
// reference counts, and the LRU queue of *cached free* blocks (freed blocks
// that still hold a named prefix, runtime/prefix_cache.h) — so the scheduler
// decides with it alone, and nothing here touches a device. The K/V
// themselves live in runtime/kv_storage.h.
//
// A block whose last reference goes away returns to the free list, or, when
// the prefix cache named it, to the end of the LRU queue: a request that
// needs a fresh block takes never-used ones first, then evicts the least
// recently freed cached block (the prefix cache forgets its name).
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <span>
#include <vector>

#include "core/mask.h"

namespace plab {

// One sequence's view of the cache.
struct Sequence {
    std::vector<int32_t> block_table;  // physical block of logical block i
    int length = 0;                    // positions stored (0..length-1)
    int id = 0;                        // the request it belongs to (traces, the viewer)
    // Hash-chain names of its first full blocks (prefix cache), logical order.
    std::vector<std::uint64_t> block_hashes;
};

// Counters of the pool since it was made.
struct PoolCounters {
    long long evictions = 0;  // cached free blocks taken for new content
};

class BlockManager {
public:
    BlockManager(int block_size, int num_blocks);
    BlockManager(const BlockManager&) = delete;
    BlockManager& operator=(const BlockManager&) = delete;

    int block_size() const { return block_size_; }
    int num_blocks() const { return num_blocks_; }
    // Blocks a new position may take: never-used ones plus cached free ones.
    int free_blocks() const { return static_cast<int>(free_list_.size() + lru_.size()); }
    // Free blocks that still hold a cached prefix (evicted last-freed last).
    int cached_free_blocks() const { return static_cast<int>(lru_.size()); }
    int blocks_in_use() const { return num_blocks_ - free_blocks(); }

    // Makes room for n more positions of `seq`, allocating blocks as needed, and
    // returns their slots. Throws plab::Error when the pool is exhausted.
    std::vector<int32_t> reserve(Sequence& seq, int n);
    // Blocks reserve(seq, n) would take from the pool.
    int new_blocks_for(const Sequence& seq, int n) const;
    // Gives back every block of `seq` (reference counts drop; free at zero;
    // a cached block goes to the cached free queue, its last block first, so
    // that a prefix's tail is evicted before its head).
    void release(Sequence& seq);
    // Forgets positions new_length..length-1 of `seq` (speculative decoding's
    // rejected guesses): the blocks that then hold none of its positions go
    // back to the pool, table entries and prefix names past new_length go too
    // (a block named by the prefix cache must never hold a rejected guess, so
    // names of blocks that are no longer full are dropped). The K/V left in a
    // partly kept block's tail are overwritten by the next positions.
    void truncate(Sequence& seq, int new_length);
    // Gives back the blocks of `seq` that `mask` lets no query at position
    // seq.length or later see (a sliding window's old blocks, a finished
    // chunk's or document's); their table entries become kFreedBlock
    // (core/kv_layout.h). Only full blocks: a partly filled one still takes
    // the next positions. Returns how many blocks it gave back. Under the
    // causal mask, nothing: every later query sees every key.
    int free_forgotten(Sequence& seq, const Mask& mask);
    // Blocks of `seq` given back so far (kFreedBlock entries of its table).
    static int freed_blocks(const Sequence& seq);
    // Adds one reference to a block in use (prefix sharing).
    void retain(int block);
    int ref_count(int block) const { return ref_counts_[static_cast<std::size_t>(block)]; }
    const PoolCounters& counters() const { return counters_; }

    // ---- what the prefix cache asks of the bookkeeping ----------------------
    // Marks a block in use as holding a named prefix: freed, it waits on the
    // LRU queue instead of the free list.
    void mark_cached(int block);
    bool is_cached(int block) const { return cached_[static_cast<std::size_t>(block)]; }
    // One more reference to a cached block, in use or waiting on the queue
    // (then it leaves the queue: a prefix hit).
    void reuse(int block);
    // Called with each cached block the pool evicts, before it is reused.
    void on_evict(std::function<void(int)> forget) { forget_ = std::move(forget); }

private:
    int allocate_block();
    void give_back(int block);  // its last reference is gone

    int block_size_;
    int num_blocks_;
    std::vector<int> free_list_;  // never-cached free blocks; a stack, lowest ids first
    std::vector<int> ref_counts_;
    std::vector<bool> cached_;
    std::list<int> lru_;  // cached free blocks; front: least recently freed, evicted first
    std::vector<std::list<int>::iterator> lru_pos_;
    std::function<void(int)> forget_;
    PoolCounters counters_;
};

}  // namespace plab
