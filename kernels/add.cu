// Residual add: x += y, one thread per value (strict_add: never fused).
#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

__global__ void add_kernel(float* x, const float* y, long long n) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx < n) x[idx] = strict_add(x[idx], y[idx]);
}

}  // namespace plab::PLAB_SIMT_NS
