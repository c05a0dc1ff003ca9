// Naive matmul: out = x · wᵀ, one thread per output, straight from global memory.
//
// What it teaches: the first rung of the matmul ladder (kernels/README.md),
// correct and slow. Thread o owns out[i][j] (i = o / n, j = o % n) and walks
// t = 0..k-1 reading x[i][t] and w[j][t] from global memory: every x value is
// read n times and every w value m times, once per output that uses it, and
// the 32 threads of a warp (neighbouring j) read floats k apart in w, so each
// 4-byte value costs a 32-byte memory transaction. The rungs above it change
// only who loads what: tiles in shared memory (matmul_tiled), outputs in
// registers (matmul_blocked_ref, matmul_blocked), rows streamed by a whole
// block (matmul_rows).
//
// The sum is strict_dot's: from +0.0, t in order, each product and sum
// rounded on its own (this file is compiled with --fmad=false), so the result
// is cpu-ref's bit for bit, the same bits as gpu-ref's matmul_blocked_ref.
#include <algorithm>

#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

namespace {
constexpr int kNaiveThreads = 256;
}

__global__ void matmul_naive_kernel(float* out, const float* x, const float* w, int m, int n,
                                    int k) {
    const long long o = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (o >= static_cast<long long>(m) * n) return;
    const long long i = o / n, j = o % n;
    const float* x_row = x + i * k;
    const float* w_row = w + j * k;
    float acc = 0.0f;
    for (int t = 0; t < k; ++t) acc = strict_add(acc, strict_mul(x_row[t], w_row[t]));
    out[o] = acc;
}

void launch_matmul_naive(float* out, const float* x, const float* w, int m, int n, int k) {
    const long long outputs = static_cast<long long>(m) * n;
    if (outputs == 0) return;
    PLAB_LAUNCH(matmul_naive_kernel, blocks_for(outputs, kNaiveThreads), kNaiveThreads, 0, out, x,
                w, m, n, k);
}

}  // namespace plab::PLAB_SIMT_NS
