// Where a position's keys and values live in the paged KV cache.
//
// What it teaches: PagedAttention (Kwon et al. 2023) stores a sequence's K/V
// in fixed-size *blocks* taken from a shared pool, like pages of virtual
// memory. A sequence's *block table* maps logical block i (positions
// i*B .. i*B+B-1) to a physical block of the pool. One layer's pool is laid out
//
//   // (num_blocks, B, Hkv, Dh) row-major, one pool for K and one for V
//
// so a *slot* (physical block * B + offset) holds the Hkv*Dh numbers of one
// position. Every backend, CPU or GPU, finds K/V through these functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/hd.h"

namespace plab {

// A block table entry whose block went back to the pool: every position of
// it is one the mask lets no present or future query see (core/mask.h
// Mask::forgets), so nothing may read through it. Kernels that load a whole
// tile of keys test kv_block_freed() and load nothing for such keys.
constexpr int kFreedBlock = -1;

PLAB_HD inline bool kv_block_freed(const int* block_table, int pos, int block_size) {
    return block_table[pos / block_size] == kFreedBlock;
}

// Physical slot of logical position `pos` for a sequence with this block table.
PLAB_HD inline int kv_slot(const int* block_table, int pos, int block_size) {
    return block_table[pos / block_size] * block_size + pos % block_size;
}

// Offset (in floats) of kv head `kv_head` of slot `slot` in a layer's pool.
PLAB_HD inline long long kv_offset(int slot, int kv_head, int n_kv_heads, int head_dim) {
    return (static_cast<long long>(slot) * n_kv_heads + kv_head) * head_dim;
}

// Grouped-query attention (Ainslie et al. 2023): H query heads share Hkv K/V
// heads, H/Hkv query heads per group.
PLAB_HD inline int kv_head_of(int head, int n_heads, int n_kv_heads) {
    return head / (n_heads / n_kv_heads);
}

// How many of values[i], values[i + 1], ... go up by one from values[i] (at
// least 1): a run of consecutive positions (one sequence's rows of a step,
// rotated from its first position) or of consecutive slots (positions that
// share a block, written side by side). Host code only.
inline std::size_t consecutive_run(std::span<const int32_t> values, std::size_t i) {
    std::size_t n = 1;
    while (i + n < values.size() && values[i + n] == values[i] + static_cast<int32_t>(n)) ++n;
    return n;
}

}  // namespace plab
