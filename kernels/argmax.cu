// Argmax: the index of the largest logit, lowest index on ties (greedy decoding).
//
// What it teaches: a reduction whose answer does not depend on its order, so
// both versions give cpu-ref's index (NaN logits aside: they are never chosen
// by `>`, except as element 0 in the ref scan, like cpu-ref).
//   ref:  one thread scans x[0..n) in order, like cpu-ref.
//   fast: one block; each thread scans a strided slice, then (value, index)
//         pairs are reduced across each warp with __shfl_down_sync and across
//         warps through shared memory. "Better" means larger value, or equal
//         value and lower index, which makes the result order-independent.
// Both take one row of x (n values) per block: a batched decode step's greedy
// tokens, one row per sequence, are one launch and one copy back, not one of
// each per sequence (a copy to the host waits for the device every time).
#include <cmath>

#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

__global__ void argmax_ref_kernel(int32_t* result, const float* x, long long n) {
    if (threadIdx.x != 0) return;
    x += static_cast<long long>(blockIdx.x) * n;  // this block's row
    long long best = 0;
    for (long long i = 1; i < n; ++i) {
        if (x[i] > x[best]) best = i;
    }
    result[blockIdx.x] = static_cast<int32_t>(best);
}

__device__ inline bool is_better(float v, long long i, float best_v, long long best_i) {
    return v > best_v || (v == best_v && i < best_i);
}

// One block per row; blockDim.x a multiple of 32.
__global__ void argmax_fast_kernel(int32_t* result, const float* x, long long n) {
    PLAB_SHARED(float, warp_value, [32]);
    x += static_cast<long long>(blockIdx.x) * n;  // this block's row
    PLAB_SHARED(long long, warp_index, [32]);
    float best_v = -INFINITY;
    long long best_i = n;  // "none yet": loses every tie
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        if (is_better(x[i], i, best_v, best_i)) {
            best_v = x[i];
            best_i = i;
        }
    }
    for (int offset = 16; offset > 0; offset /= 2) {
        const float other_v = __shfl_down_sync(0xffffffffu, best_v, offset);
        const long long other_i = __shfl_down_sync(0xffffffffu, best_i, offset);
        if (is_better(other_v, other_i, best_v, best_i)) {
            best_v = other_v;
            best_i = other_i;
        }
    }
    if (threadIdx.x % 32 == 0) {
        warp_value[threadIdx.x / 32] = best_v;
        warp_index[threadIdx.x / 32] = best_i;
    }
    __syncthreads();  // every warp's winner is in shared memory
    if (threadIdx.x == 0) {
        for (unsigned w = 1; w < blockDim.x / 32; ++w) {
            if (is_better(warp_value[w], warp_index[w], best_v, best_i)) {
                best_v = warp_value[w];
                best_i = warp_index[w];
            }
        }
        // All NaN: 0, like cpu-ref.
        result[blockIdx.x] = static_cast<int32_t>(best_i < n ? best_i : 0);
    }
}

}  // namespace plab::PLAB_SIMT_NS
