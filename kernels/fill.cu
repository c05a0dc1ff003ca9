// Fill: x[i] = value, one thread per value. Tests fill outputs with NaN before
// a kernel runs, so an element the kernel forgot to write cannot pass.
#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

__global__ void fill_kernel(float* x, long long n, float value) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx < n) x[idx] = value;
}

}  // namespace plab::PLAB_SIMT_NS
