// RoPE (Su et al. 2021): rotate each head of each row by its position.
//
// What it teaches: one thread per (row, head) calls core/rope.h rope_rotate,
// the very function cpu-ref calls, with cos/sin rows of the table the host
// computed in double precision and uploaded (src/runtime/device_model.h), so
// no device ever evaluates cos or sin itself.
#include "core/rope.h"
#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

__global__ void rope_kernel(float* x, int rows, int n_heads, int head_dim, int pos0,
                            const float* cos, const float* sin) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(rows) * n_heads) return;
    const int half = head_dim / 2;
    const long long row = idx / n_heads;
    const long long table_row = (pos0 + row) * half;
    rope_rotate(x + idx * head_dim, cos + table_row, sin + table_row, half);
}

}  // namespace plab::PLAB_SIMT_NS
