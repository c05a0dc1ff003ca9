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
// KvCache owns the three; its users call the part that does the job
// (cache.blocks(), cache.prefix(), cache.storage()), so the split shows where it is used.
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
    const PrefixCache& prefix() const { return prefix_; }
    KvStorage& storage() { return storage_; }
    const KvStorage& storage() const { return storage_; }

    // What the three parts answer together: bytes of the blocks in use (whole
    // blocks: a half-full block costs a block). Everything else is asked of
    // the part that knows it: cache.blocks().reserve(...), cache.prefix().match(...),
    // cache.storage().k_pool(layer).
    std::size_t bytes_in_use() const {
        return std::size_t(blocks_.blocks_in_use()) * blocks_.block_size() *
               storage_.bytes_per_token();
    }

private:
    BlockManager blocks_;
    PrefixCache prefix_;
    KvStorage storage_;
};

}  // namespace plab
