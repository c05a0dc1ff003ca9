// Rung 2 of the attention ladder (attention_ladder.h): online softmax.
//
// What it teaches: the max need not be known before the sums start
// (Milakov & Gimelshein 2018, the idea under FlashAttention). One thread per
// (query, head) walks its keys once, keeping a running max m, denominator l
// and output o. When a score raises the max, what was summed so far was
// weighted by exp(s - m_old) and must now be by exp(s - m_new): l and every
// o[d] are multiplied by exp(m_old - m_new) first. At the end o / l is the
// softmax-weighted mean. Each K and V row is read once instead of K twice;
// the rescales round differently from cpu-ref's two passes, a few ulps (the
// tolerance in tests/gpu/test_attention_ladder.cpp says how many).
#include "attention_ladder.h"
#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

__global__ void attention_online_kernel(float* out, const float* q, const float* k_pool,
                                        const float* v_pool, const int32_t* block_table,
                                        AttentionShape s) {
    const int row = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);  // i * H + h
    if (row >= s.n_queries * s.n_heads) return;
    const LadderQuery x = ladder_query(row, q, out, s);
    const int h = x.h, pos = x.pos, g = x.g, dh = s.head_dim;
    const float* qr = x.q;
    float* o = x.out;
    for (int d = 0; d < dh; ++d) o[d] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    const KeyRange r = attention_key_range(s, pos);
    for (int j = r.lo; j <= r.hi; ++j) {
        if (!s.mask.visible(pos, j)) continue;
        const float score = attention_score(qr, k_pool, block_table, s, h, pos, j);
        online_softmax_step(m, l, o, score, ladder_kv_row(v_pool, block_table, s, g, j), dh);
        PLAB_LADDER_COUNT(8LL * dh, score_flops(dh) + online_step_flops(dh));  // K, V
    }
    for (int d = 0; d < dh; ++d) o[d] = strict_div(o[d], l);
}

void launch_attention_online(float* out, const float* q, const float* k_pool, const float* v_pool,
                             const int32_t* block_table, const AttentionShape& s) {
    const int rows = s.n_queries * s.n_heads;
    PLAB_LAUNCH(attention_online_kernel, (rows + 127) / 128, 128, 0, out, q, k_pool, v_pool,
                block_table, s);
}

}  // namespace plab::PLAB_SIMT_NS
