// The attention of one query, written once for every reference backend.
//
// What it teaches: causal softmax attention for the query at position p,
//
//   s_j = (q . k_j) * scale            for j = 0..p   (j > p is masked: never read)
//   e_j = exp(s_j - max_j s_j)         (subtracting the max keeps exp from overflowing)
//   out = (sum_j e_j v_j) / (sum_j e_j)
//
// cpu-ref calls these functions for every (query, head); gpu-ref calls the
// very same functions from its threads (scores in shared memory). Every sum runs over
// j = 0, 1, ..., p in that order, so the bits do not depend on the device, on
// the chunk plan (a chunk's queries read earlier positions from the KV cache),
// or on the number of threads. Dividing once at the end (not multiplying by
// e_j / sum) makes the toy example exact: (2+4+8)/3 is 14/3 rounded once.
// Left out on purpose: speed. The fast backends tile and reorder these sums
// (online softmax) and so differ in the last bits; tests/engine measures by how much.
#pragma once

#include "core/hd.h"
#include "core/kv_layout.h"
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

    PLAB_HD int n_keys() const { return pos0 + n_queries; }  // keys visible to the last query
};

// s_j for query row q (Dh floats of one head) against cached key position j.
PLAB_HD inline float attention_score(const float* q, const float* k_pool, const int* block_table,
                                     const AttentionShape& s, int kv_head, int j) {
    const int slot = kv_slot(block_table, j, s.block_size);
    const float* k = k_pool + kv_offset(slot, kv_head, s.n_kv_heads, s.head_dim);
    return strict_mul(strict_dot(q, k, s.head_dim), s.scale);
}

// The softmax statistics of one query row, from its scores s_0..s_p (p = query_pos):
// the max, then the denominator sum_j exp(s_j - max), in j order.
struct SoftmaxStats {
    float max_score;
    float denominator;
};

PLAB_HD inline SoftmaxStats attention_softmax_stats(const float* scores, int query_pos) {
    float m = scores[0];
    for (int j = 1; j <= query_pos; ++j) m = scores[j] > m ? scores[j] : m;
    float den = 0.0f;
    for (int j = 0; j <= query_pos; ++j)
        den = strict_add(den, strict_expf(strict_sub(scores[j], m)));
    return {m, den};
}

// Component d of the output: (sum_j e_j v_j[d]) / den, j = 0..query_pos in order.
PLAB_HD inline float attention_output(const float* scores, SoftmaxStats st, const float* v_pool,
                                      const int* block_table, const AttentionShape& s, int kv_head,
                                      int query_pos, int d) {
    float num = 0.0f;
    for (int j = 0; j <= query_pos; ++j) {
        const float ej = strict_expf(strict_sub(scores[j], st.max_score));
        const int slot = kv_slot(block_table, j, s.block_size);
        const float vj = v_pool[kv_offset(slot, kv_head, s.n_kv_heads, s.head_dim) + d];
        num = strict_add(num, strict_mul(ej, vj));
    }
    return strict_div(num, st.denominator);
}

// Probability p_j = e_j / den: what the viewer's heatmap shows (0 where masked).
PLAB_HD inline float attention_probability(const float* scores, SoftmaxStats st, int query_pos,
                                           int j) {
    if (!is_visible(query_pos, j)) return 0.0f;
    return strict_div(strict_expf(strict_sub(scores[j], st.max_score)), st.denominator);
}

}  // namespace plab
