// The paged KV cache (PagedAttention, Kwon et al. 2023), in three parts as
// nano-vllm has them:
//
//   // clang-format off
//   BlockManager  (runtime/block_manager.h)  host: block tables, free list,
//                                            reference counts, LRU of cached free blocks
//   PrefixCache   (runtime/prefix_cache.h)   host: hash-chain names of full blocks;
//                                            match, share, name
//   KvStorage     (runtime/kv_storage.h)     backend: the K and V pools of every layer
//   // clang-format on
//
// What it teaches: attention at position p needs K and V of positions 0..p.
// Prefill computes them for the whole prompt; the cache *keeps* them so that
// each decode step computes K/V for its one new token only, instead of
// recomputing the whole prefix. The scheduler decides with the two host parts
// alone (runtime/scheduler.h); the forward pass writes and reads the storage.
// KvCache owns the three and answers for them where a caller wants one cache
// (a Session, the engine, the viewer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/backend.h"
#include "core/mask.h"
#include "model/config.h"
#include "runtime/block_manager.h"
#include "runtime/kv_storage.h"
#include "runtime/prefix_cache.h"

namespace plab {

class KvCache {
public:
    KvCache(Backend& backend, const ModelConfig& config, int block_size, int num_blocks);
    KvCache(const KvCache&) = delete;
    KvCache& operator=(const KvCache&) = delete;

    // The three parts.
    BlockManager& blocks() { return blocks_; }
    const BlockManager& blocks() const { return blocks_; }
    PrefixCache& prefix() { return prefix_; }
    KvStorage& storage() { return storage_; }
    const KvStorage& storage() const { return storage_; }

    // ---- the bookkeeping (BlockManager) -----------------------------------
    int block_size() const { return blocks_.block_size(); }
    int num_blocks() const { return blocks_.num_blocks(); }
    int free_blocks() const { return blocks_.free_blocks(); }
    int cached_free_blocks() const { return blocks_.cached_free_blocks(); }
    int blocks_in_use() const { return blocks_.blocks_in_use(); }
    std::vector<int32_t> reserve(Sequence& seq, int n) { return blocks_.reserve(seq, n); }
    int new_blocks_for(const Sequence& seq, int n) const { return blocks_.new_blocks_for(seq, n); }
    void release(Sequence& seq) { blocks_.release(seq); }
    int free_forgotten(Sequence& seq, const Mask& mask) {
        return blocks_.free_forgotten(seq, mask);
    }
    static int freed_blocks(const Sequence& seq) { return BlockManager::freed_blocks(seq); }
    void retain(int block) { blocks_.retain(block); }
    int ref_count(int block) const { return blocks_.ref_count(block); }
    const PoolCounters& counters() const { return blocks_.counters(); }

    // ---- the prefix cache (PrefixCache) -----------------------------------
    static std::uint64_t block_hash(std::uint64_t parent, std::span<const int32_t> tokens,
                                    std::uint64_t salt) {
        return PrefixCache::block_hash(parent, tokens, salt);
    }
    std::vector<int> match_prefix(std::span<const int32_t> tokens, std::uint64_t salt) const {
        return prefix_.match(tokens, salt);
    }
    void share_prefix(Sequence& seq, const std::vector<int>& b) { prefix_.share(seq, b); }
    void name_full_blocks(Sequence& seq, std::span<const int32_t> tokens, std::uint64_t salt) {
        prefix_.name_full_blocks(seq, tokens, salt);
    }
    // Whether a block has a name (is or may become a cached block).
    bool is_named(int block) const { return blocks_.is_cached(block); }

    // ---- the storage (KvStorage) ------------------------------------------
    Buffer k_pool(int layer) const { return storage_.k_pool(layer); }
    Buffer v_pool(int layer) const { return storage_.v_pool(layer); }
    int row_size() const { return storage_.row_size(); }
    std::size_t bytes_per_token() const { return storage_.bytes_per_token(); }
    // Bytes of the blocks currently in use (whole blocks: a half-full block costs a block).
    std::size_t bytes_in_use() const {
        return std::size_t(blocks_in_use()) * block_size() * bytes_per_token();
    }
    std::vector<float> read(const Sequence& seq, int layer, KvPart part) const {
        return storage_.read(seq, layer, part);
    }
    void write(const Sequence& seq, int layer, KvPart part, const std::vector<float>& data) {
        storage_.write(seq, layer, part, data);
    }

private:
    BlockManager blocks_;
    PrefixCache prefix_;
    KvStorage storage_;
};

}  // namespace plab
