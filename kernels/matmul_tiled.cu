// Tiled matmul: out = x · wᵀ through 16x16 tiles in shared memory.
//
// What it teaches: data reuse. A block computes a 16x16 tile of out. It walks
// k in steps of 16: its 256 threads each load one value of x's tile and one
// of w's tile into shared memory, __syncthreads (the tiles are complete), each
// thread accumulates 16 products from shared memory, __syncthreads again (no
// one overwrites a tile still being read). Each global value is loaded once
// per tile instead of once per output: 16x fewer global reads.
// (Kirk & Hwu, "Programming Massively Parallel Processors", ch. 5.)
//
//   // clang-format off
//        k0   k0+16                 w tile row = output column j
//   x  [ ....|xxxx|.... ]  row i    ws[j][kk] (padded to 17: no bank conflicts
//                                   when 16 threads read ws[tx][kk])
//   // clang-format on
//
// Out-of-range loads become 0 so sizes need not divide 16. Native builds may
// contract the multiply-add into an FMA: the gpu backend's tolerance covers it.
// Left out: register blocking (several outputs per thread), double buffering,
// tensor cores — each a further 2-10x on large matrices.
#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

__global__ void matmul_tiled_kernel(float* out, const float* x, const float* w, int m, int n,
                                    int k) {
    constexpr int T = kMatmulTile;
    PLAB_SHARED(float, xs, [T][T + 1]);
    PLAB_SHARED(float, ws, [T][T + 1]);
    const int tx = threadIdx.x;  // output column within the tile
    const int ty = threadIdx.y;  // output row within the tile
    const int i = blockIdx.y * T + ty;
    const int j = blockIdx.x * T + tx;
    const int j_load = blockIdx.x * T + ty;  // w row this thread loads
    float acc = 0.0f;
    for (int k0 = 0; k0 < k; k0 += T) {
        const int kk = k0 + tx;
        xs[ty][tx] = (i < m && kk < k) ? x[static_cast<long long>(i) * k + kk] : 0.0f;
        ws[ty][tx] = (j_load < n && kk < k) ? w[static_cast<long long>(j_load) * k + kk] : 0.0f;
        __syncthreads();  // both tiles complete
        for (int t = 0; t < T; ++t) acc += xs[ty][t] * ws[tx][t];
        __syncthreads();  // done reading before the next iteration overwrites
    }
    if (i < m && j < n) out[static_cast<long long>(i) * n + j] = acc;
}

void launch_matmul_tiled(float* out, const float* x, const float* w, int m, int n, int k) {
    const dim3 grid(blocks_for(n, kMatmulTile), blocks_for(m, kMatmulTile));
    PLAB_LAUNCH(matmul_tiled_kernel, grid, dim3(kMatmulTile, kMatmulTile), 0, out, x, w, m, n, k);
}

}  // namespace plab::PLAB_SIMT_NS
