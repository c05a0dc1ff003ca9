// The attention ladder: the steps from the simplest correct kernel to flash
// attention, each its own short file, each runnable and counted.
//
//   // clang-format off
//   rung     file                     idea                                              vs cpu-ref
//   naive    attention_naive.cu       one thread per (query, head); pass 1 the max,     bitwise
//                                     pass 2 the weights, denominator and outputs
//   online   attention_online.cu      one thread per (query, head), one pass: a         tolerance
//                                     running max m, denominator l and output rescaled
//                                     when m grows (Milakov & Gimelshein 2018)
//   tiled    attention_tiled.cu       a block owns a query tile; K and V tiles in       = online,
//                                     shared memory, read once per block instead of     bit for bit
//                                     once per query (FlashAttention-2's loop order)
//   flash    attention_flash_*.cu(h)  the gpu backend's kernel: scores and outputs in   tolerance
//                                     registers, a whole tile's rescale at once,
//                                     empty tiles skipped, long rows split
//   // clang-format on
//
// What each rung changes is where the numbers come from and how often, not
// what they are: naive sums exactly as cpu-ref does (so it is bitwise equal);
// online changes the order of the rescales (a few ulps); tiled reads the same
// keys from shared memory in the same order, so it equals online bit for bit.
// Every rung is chunk-invariant: a row's keys and their order depend on its
// position only (key tiles start at position 0).
//
// Counting. Under the SIMT emulator each rung adds, where it reads a K or V
// row from global memory, that row's bytes, and where it computes, the
// floating-point operations it executes (a multiply-add is 2): what
// `plab bench --attention-ladder` reports. These are the kernel's own counts,
// made by the emulated run; the emulator's wall time says nothing about a GPU
// (it runs threads one after another on a CPU). Natively the counters compile
// to nothing.
#pragma once

#include <cstdint>

#include "attention_ladder_run.h"
#include "core/attention_math.h"
#include "simt/simt.h"

namespace plab {

#if PLAB_SIMT_EMULATED
inline LadderCounts& ladder_counts() {
    static LadderCounts counts;  // fibers run on one OS thread: a plain counter
    return counts;
}
inline void ladder_counts_reset() {
    ladder_counts() = {};
}
inline LadderCounts ladder_counts_now() {
    return ladder_counts();
}
#define PLAB_LADDER_COUNT(bytes, ops)                \
    do {                                             \
        ::plab::ladder_counts().kv_bytes += (bytes); \
        ::plab::ladder_counts().flops += (ops);      \
    } while (0)
#else
#define PLAB_LADDER_COUNT(bytes, ops) ((void)0)
inline void ladder_counts_reset() {}
inline LadderCounts ladder_counts_now() {
    return {};
}
#endif

// A K or V row of the paged cache: position j of kv head g.
PLAB_HD inline const float* ladder_kv_row(const float* pool, const int32_t* block_table,
                                          const AttentionShape& s, int g, int j) {
    return pool + kv_offset(kv_slot(block_table, j, s.block_size), g, s.n_kv_heads, s.head_dim);
}

// The query row a one-thread-a-row rung works on: row = i * H + h of q and
// out (C, H, Dh), query i at position pos0 + i, head h reading K/V head g.
struct LadderQuery {
    int h, pos, g;
    const float* q;
    float* out;
};
PLAB_HD inline LadderQuery ladder_query(int row, const float* q, float* out,
                                        const AttentionShape& s) {
    const int h = row % s.n_heads;
    const long long at = static_cast<long long>(row) * s.head_dim;
    return {h, s.pos0 + row / s.n_heads, kv_head_of(h, s.n_heads, s.n_kv_heads), q + at, out + at};
}

// One key's step of the online softmax on a row's state (running max m,
// denominator l, output o of dh components): score s, the key's V row vj.
// When s raises the max, what was summed so far is rescaled by
// exp(m_old - m_new) first (exp(-inf) = 0 at the row's first key).
// The online and tiled rungs run this very step; its operations, counted:
// 2 for the rescale, 2 for the weight, 2 for l, 3 a component for o.
// (V: a pointer to float, or a checked one into shared memory.)
template <typename V>
PLAB_HD inline void online_softmax_step(float& m, float& l, float* o, float s, V vj, int dh) {
    const float m_new = attention_max_step(m, s);
    const float rescale = strict_expf(strict_sub(m, m_new));
    const float e = attention_weight(s, m_new);
    l = strict_add(strict_mul(l, rescale), e);
    for (int d = 0; d < dh; ++d) o[d] = strict_add(strict_mul(o[d], rescale), strict_mul(e, vj[d]));
    m = m_new;
}
PLAB_HD inline long long online_step_flops(int dh) {
    return 3LL * dh + 6;
}
// A score: dh multiplies and adds, then the scale.
PLAB_HD inline long long score_flops(int dh) {
    return 2LL * dh + 1;
}

}  // namespace plab
