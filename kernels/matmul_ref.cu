// Reference matmul: out = x · wᵀ with one thread per output value.
//
// What it teaches: the simplest correct GPU GEMM. Thread (i, j) computes the
// dot product of row i of x and row j of w with core/strict_math.h strict_dot,
// in k order, exactly as cpu-ref does; compiled with --fmad=false (and strict_*
// use __fmul_rn/__fadd_rn) so no fused multiply-add changes a bit.
// Left out: any reuse of loaded values; every thread reads 2K floats from
// global memory, which is why matmul_tiled.cu exists.
#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

__global__ void matmul_ref_kernel(float* out, const float* x, const float* w, int m, int n, int k) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(m) * n) return;
    const long long i = idx / n;
    const long long j = idx % n;
    out[idx] = strict_dot(x + i * k, w + j * k, k);
}

}  // namespace plab::PLAB_SIMT_NS
