// The paged KV cache (PagedAttention, Kwon et al. 2023).
//
// What it teaches: attention at position p needs K and V of positions 0..p.
// Prefill computes them for the whole prompt; the cache *keeps* them so that
// each decode step computes K/V for its one new token only, instead of
// recomputing the whole prefix. Storage is a pool of fixed-size blocks per
// layer, like pages; a sequence owns a block table (logical block -> physical
// block). Blocks are reference-counted so a shared prefix can be reused.
//
// Prefix caching (vLLM's automatic prefix caching, SGLang's RadixAttention in
// block form): a full block is named by a hash chain — the hash of its
// parent block's hash, its own token ids and the model's identity (a salt) —
// so equal hashes mean an equal prefix of tokens, not just an equal block.
// A block whose last reference goes away keeps its K/V and its name on an
// LRU queue of *cached free* blocks: a later request with the same prefix
// takes it back (a hit: those positions are not computed again); a request
// that needs a fresh block takes never-used ones first, then evicts the
// least recently freed cached block.
//
// Host side: block tables, free list, reference counts. Backend side: the
// pools themselves, // (L) × K and V, each (num_blocks, B, Hkv, Dh) row-major
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/backend.h"
#include "core/mask.h"
#include "model/config.h"

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

// Which half of the cache a read returns: the keys or the values.
enum class KvPart { K, V };

class KvCache {
public:
    KvCache(Backend& backend, const ModelConfig& config, int block_size, int num_blocks);

    int block_size() const { return block_size_; }
    int num_blocks() const { return num_blocks_; }
    // Blocks a new position may take: never-used ones plus cached free ones.
    int free_blocks() const { return static_cast<int>(free_list_.size() + lru_.size()); }
    // Free blocks that still hold a cached prefix (evicted last-freed last).
    int cached_free_blocks() const { return static_cast<int>(lru_.size()); }
    int blocks_in_use() const { return num_blocks_ - free_blocks(); }
    // Bytes of K+V one position occupies across all layers.
    std::size_t bytes_per_token() const;
    // Bytes of the blocks currently in use (whole blocks: a half-full block costs a block).
    std::size_t bytes_in_use() const;

    // Makes room for n more positions of `seq`, allocating blocks as needed, and
    // returns their slots. Throws plab::Error when the pool is exhausted.
    std::vector<int32_t> reserve(Sequence& seq, int n);
    // Blocks reserve(seq, n) would take from the pool.
    int new_blocks_for(const Sequence& seq, int n) const;
    // Gives back every block of `seq` (reference counts drop; free at zero;
    // a named block goes to the cached free queue, its last block first, so
    // that a prefix's tail is evicted before its head).
    void release(Sequence& seq);
    // Gives back the blocks of `seq` that `mask` lets no query at position
    // seq.length or later see (a sliding window's old blocks, a finished
    // chunk's or document's); their table entries become kFreedBlock
    // (core/kv_layout.h). Only full blocks: a partly filled one still takes
    // the next positions. Returns how many blocks it gave back. Under the
    // causal mask, nothing: every later query sees every key.
    int free_forgotten(Sequence& seq, const Mask& mask);
    // Blocks of `seq` given back so far (kFreedBlock entries of its table).
    static int freed_blocks(const Sequence& seq);
    // Adds one reference to a block (prefix sharing).
    void retain(int block);
    int ref_count(int block) const { return ref_counts_[block]; }

    // ---- prefix cache ---------------------------------------------------------
    // The name of a full block: the parent block's name (0 for the first
    // block), the block's B token ids and the model's identity, mixed.
    static std::uint64_t block_hash(std::uint64_t parent, std::span<const int32_t> tokens,
                                    std::uint64_t salt);
    // The physical blocks holding the longest cached prefix of `tokens`, in
    // full blocks (a partial block is never shared: the next position would
    // write into it). Each hit is checked against the block's stored token ids
    // and parent, so a hash collision cannot return a wrong block. Takes no
    // reference: share_prefix does.
    std::vector<int> match_prefix(std::span<const int32_t> tokens, std::uint64_t salt) const;
    // Starts an empty `seq` on `blocks` (from match_prefix): one more
    // reference each (a cached free block leaves the queue), length = blocks·B.
    void share_prefix(Sequence& seq, const std::vector<int>& blocks);
    // Names the full blocks of `seq` not named yet; `tokens` are its token
    // ids, at least seq.length of them. A block whose name another block
    // already has (two requests computed the same prefix at once) stays
    // unnamed: one copy is cached, the other freed plainly.
    void name_full_blocks(Sequence& seq, std::span<const int32_t> tokens, std::uint64_t salt);
    // Whether a block has a name (is or may become a cached block).
    bool is_named(int block) const { return named_[static_cast<std::size_t>(block)]; }
    const PoolCounters& counters() const { return counters_; }

    Buffer k_pool(int layer) const { return k_pools_[layer].buf(); }
    Buffer v_pool(int layer) const { return v_pools_[layer].buf(); }
    int row_size() const { return row_size_; }  // Hkv · Dh floats per position per layer

    // K or V of `seq`'s positions 0..length-1 for one layer, in logical order,
    // downloaded to the host: // (length, Hkv·Dh). For equivalence reports.
    // Positions whose block was freed (free_forgotten) are gone: they read as 0.
    std::vector<float> read(const Sequence& seq, int layer, KvPart part) const;
    // The inverse: uploads `data` (positions 0..n-1 of `seq`, (n, Hkv·Dh)) into
    // its slots — K/V handed over from another engine's pool.
    void write(const Sequence& seq, int layer, KvPart part, const std::vector<float>& data);

private:
    int allocate_block();

    Backend& backend_;
    int n_layers_;
    int block_size_;
    int num_blocks_;
    int row_size_;
    std::vector<DeviceArray> k_pools_;
    std::vector<DeviceArray> v_pools_;
    void give_back(int block);  // its last reference is gone

    std::vector<int> free_list_;  // never-named free blocks; a stack, lowest ids first
    std::vector<int> ref_counts_;
    // Prefix cache: a named block's hash, parent hash and token ids (to check a
    // hit), the name -> block map, and the LRU queue of cached free blocks.
    std::vector<bool> named_;
    std::vector<std::uint64_t> hash_, parent_;
    std::vector<std::vector<int32_t>> tokens_;
    std::unordered_map<std::uint64_t, int> by_hash_;
    std::list<int> lru_;  // front: least recently freed, evicted first
    std::vector<std::list<int>::iterator> lru_pos_;
    PoolCounters counters_;
};

}  // namespace plab
