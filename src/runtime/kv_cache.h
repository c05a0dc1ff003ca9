// The paged KV cache (PagedAttention, Kwon et al. 2023).
//
// What it teaches: attention at position p needs K and V of positions 0..p.
// Prefill computes them for the whole prompt; the cache *keeps* them so that
// each decode step computes K/V for its one new token only, instead of
// recomputing the whole prefix. Storage is a pool of fixed-size blocks per
// layer, like pages; a sequence owns a block table (logical block -> physical
// block). Blocks are reference-counted so a shared prefix can be reused.
//
// Host side: block tables, free list, reference counts. Backend side: the
// pools themselves, // (L) × K and V, each (num_blocks, B, Hkv, Dh) row-major
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "core/mask.h"
#include "model/config.h"

namespace plab {

// One sequence's view of the cache.
struct Sequence {
    std::vector<int32_t> block_table;  // physical block of logical block i
    int length = 0;                    // positions stored (0..length-1)
};

// Which half of the cache a read returns: the keys or the values.
enum class KvPart { K, V };

class KvCache {
public:
    KvCache(Backend& backend, const ModelConfig& config, int block_size, int num_blocks);

    int block_size() const { return block_size_; }
    int num_blocks() const { return num_blocks_; }
    int free_blocks() const { return static_cast<int>(free_list_.size()); }
    int blocks_in_use() const { return num_blocks_ - free_blocks(); }
    // Bytes of K+V one position occupies across all layers.
    std::size_t bytes_per_token() const;
    // Bytes of the blocks currently in use (whole blocks: a half-full block costs a block).
    std::size_t bytes_in_use() const;

    // Makes room for n more positions of `seq`, allocating blocks as needed, and
    // returns their slots. Throws plab::Error when the pool is exhausted.
    std::vector<int32_t> reserve(Sequence& seq, int n);
    // Gives back every block of `seq` (reference counts drop; free at zero).
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

    Buffer k_pool(int layer) const { return k_pools_[layer].buf(); }
    Buffer v_pool(int layer) const { return v_pools_[layer].buf(); }
    int row_size() const { return row_size_; }  // Hkv · Dh floats per position per layer

    // K or V of `seq`'s positions 0..length-1 for one layer, in logical order,
    // downloaded to the host: // (length, Hkv·Dh). For equivalence reports.
    // Positions whose block was freed (free_forgotten) are gone: they read as 0.
    std::vector<float> read(const Sequence& seq, int layer, KvPart part) const;

private:
    int allocate_block();

    Backend& backend_;
    int n_layers_;
    int block_size_;
    int num_blocks_;
    int row_size_;
    std::vector<DeviceArray> k_pools_;
    std::vector<DeviceArray> v_pools_;
    std::vector<int> free_list_;  // a stack: lowest block ids handed out first
    std::vector<int> ref_counts_;
};

}  // namespace plab
