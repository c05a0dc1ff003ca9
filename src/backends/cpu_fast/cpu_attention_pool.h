// The fast backend's attention for a few queries (a decode step): the two
// products read K and V straight from the paged KV cache, with no gathered
// copy of the cache per call.
//
// What it teaches: for one query, attention is a pass over the cached K and V
// — two multiply-adds per value read — so decode attention is set by how many
// bytes it touches, not by FLOPs. The prefill path first gathers every key
// into Kᵀ/V panels so that 48 queries can share each load; for one query that
// copy would cost more than the attention itself (in a batched decode step of
// 64 sequences it was the largest item of the step).
//
// Same bits as the GEMM path (cpu_gemm.h), by construction: a score is one
// FMA chain over d from +0, s_j = fma(q[d], K[j][d], s_j) for d = 0..Dh-1,
// computed for key j in vector lane j % lanes() (a vector of keys' rows is
// read and transposed in registers); an output component is one FMA chain over
// the keys in increasing order from +0, o[d] = fma(e_j, V[j][d], o[d]), the
// same chain the GEMM runs. A freed block's keys read as zeros, as in the
// gathered copy. So a token's values do not depend on which path ran it:
// decode one token at a time gives the bits of prefilling the same tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "backends/cpu_fast/cpu_key_mirror.h"

namespace plab::cpu_attention {

// Where each cached key's row starts in a layer's pool (K and V alike):
// key_rows[j] = slot(j) · row, or -1 for a key of a freed block. Made once per
// call (key_rows_of), so the products do no block-table arithmetic per head
// (two integer divisions a key and head cost as much as the products here).
void key_rows_of(std::ptrdiff_t* key_rows, std::span<const int32_t> block_table, int block_size,
                 int row, int n_keys);

// One KV head's view of a layer's pool.
struct PoolHead {
    const float* pool = nullptr;  // k_pool or v_pool of the layer: (slots, row) floats
    const std::ptrdiff_t* key_rows = nullptr;
    int offset = 0;  // this head's first float in a slot: g·Dh
    int head_dim = 0;
};

// One KV head's view of a layer's K mirror (cpu_key_mirror.h).
struct MirrorHead {
    const KeyMirror* mirror = nullptr;
    const int32_t* block_table = nullptr;  // the sequence's
    int offset = 0;                        // this head's first feature: g·Dh
    int head_dim = 0;
};

// A row of at least n zeros (this thread's, grown as needed): the row read for
// a freed block's key and for the keys past the cache.
const float* zero_row(int n);

// scores[j - k0] = q · K[j] for keys j in [k0, k1); k0 a multiple of lanes().
void scores_from_pool(float* scores, const float* q, int k0, int k1, const PoolHead& k);
// The same scores, bit for bit, from the mirror: component d of a vector of
// keys is one load, no transpose. k0 a multiple of lanes().
void scores_from_mirror(float* scores, const float* q, int k0, int k1, const MirrorHead& k);

// out[d] = sum over j in [k0, k1) of e[j - k0] · V[j][d], for d < Dh, in
// increasing j from +0 (not yet divided by the softmax's sum).
void weighted_values_from_pool(float* out, const float* e, int k0, int k1, const PoolHead& v);

}  // namespace plab::cpu_attention
