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
    int32_t unused = 0;  // the padding before `mask`, named (below)
    Mask mask;           // which keys each query sees, score modifiers (causal by default)

    // Keys in the cache when this chunk attends: positions 0..n_keys()-1.
    PLAB_HD int n_keys() const { return pos0 + n_queries; }
};
// No padding anywhere in a kernel argument: a GPU step graph replays a launch
// only when its argument bytes equal the last step's (kernels/simt/simt_record.h),
// and padding bytes hold whatever was on the stack, which differs with the
// compiler's code for this CPU. Every gap is a named field set to 0.
static_assert(sizeof(MaskTerm) == 5 * 4);
static_assert(sizeof(Mask) == Mask::kMaxTerms * sizeof(MaskTerm) + 8 * 4 + sizeof(void*));
static_assert(sizeof(AttentionShape) == 8 * 4 + sizeof(Mask));

// The keys the query at query_pos may see, clamped to the cache: the loops
// below run over this range only, and visible() decides inside it. A mask may
// let a query see keys *after* itself (prefix-LM): the session makes sure
// those are in the cache (runtime/mask_grammar.h, check_plan_for_mask).
PLAB_HD inline KeyRange attention_key_range(const AttentionShape& s, int query_pos) {
    const KeyRange r = s.mask.key_range(query_pos);
    return {mask_max(r.lo, 0), mask_min(r.hi, s.n_keys() - 1)};
}

// s_j for query row q (Dh floats of head `head`, at query_pos) against cached key
// position j: the scaled dot product, then the mask's score modifiers (ALiBi,
// soft-capping), or -inf where the mask hides key j. -inf is what a probe shows
// for a masked cell; the sums below skip those cells.
// The same score against key j's row k (Dh floats) found by the caller.
template <typename K>
PLAB_HD inline float attention_score_of(const float* q, K k, const AttentionShape& s, int head,
                                        int query_pos, int j) {
    if (!s.mask.visible(query_pos, j)) return -INFINITY;
    const float raw = strict_mul(strict_dot(q, k, s.head_dim), s.scale);
    return s.mask.modify_score(raw, head, query_pos, j);
}
PLAB_HD inline float attention_score(const float* q, const float* k_pool, const int* block_table,
                                     const AttentionShape& s, int head, int query_pos, int j) {
    const int kv_head = kv_head_of(head, s.n_heads, s.n_kv_heads);
    const int slot = kv_slot(block_table, j, s.block_size);
    return attention_score_of(q, k_pool + kv_offset(slot, kv_head, s.n_kv_heads, s.head_dim), s,
                              head, query_pos, j);
}

// The softmax statistics of one query row, from its scores s_j over the
// query's key range (masked cells hold -inf and are skipped): the max, then
// the denominator sum_j exp(s_j - max), in j order.
struct SoftmaxStats {
    float max_score;
    float denominator;
};

// e_j = exp(s_j - max) of a visible key: the one exponential of the reference softmax.
PLAB_HD inline float attention_weight(float score, float max_score) {
    return strict_expf(strict_sub(score, max_score));
}

// One step of the j-order max: `right` replaces `left` only when larger, so the
// first of equal values wins (-0 vs +0 included). A parallel reduction that
// splits the key range into contiguous pieces and combines their maxima left to
// right with this step gives the very same value (gpu-ref's attention does).
PLAB_HD inline float attention_max_step(float left, float right) {
    return right > left ? right : left;
}

// Where e_j comes from in the two sums below. cpu-ref computes it on the fly
// from the scores (ExpWeights, so each output component takes every exp again);
// gpu-ref's threads compute each e_j once into shared memory (StoredWeights,
// cells from attention_weight_cell). Either way the sums add the same values
// in the same order.
// `Cells` here and below: a pointer to the scores or weights (const float*,
// or the emulator's checked pointer into shared memory, kernels/simt/simt_checked.h).
template <typename Cells>
struct ExpWeights {
    Cells scores;
    float max_score;
    PLAB_HD float operator()(int j) const { return attention_weight(scores[j], max_score); }
};
template <typename Cells>
struct StoredWeights {
    Cells weights;
    PLAB_HD float operator()(int j) const { return weights[j]; }
};

// A cell of stored weights: e_j, or -inf where the score is -inf (masked), so
// the sums skip the very cells they skip when reading scores (e_j is never -inf).
PLAB_HD inline float attention_weight_cell(float score, float max_score) {
    return score == -INFINITY ? -INFINITY : attention_weight(score, max_score);
}

// sum_j e_j over the visible keys, in j order. `cells` holds the scores or
// the stored weights: a -inf cell is masked and skipped.
template <typename Cells, typename Weights>
PLAB_HD inline float attention_denominator(Cells cells, const Weights& weight,
                                           const AttentionShape& s, int query_pos) {
    const KeyRange r = attention_key_range(s, query_pos);
    float den = 0.0f;
    for (int j = r.lo; j <= r.hi; ++j) {
        if (cells[j] == -INFINITY) continue;  // masked
        den = strict_add(den, weight(j));
    }
    return den;
}

// sum_j e_j v_j[d] over the visible keys, in j order (cells as above).
template <typename Cells, typename Weights>
PLAB_HD inline float attention_numerator(Cells cells, const Weights& weight, const float* v_pool,
                                         const int* block_table, const AttentionShape& s,
                                         int kv_head, int query_pos, int d) {
    const KeyRange r = attention_key_range(s, query_pos);
    float num = 0.0f;
    for (int j = r.lo; j <= r.hi; ++j) {
        if (cells[j] == -INFINITY) continue;  // masked
        const int slot = kv_slot(block_table, j, s.block_size);
        const float vj = v_pool[kv_offset(slot, kv_head, s.n_kv_heads, s.head_dim) + d];
        num = strict_add(num, strict_mul(weight(j), vj));
    }
    return num;
}

template <typename Cells>
PLAB_HD inline SoftmaxStats attention_softmax_stats(Cells scores, const AttentionShape& s,
                                                    int query_pos) {
    const KeyRange r = attention_key_range(s, query_pos);
    float m = -INFINITY;
    for (int j = r.lo; j <= r.hi; ++j) m = attention_max_step(m, scores[j]);
    return {m, attention_denominator(scores, ExpWeights<Cells>{scores, m}, s, query_pos)};
}

// Component d of the output: (sum_j e_j v_j[d]) / den over the visible keys, in j order.
template <typename Cells>
PLAB_HD inline float attention_output(Cells scores, SoftmaxStats st, const float* v_pool,
                                      const int* block_table, const AttentionShape& s, int kv_head,
                                      int query_pos, int d) {
    const float num = attention_numerator(scores, ExpWeights<Cells>{scores, st.max_score}, v_pool,
                                          block_table, s, kv_head, query_pos, d);
    return strict_div(num, st.denominator);
}

// Probability p_j = e_j / den: what the viewer's heatmap shows (exactly 0 where masked).
template <typename Cells>
PLAB_HD inline float attention_probability(Cells scores, SoftmaxStats st, const AttentionShape& s,
                                           int query_pos, int j) {
    if (!s.mask.visible(query_pos, j) || j >= s.n_keys()) return 0.0f;
    return strict_div(attention_weight(scores[j], st.max_score), st.denominator);
}

// The probe's score of cell (query_pos, j): the modified score, -inf where masked.
template <typename Cells>
PLAB_HD inline float attention_probe_score(Cells scores, const AttentionShape& s, int query_pos,
                                           int j) {
    if (!s.mask.visible(query_pos, j) || j >= s.n_keys()) return -INFINITY;
    return scores[j];
}

}  // namespace plab
