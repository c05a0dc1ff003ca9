// Rung 1 of the attention ladder (attention_ladder.h): naive.
//
// What it teaches: attention is independent per (query, head), so the first
// parallel kernel gives each its own thread and changes nothing else. Pass 1
// scores every visible key and keeps the max; pass 2 scores them again, takes
// e_j = exp(s_j - max), adds the denominator and, component by component, the
// outputs sum_j e_j v_j[d] — all in j order with cpu-ref's own operations
// (core/attention_math.h), so the result is cpu-ref's, bit for bit. The cost:
// every K row is read twice, every V row once, by every query that sees it,
// and the outputs wait in global memory.
#include "attention_ladder.h"
#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

__global__ void attention_naive_kernel(float* out, const float* q, const float* k_pool,
                                       const float* v_pool, const int32_t* block_table,
                                       AttentionShape s) {
    const int row = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);  // i * H + h
    if (row >= s.n_queries * s.n_heads) return;
    const LadderQuery x = ladder_query(row, q, out, s);
    const int h = x.h, pos = x.pos, g = x.g, dh = s.head_dim;
    const float* qr = x.q;
    float* o = x.out;
    const KeyRange r = attention_key_range(s, pos);
    // Pass 1: the max score, in j order.
    float m = -INFINITY;
    for (int j = r.lo; j <= r.hi; ++j) {
        if (!s.mask.visible(pos, j)) continue;
        m = attention_max_step(m, attention_score(qr, k_pool, block_table, s, h, pos, j));
        PLAB_LADDER_COUNT(4LL * dh, score_flops(dh));  // the K row
    }
    // Pass 2: weights, denominator and outputs, in j order.
    for (int d = 0; d < dh; ++d) o[d] = 0.0f;
    float l = 0.0f;
    for (int j = r.lo; j <= r.hi; ++j) {
        if (!s.mask.visible(pos, j)) continue;
        const float e = attention_weight(attention_score(qr, k_pool, block_table, s, h, pos, j), m);
        l = strict_add(l, e);
        const float* vj = ladder_kv_row(v_pool, block_table, s, g, j);
        for (int d = 0; d < dh; ++d) o[d] = strict_add(o[d], strict_mul(e, vj[d]));
        PLAB_LADDER_COUNT(8LL * dh, score_flops(dh) + 3 + 2LL * dh);  // K again, V
    }
    for (int d = 0; d < dh; ++d) o[d] = strict_div(o[d], l);
}

void launch_attention_naive(float* out, const float* q, const float* k_pool, const float* v_pool,
                            const int32_t* block_table, const AttentionShape& s) {
    const int rows = s.n_queries * s.n_heads;
    PLAB_LAUNCH(attention_naive_kernel, (rows + 127) / 128, 128, 0, out, q, k_pool, v_pool,
                block_table, s);
}

}  // namespace plab::PLAB_SIMT_NS
