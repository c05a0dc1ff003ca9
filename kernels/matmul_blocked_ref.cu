// Reference matmul: out = x · wᵀ, bitwise equal to cpu-ref, through shared-memory tiles.
//
// What it teaches: speed without changing a bit. Each output (i, j) is the
// sum of x[i][t]·w[j][t] for t = 0..k-1 in that order, starting from +0.0,
// every product and sum rounded on its own (core/strict_math.h strict_mul /
// strict_add, and the file is compiled with --fmad=false): exactly
// strict_dot, the sum cpu-ref takes. What may change is only *who loads what*:
//
//   1. A block of 256 threads owns a 64x64 tile of out. It walks k in steps of
//      32: the threads copy the 64x32 slices of x and w into shared memory,
//      neighbouring threads reading neighbouring floats of one row (a warp
//      reads 128 contiguous bytes: coalesced; one thread per output would
//      have neighbours read rows k floats apart).
//   2. __syncthreads; each thread adds the slice's products to its 4x4
//      outputs, t in order, reading shared memory. Each loaded float is used
//      by 64 outputs instead of one.
//   3. __syncthreads (no one overwrites a slice still being read); next slice.
//
//   // clang-format off
//   thread (tx, ty), tx, ty in 0..15, owns rows ty + 16r and columns tx + 16c (r, c < 4);
//   xs[t][row], ws[t][col]: k-major, rows padded to 65 floats so that the
//   copy (32 threads, 32 values of t, one row) hits 32 different banks
//   // clang-format on
//
// The last slice is short when 32 does not divide k: its loop stops at the
// last real t instead of adding zero products of a padded tail. (Adding +0.0
// to a sum that started at +0.0 would not change a bit, but a sum must not
// depend on that argument, and skipping is what cpu-ref does.) Rows and
// columns beyond m, n are loaded as 0, never summed for a stored output and
// never stored. Indices are 32-bit; launch_matmul_blocked_ref checks that they fit.
// Left out: double buffering, vectorised loads, tensor cores (which would
// change the rounding: not for a reference).
#include <algorithm>
#include <climits>

#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

namespace {
constexpr int kTileM = 64;   // rows of out per block
constexpr int kTileN = 64;   // columns of out per block
constexpr int kTileK = 32;   // k per shared-memory slice
constexpr int kSide = 16;    // threads per side: 16 x 16 = 256
constexpr int kPerSide = 4;  // outputs per thread per side: 4 x 4
constexpr int kThreads = kSide * kSide;
static_assert(kTileM == kSide * kPerSide && kTileN == kSide * kPerSide);
static_assert(kTileM * kTileK % kThreads == 0 && kThreads % kTileK == 0);
}  // namespace

__global__ void matmul_blocked_ref_kernel(float* out, const float* x, const float* w, int m, int n,
                                          int k) {
    PLAB_SHARED(float, xs, [kTileK][kTileM + 1]);  // (t, row of the tile)
    PLAB_SHARED(float, ws, [kTileK][kTileN + 1]);  // (t, column of the tile)
    const int tid = static_cast<int>(threadIdx.x);
    const int tx = tid % kSide;
    const int ty = tid / kSide;
    const int m0 = static_cast<int>(blockIdx.y) * kTileM;
    const int n0 = static_cast<int>(blockIdx.x) * kTileN;
    // How many of this thread's rows / columns exist (the last tiles are partial).
    int rows = 0, cols = 0;
    for (int r = 0; r < kPerSide; ++r) rows += m0 + ty + kSide * r < m ? 1 : 0;
    for (int c = 0; c < kPerSide; ++c) cols += n0 + tx + kSide * c < n ? 1 : 0;
    float acc[kPerSide][kPerSide];
    for (int r = 0; r < kPerSide; ++r) {
        for (int c = 0; c < kPerSide; ++c) acc[r][c] = 0.0f;  // +0.0, as strict_dot starts
    }
    // The copy: thread tid moves t = tid % 32 of tile rows tid / 32 + 8·l.
    const int t_load = tid % kTileK;
    const int row_load = tid / kTileK;
    constexpr int kRowStep = kThreads / kTileK;
    for (int k0 = 0; k0 < k; k0 += kTileK) {
        const int kt = min(kTileK, k - k0);  // real t in this slice
        for (int rr = row_load; rr < kTileM; rr += kRowStep) {
            const bool t_ok = t_load < kt;
            xs[t_load][rr] = t_ok && m0 + rr < m ? x[(m0 + rr) * k + k0 + t_load] : 0.0f;
            ws[t_load][rr] = t_ok && n0 + rr < n ? w[(n0 + rr) * k + k0 + t_load] : 0.0f;
        }
        __syncthreads();  // the slice is complete
        for (int t = 0; t < kt; ++t) {
            float a[kPerSide], b[kPerSide];
            for (int r = 0; r < kPerSide; ++r) a[r] = xs[t][ty + kSide * r];
            for (int c = 0; c < kPerSide; ++c) b[c] = ws[t][tx + kSide * c];
            for (int r = 0; r < kPerSide; ++r) {
                for (int c = 0; c < kPerSide; ++c) {
                    if (r < rows && c < cols) {
                        acc[r][c] = strict_add(acc[r][c], strict_mul(a[r], b[c]));
                    }
                }
            }
        }
        __syncthreads();  // every thread is done reading before the next copy
    }
    // Constant loop bounds (guards inside): the loops unroll and acc stays in
    // registers; a runtime bound would index acc dynamically, in local memory.
    for (int r = 0; r < kPerSide; ++r) {
        for (int c = 0; c < kPerSide; ++c) {
            if (r < rows && c < cols)
                out[(m0 + ty + kSide * r) * n + n0 + tx + kSide * c] = acc[r][c];
        }
    }
}

void launch_matmul_blocked_ref(float* out, const float* x, const float* w, int m, int n, int k) {
    const long long mk = static_cast<long long>(m) * k, nk = static_cast<long long>(n) * k;
    const long long mn = static_cast<long long>(m) * n;
    PLAB_CHECK(std::max({mk, nk, mn}) <= INT_MAX,
               "matmul_blocked_ref indexes with 32-bit ints: m x k (" << mk << "), n x k (" << nk
                                                                      << ") and m x n (" << mn
                                                                      << ") must stay below 2^31");
    PLAB_CHECK((m + kTileM - 1) / kTileM <= 65535,
               "matmul_blocked_ref puts row tiles in grid.y (at most 65535 x "
                   << kTileM << " rows), got m = " << m);
    const dim3 grid(blocks_for(n, kTileN), blocks_for(m, kTileM));
    PLAB_LAUNCH(matmul_blocked_ref_kernel, grid, kThreads, 0, out, x, w, m, n, k);
}

}  // namespace plab::PLAB_SIMT_NS
