// Reference masked attention over the paged KV cache: bitwise equal to cpu-ref.
//
// What it teaches: how to parallelise attention without changing a single
// sum. One block per (query i, head h); the query sits at position p = pos0 + i.
//   1. Threads split the keys j = lo..hi of the mask's key range for p (causal:
//      0..p): each score s_j = attention_score(...) (-inf where masked)
//      (core/attention_spec.h) goes to shared memory. No sum is split: each
//      score is one thread's dot product in d order.
//   2. __syncthreads; thread 0 computes the softmax statistics (max, then the
//      denominator in j order) with attention_softmax_stats.
//   3. __syncthreads; threads split the Dh output components; each runs
//      attention_output, the j-ordered weighted sum of V.
// The keys outside lo..hi are never read, as in cpu-ref. The mask (shape.mask)
// arrives by value; its data words (documents, custom bits, ALiBi slopes) were
// uploaded by gpu_backend.cu and it points to them in device memory. Scores take
// (pos0 + C) floats of dynamic shared memory: 48 KiB allow 12288 positions.
// attention_probs_kernel does steps 1-2 for the viewer's heatmap probe.
// Left out: speed (thread 0 alone sums the statistics; see attention_flash.cu).
#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

// Steps 1 and 2 of both kernels: every thread scores some of the visible keys
// into shared memory; after the barrier, thread 0 alone takes the softmax
// statistics in j order (the reference order); after the second barrier all
// threads may read them.
__device__ void scores_and_stats(float* scores, SoftmaxStats& stats, const float* qr,
                                 const float* k_pool, const int32_t* block_table,
                                 const AttentionShape& s, int head, int pos) {
    const KeyRange r = attention_key_range(s, pos);
    for (int j = r.lo + static_cast<int>(threadIdx.x); j <= r.hi; j += blockDim.x) {
        scores[j] = attention_score(qr, k_pool, block_table, s, head, pos, j);
    }
    __syncthreads();
    if (threadIdx.x == 0) stats = attention_softmax_stats(scores, s, pos);
    __syncthreads();
}

__global__ void attention_ref_kernel(float* out, const float* q, const float* k_pool,
                                     const float* v_pool, const int32_t* block_table,
                                     AttentionShape s) {
    const int i = blockIdx.x;
    const int h = blockIdx.y;
    const int pos = s.pos0 + i;
    const int g = kv_head_of(h, s.n_heads, s.n_kv_heads);
    const long long row = static_cast<long long>(i) * s.n_heads + h;
    const float* qr = q + row * s.head_dim;
    PLAB_DYNAMIC_SHARED(float, scores);  // (pos0 + C)
    __shared__ SoftmaxStats stats;
    scores_and_stats(scores, stats, qr, k_pool, block_table, s, h, pos);
    // 3. output components
    for (int d = threadIdx.x; d < s.head_dim; d += blockDim.x) {
        out[row * s.head_dim + d] =
            attention_output(scores, stats, v_pool, block_table, s, g, pos, d);
    }
}

__global__ void attention_probs_kernel(float* probs, float* scores_out, const float* q,
                                       const float* k_pool, const int32_t* block_table,
                                       AttentionShape s, int head) {
    const int i = blockIdx.x;
    const int pos = s.pos0 + i;
    const int n_keys = s.n_keys();
    const float* qr = q + (static_cast<long long>(i) * s.n_heads + head) * s.head_dim;
    PLAB_DYNAMIC_SHARED(float, scores);  // (pos0 + C)
    __shared__ SoftmaxStats stats;
    scores_and_stats(scores, stats, qr, k_pool, block_table, s, head, pos);
    // attention_probability returns 0 (attention_probe_score -inf) for a masked
    // key without reading its score: the probe shows what this kernel computed.
    for (int j = threadIdx.x; j < n_keys; j += blockDim.x) {
        const long long cell = static_cast<long long>(i) * n_keys + j;
        probs[cell] = attention_probability(scores, stats, s, pos, j);
        if (scores_out != nullptr) scores_out[cell] = attention_probe_score(scores, s, pos, j);
    }
}

}  // namespace plab::PLAB_SIMT_NS
