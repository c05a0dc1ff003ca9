// The attention of one query, written once for every reference backend.
//
// What it teaches: masked softmax attention for the query at position p,
//
//   s_j = mod((q . k_j) * scale)       for the keys j the mask lets p see (core/mask.h)
//   s_j = -inf                         for the others: never read, probability exactly 0
//   e_j = exp(s_j - max_j s_j)         (subtracting the max keeps exp from overflowing)
//   out = (sum_j e_j v_j) / (sum_j e_j)
//
// where mod is the mask's score modifier (ALiBi, soft-capping; identity by
// default). Under the default causal mask the keys are j = 0..p.
// cpu-ref calls these functions for every (query, head); gpu-ref calls the
// very same functions from its threads (scores in shared memory). Every sum
// runs over the query's key range lo..hi in j order, so the bits do not depend
// on the device, on the chunk plan (a chunk's queries read earlier positions
// from the KV cache), or on the number of threads. Dividing once at the end (not multiplying by
// e_j / sum) makes the toy example exact: (2+4+8)/3 is 14/3 rounded once.
// Left out on purpose: speed. The fast backends tile and reorder these sums
// (online softmax) and so differ in the last bits; tests/engine measures by how much.
#pragma once

#include <cmath>

#include "core/hd.h"
#include "core/kv_layout.h"
#include "core/mask.h"
#include "core/strict_math.h"

namespace plab {

// Shapes of one attention call over a chunk of queries.
struct AttentionShape {
    int n_queries = 0;   // C: queries in this chunk; query i sits at position pos0 + i
    int pos0 = 0;        // position of the chunk's first query (= tokens already cached)
    int n_heads = 0;     // H
    int n_kv_heads = 0;  // Hkv
    int head_dim = 0;    // Dh
    int block_size = 0;  // B
    float scale = 0.0f;  // 1/sqrt(Dh), computed once on the host
    Mask mask;           // which keys each query sees, score modifiers (causal by default)

    // Keys in the cache when this chunk attends: positions 0..n_keys()-1.
    PLAB_HD int n_keys() const { return pos0 + n_queries; }
};

// The keys the query at query_pos may see, clamped to the cache: the loops
// below run over this range only, and visible() decides inside it. A mask may
// let a query see keys *after* itself (prefix-LM): the session makes sure
// those are in the cache (runtime/mask_spec.h, check_plan_for_mask).
PLAB_HD inline KeyRange attention_key_range(const AttentionShape& s, int query_pos) {
    const KeyRange r = s.mask.key_range(query_pos);
    return {mask_max(r.lo, 0), mask_min(r.hi, s.n_keys() - 1)};
}

// s_j for query row q (Dh floats of head `head`, at query_pos) against cached key
// position j: the scaled dot product, then the mask's score modifiers (ALiBi,
// soft-capping), or -inf where the mask hides key j. -inf is what a probe shows
// for a masked cell; the sums below skip those cells.
PLAB_HD inline float attention_score(const float* q, const float* k_pool, const int* block_table,
                                     const AttentionShape& s, int head, int query_pos, int j) {
    if (!s.mask.visible(query_pos, j)) return -INFINITY;
    const int kv_head = kv_head_of(head, s.n_heads, s.n_kv_heads);
    const int slot = kv_slot(block_table, j, s.block_size);
    const float* k = k_pool + kv_offset(slot, kv_head, s.n_kv_heads, s.head_dim);
    const float raw = strict_mul(strict_dot(q, k, s.head_dim), s.scale);
    return s.mask.modify_score(raw, head, query_pos, j);
}

// The softmax statistics of one query row, from its scores s_j over the
// query's key range (masked cells hold -inf and are skipped): the max, then
// the denominator sum_j exp(s_j - max), in j order.
struct SoftmaxStats {
    float max_score;
    float denominator;
};

PLAB_HD inline SoftmaxStats attention_softmax_stats(const float* scores, const AttentionShape& s,
                                                    int query_pos) {
    const KeyRange r = attention_key_range(s, query_pos);
    float m = -INFINITY;
    for (int j = r.lo; j <= r.hi; ++j) m = scores[j] > m ? scores[j] : m;
    float den = 0.0f;
    for (int j = r.lo; j <= r.hi; ++j) {
        if (scores[j] == -INFINITY) continue;  // masked
        den = strict_add(den, strict_expf(strict_sub(scores[j], m)));
    }
    return {m, den};
}

// Component d of the output: (sum_j e_j v_j[d]) / den over the visible keys, in j order.
PLAB_HD inline float attention_output(const float* scores, SoftmaxStats st, const float* v_pool,
                                      const int* block_table, const AttentionShape& s, int kv_head,
                                      int query_pos, int d) {
    const KeyRange r = attention_key_range(s, query_pos);
    float num = 0.0f;
    for (int j = r.lo; j <= r.hi; ++j) {
        if (scores[j] == -INFINITY) continue;  // masked
        const float ej = strict_expf(strict_sub(scores[j], st.max_score));
        const int slot = kv_slot(block_table, j, s.block_size);
        const float vj = v_pool[kv_offset(slot, kv_head, s.n_kv_heads, s.head_dim) + d];
        num = strict_add(num, strict_mul(ej, vj));
    }
    return strict_div(num, st.denominator);
}

// Probability p_j = e_j / den: what the viewer's heatmap shows (exactly 0 where masked).
PLAB_HD inline float attention_probability(const float* scores, SoftmaxStats st,
                                           const AttentionShape& s, int query_pos, int j) {
    if (!s.mask.visible(query_pos, j) || j >= s.n_keys()) return 0.0f;
    return strict_div(strict_expf(strict_sub(scores[j], st.max_score)), st.denominator);
}

// The probe's score of cell (query_pos, j): the modified score, -inf where masked.
PLAB_HD inline float attention_probe_score(const float* scores, const AttentionShape& s,
                                           int query_pos, int j) {
    if (!s.mask.visible(query_pos, j) || j >= s.n_keys()) return -INFINITY;
    return scores[j];
}

}  // namespace plab
