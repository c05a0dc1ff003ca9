// SwiGLU (Shazeer 2020): out = silu(gate) * up, one thread per value.
//
// What it teaches: elementwise kernels are the easy case of bitwise equality:
// each thread calls core/strict_math.h strict_swiglu (with the shared
// strict_expf), the same function cpu-ref calls on the same inputs.
#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

__global__ void swiglu_kernel(float* out, const float* gate, const float* up, long long n) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx < n) out[idx] = strict_swiglu(gate[idx], up[idx]);
}

}  // namespace plab::PLAB_SIMT_NS
