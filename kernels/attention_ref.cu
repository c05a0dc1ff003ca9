// Reference masked attention over the paged KV cache: bitwise equal to cpu-ref.
//
// What it teaches: how to parallelise attention without changing a single
// sum. One block per (query i, head h); the query sits at position p = pos0 + i.
// Its visible keys j = lo..hi (the mask's key range for p; causal: 0..p) are
// cut into blockDim contiguous pieces, piece t for thread t, in j order.
//   1. Each thread scores its piece, s_j = attention_score(...) (-inf where
//      masked, core/attention_math.h), into shared memory, and takes the max
//      of its piece with attention_max_step, in j order.
//   2. The pieces' maxima meet left to right (a warp-shuffle butterfly that
//      keeps lane order, then the warps in order): the very value of the
//      j-order max, because pieces are contiguous and combined in order.
//   3. Each thread turns its own scores into weights e_j = exp(s_j - max)
//      (attention_weight_cell: masked cells stay -inf), in place. Every
//      exponential is taken once, in parallel.
//   4. __syncthreads; the last thread adds the denominator sum_j e_j in j
//      order (attention_denominator, a sum no one may split) while the
//      others, one output component d each, add sum_j e_j v_j[d] in j order
//      (attention_numerator; neighbouring threads read neighbouring floats of
//      a V row).
//   5. __syncthreads; out[d] = numerator / denominator.
// The keys outside lo..hi are never read, as in cpu-ref. The mask (shape.mask)
// arrives by value; its data words (documents, custom bits, ALiBi slopes) were
// uploaded by gpu_backend.cu and it points to them in device memory. Scores
// take (pos0 + C) floats of dynamic shared memory, sized by the caller.
// attention_probs_kernel does steps 1-2 and the probabilities for the viewer's
// heatmap probe; speed matters less there, and its denominator recomputes each
// exp once more (it must keep the scores themselves for the probe).
// Left out: key tiles in shared memory and online softmax (attention_flash_kernel.cuh).
#include <climits>

#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

namespace {
constexpr int kWarp = 32;
constexpr int kMaxWarps = 8;  // at most 256 threads per block
}  // namespace

// This thread's piece of the query's key range: keys first..last (empty when
// first > last), pieces contiguous and in thread order.
struct KeyPiece {
    int first, last;
};
__device__ KeyPiece key_piece(const AttentionShape& s, int pos) {
    const KeyRange r = attention_key_range(s, pos);
    const int n = r.hi >= r.lo ? r.hi - r.lo + 1 : 0;
    const int per = (n + static_cast<int>(blockDim.x) - 1) / static_cast<int>(blockDim.x);
    const int first = r.lo + static_cast<int>(threadIdx.x) * per;
    return {first, min(r.hi, first + per - 1)};
}

// Steps 1 and 2 of both kernels: every thread scores its contiguous piece of
// the key range into shared memory; returns the j-order max of the whole
// range, the same value in every thread. blockDim.x is a multiple of 32.
__device__ float scores_and_max(SharedPtr<float> scores, const float* qr, const float* k_pool,
                                const int32_t* block_table, const AttentionShape& s, int head,
                                int pos) {
    PLAB_SHARED(float, warp_max, [kMaxWarps]);
    const int threads = static_cast<int>(blockDim.x);
    const int tid = static_cast<int>(threadIdx.x);
    const KeyPiece piece = key_piece(s, pos);
    float m = -INFINITY;
    for (int j = piece.first; j <= piece.last; ++j) {
        scores[j] = attention_score(qr, k_pool, block_table, s, head, pos, j);
        m = attention_max_step(m, scores[j]);
    }
    // Butterfly over the lanes: the lower lane's piece lies left of the upper's.
    const int lane = tid % kWarp;
    for (int offset = 1; offset < kWarp; offset *= 2) {
        const float other = __shfl_xor_sync(0xffffffffu, m, offset);
        m = (lane & offset) == 0 ? attention_max_step(m, other) : attention_max_step(other, m);
    }
    if (lane == 0) warp_max[tid / kWarp] = m;
    __syncthreads();  // every warp's max is written
    m = -INFINITY;
    for (int w = 0; w < threads / kWarp; ++w) m = attention_max_step(m, warp_max[w]);
    return m;
}

__global__ void attention_ref_kernel(float* out, const float* q, const float* k_pool,
                                     const float* v_pool, const int32_t* block_table,
                                     AttentionShape s) {
    const int i = static_cast<int>(blockIdx.x);
    const int h = static_cast<int>(blockIdx.y);
    const int pos = s.pos0 + i;
    const int g = kv_head_of(h, s.n_heads, s.n_kv_heads);
    float* o = out + (i * s.n_heads + h) * s.head_dim;
    const float* qr = q + (i * s.n_heads + h) * s.head_dim;
    PLAB_DYNAMIC_SHARED(float, cells);  // (pos0 + C): scores, then weights
    PLAB_SHARED(float, denominator, [1]);
    const float max_score = scores_and_max(cells, qr, k_pool, block_table, s, h, pos);
    // 3. weights of this thread's own piece (no barrier: it wrote those scores itself)
    const KeyPiece piece = key_piece(s, pos);
    for (int j = piece.first; j <= piece.last; ++j) {
        cells[j] = attention_weight_cell(cells[j], max_score);
    }
    __syncthreads();  // all weights are in shared memory
    // 4. the denominator on the last thread, numerators on the others (and on it too
    //    when head_dim >= blockDim); each numerator waits in out until step 5.
    const int threads = static_cast<int>(blockDim.x);
    const int tid = static_cast<int>(threadIdx.x);
    const StoredWeights weights{cells};
    if (tid == threads - 1) denominator[0] = attention_denominator(cells, weights, s, pos);
    for (int d = tid; d < s.head_dim; d += threads) {
        o[d] = attention_numerator(cells, weights, v_pool, block_table, s, g, pos, d);
    }
    __syncthreads();  // the denominator is written
    // 5. one division per component, as attention_output does
    for (int d = tid; d < s.head_dim; d += threads) o[d] = strict_div(o[d], denominator[0]);
}

__global__ void attention_probs_kernel(float* probs, float* scores_out, const float* q,
                                       const float* k_pool, const int32_t* block_table,
                                       AttentionShape s, int head) {
    const int i = static_cast<int>(blockIdx.x);
    const int pos = s.pos0 + i;
    const int n_keys = s.n_keys();
    const float* qr = q + (i * s.n_heads + head) * s.head_dim;
    PLAB_DYNAMIC_SHARED(float, scores);  // (pos0 + C)
    PLAB_SHARED(SoftmaxStats, stats, [1]);
    // scores_and_max's barrier came after every score was written
    const float max_score = scores_and_max(scores, qr, k_pool, block_table, s, head, pos);
    if (threadIdx.x == 0) {
        stats[0] = SoftmaxStats{
            max_score, attention_denominator(scores, ExpWeights{scores, max_score}, s, pos)};
    }
    __syncthreads();  // the statistics are written
    // attention_probability returns 0 (attention_probe_score -inf) for a masked
    // key without reading its score: the probe shows what this kernel computed.
    for (int j = threadIdx.x; j < n_keys; j += blockDim.x) {
        const int cell = i * n_keys + j;
        probs[cell] = attention_probability(scores, stats[0], s, pos, j);
        if (scores_out != nullptr) scores_out[cell] = attention_probe_score(scores, s, pos, j);
    }
}

namespace {

// Threads of a block: one per output component plus one for the denominator,
// a whole number of warps, at least 4 warps (they score keys in parallel),
// at most kMaxWarps (components beyond take turns).
unsigned attention_ref_threads(int head_dim) {
    const int wanted = (head_dim + 1 + kWarp - 1) / kWarp * kWarp;
    return static_cast<unsigned>(max(4 * kWarp, min(kMaxWarps * kWarp, wanted)));
}

void check_index_range(const AttentionShape& s, const char* kernel) {
    const long long rows = static_cast<long long>(s.n_queries) * s.n_heads * s.head_dim;
    const long long cells = static_cast<long long>(s.n_queries) * s.n_keys();
    PLAB_CHECK(rows <= INT_MAX && cells <= INT_MAX,
               kernel << " indexes with 32-bit ints: C x H x Dh (" << rows
                      << ") and C x (pos0 + C) (" << cells
                      << ") must stay below 2^31; use a smaller chunk");
}

}  // namespace

void launch_attention_ref(float* out, const float* q, const float* k_pool, const float* v_pool,
                          const int32_t* block_table, const AttentionShape& s,
                          std::size_t scores_bytes) {
    check_index_range(s, "attention_ref");
    PLAB_LAUNCH(attention_ref_kernel, dim3(s.n_queries, s.n_heads),
                attention_ref_threads(s.head_dim), scores_bytes, out, q, k_pool, v_pool,
                block_table, s);
}

void launch_attention_probs(float* probs, float* scores_out, const float* q, const float* k_pool,
                            const int32_t* block_table, const AttentionShape& s, int head,
                            std::size_t scores_bytes) {
    check_index_range(s, "attention_probs");
    PLAB_LAUNCH(attention_probs_kernel, s.n_queries, 4 * kWarp, scores_bytes, probs, scores_out, q,
                k_pool, block_table, s, head);
}

}  // namespace plab::PLAB_SIMT_NS
