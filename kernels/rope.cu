// RoPE (Su et al. 2021): rotate each head of each row by its position.
//
// What it teaches: the finest parallel grain that changes no bit. A rotation
// touches only its own pair (x[i], x[i + Dh/2]), so each thread takes one pair
// of one head of one row and calls core/rope.h rope_rotate_pair, the very
// rotation cpu-ref applies. Neighbouring threads take neighbouring pairs, so a
// warp reads consecutive floats of x and of the cos/sin rows (coalesced),
// where one thread per head would stride by Dh. The cos/sin rows come from the
// table the host computed in double precision and uploaded
// (src/runtime/device_model.h): no device evaluates cos or sin itself.
// Indices are 32-bit (launch_rope checks that they fit): a 64-bit division
// costs dozens of instructions per thread on a GPU. A batched decode step's
// rows each sit at their own sequence's position: the kernel reads them from
// a positions array, so the whole step is one launch (Backend::rope_rows).
// Left out: fusing the rotation into the Q/K projection that produced x.
#include <climits>

#include "core/rope.h"
#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

__global__ void rope_kernel(float* x, int rows, int n_heads, int head_dim, int pos0,
                            const int32_t* positions, const float* cos, const float* sin) {
    const int half = head_dim / 2;
    const int n_pairs = rows * n_heads * half;
    const int idx = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (idx >= n_pairs) return;
    const int head_row = idx / half;  // row * n_heads + head
    const int i = idx - head_row * half;
    const int row = head_row / n_heads;
    const int position = positions != nullptr ? positions[row] : pos0 + row;
    const int table = position * half + i;
    float* xh = x + head_row * head_dim;
    rope_rotate_pair(xh + i, xh + i + half, cos[table], sin[table]);
}

void launch_rope(float* x, int rows, int n_heads, int head_dim, int pos0, const int32_t* positions,
                 int last_position, const float* cos, const float* sin) {
    const long long half = head_dim / 2;
    const long long elements = static_cast<long long>(rows) * n_heads * head_dim;
    const long long table = (static_cast<long long>(last_position) + 1) * half;
    PLAB_CHECK(elements <= INT_MAX && table <= INT_MAX,
               "rope indexes with 32-bit ints: rows x heads x head_dim ("
                   << elements << ") and (last position + 1) x head_dim/2 (" << table
                   << ") must stay below 2^31; split the chunk");
    const long long pairs = static_cast<long long>(rows) * n_heads * half;
    // An odd head_dim of 1 has no pair: nothing to launch (an empty grid).
    PLAB_LAUNCH(rope_kernel, blocks_for(pairs, kThreadsPerBlock), kThreadsPerBlock, 0, x, rows,
                n_heads, head_dim, pos0, positions, cos, sin);
}

}  // namespace plab::PLAB_SIMT_NS
