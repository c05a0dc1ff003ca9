// RMSNorm (Zhang & Sennrich 2019): out = x / sqrt(mean(x^2) + eps) * weight, per row.
//
// What it teaches: a row-wise reduction followed by an elementwise op, two ways.
//   ref:  thread 0 of the row's block sums x^2 in index order (core/strict_math.h
//         strict_dot, exactly cpu-ref's sum), shares 1/rms through __shared__,
//         and after a __syncthreads every thread writes its outputs. Bitwise = cpu-ref.
//   fast: every thread sums a strided slice, warps combine their partial sums
//         with __shfl_xor_sync (a butterfly), warp totals meet in shared memory.
//         The sum is reordered, so the last bits differ from cpu-ref.
//   fused: add_rmsnorm_fast_kernel, the residual add before it in the same launch.
// Left out: vectorised loads, one warp per row for small D.
#include <cmath>

#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

__global__ void rmsnorm_ref_kernel(float* out, const float* x, const float* weight, int dim,
                                   float eps) {
    const float* xr = x + static_cast<long long>(blockIdx.x) * dim;
    float* o = out + static_cast<long long>(blockIdx.x) * dim;
    PLAB_SHARED(float, inv_rms, [1]);
    if (threadIdx.x == 0) inv_rms[0] = strict_rms_inverse(strict_dot(xr, xr, dim), dim, eps);
    __syncthreads();  // every thread needs thread 0's inv_rms
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        o[i] = strict_mul(strict_mul(xr[i], inv_rms[0]), weight[i]);
    }
}

// Sum over the 32 lanes of a warp: after 5 butterfly steps every lane holds the total.
__device__ inline float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// 1 / rms of a row from each thread's partial sum of squares: warps combine
// their partials with the butterfly, warp totals meet in shared memory
// (warp_totals, 32 floats of the calling kernel) and are added in warp order.
// The order depends on blockDim.x (a multiple of 32), so the kernels that
// share this must be launched with the same block size (kNormThreads).
__device__ inline float block_inv_rms(float partial, SharedPtr<float> warp_totals, int dim,
                                      float eps) {
    partial = warp_sum(partial);
    if (threadIdx.x % 32 == 0) warp_totals[threadIdx.x / 32] = partial;
    __syncthreads();  // all warp totals written before anyone adds them up
    float sum_sq = 0.0f;
    for (unsigned w = 0; w < blockDim.x / 32; ++w) sum_sq += warp_totals[w];
    return 1.0f / sqrtf(sum_sq / static_cast<float>(dim) + eps);
}

// blockDim.x must be a multiple of 32.
__global__ void rmsnorm_fast_kernel(float* out, const float* x, const float* weight, int dim,
                                    float eps) {
    const float* xr = x + static_cast<long long>(blockIdx.x) * dim;
    float* o = out + static_cast<long long>(blockIdx.x) * dim;
    PLAB_SHARED(float, warp_totals, [32]);
    float partial = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) partial += xr[i] * xr[i];
    const float inv_rms = block_inv_rms(partial, warp_totals, dim, eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = xr[i] * inv_rms * weight[i];
}

// The residual add and the next norm in one launch (Backend::add_rmsnorm;
// vLLM's fused_add_rms_norm): each thread adds its own strided values of the
// row, keeps the sums for its partial, and normalises the same values after
// the block's reduction. No value crosses threads before the reduction, so
// no barrier is needed between the add and the sum. Bits: strict_add as
// add_kernel, then rmsnorm_fast_kernel's every operation in its order (same
// block size): one launch where there were two, the same result.
__global__ void add_rmsnorm_fast_kernel(float* x, const float* y, float* out, const float* weight,
                                        int dim, float eps) {
    const long long row = static_cast<long long>(blockIdx.x) * dim;
    float* xr = x + row;
    const float* yr = y + row;
    float* o = out + row;
    PLAB_SHARED(float, warp_totals, [32]);
    float partial = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        const float v = strict_add(xr[i], yr[i]);
        xr[i] = v;
        partial += v * v;
    }
    const float inv_rms = block_inv_rms(partial, warp_totals, dim, eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = xr[i] * inv_rms * weight[i];
}

}  // namespace plab::PLAB_SIMT_NS
