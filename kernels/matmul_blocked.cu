// Register-blocked matmul: out = x · wᵀ, each thread owning a 4x4 to 8x8 block of out.
//
// What it teaches: where matmul_tiled's time goes, and the three steps past it
// (siboehm, "How to Optimize a CUDA Matmul Kernel for cuBLAS-like Performance";
// CUTLASS's "efficient GEMM" notes):
//
//   1. Register blocking. matmul_tiled reads two floats from shared memory for
//      every multiply-add: shared memory, not arithmetic, sets its pace. Here a
//      thread keeps TM x TN outputs in registers and, per step t of k, reads TM
//      values of x and TN of w once and uses each TN (or TM) times: 8x8 outputs
//      cost 16 shared reads per 64 multiply-adds instead of 128.
//   2. Wide loads. x and w are k-contiguous (a torch Linear's layout), so a
//      thread fetches four consecutive k of one row as one 16-byte load; the
//      slices are stored transposed (t-major) so that the compute loop reads a
//      thread's four rows (or columns) as one 16-byte shared load as well.
//   3. Double buffering. While the threads multiply slice s out of one shared
//      buffer, the loads of slice s+1 are already in flight into registers,
//      then stored into the other buffer: one barrier per slice, and the
//      memory latency hides behind the arithmetic.
//
//   // clang-format off
//   block: 256 threads as 16 x 16 (tx, ty); out tile BM x BN = 16·TM x 16·TN
//   thread (tx, ty) owns rows  g·64 + 4·ty + e  (g < TM/4, e < 4)
//                   and columns h·64 + 4·tx + e  (h < TN/4, e < 4)
//   (groups of four 64 apart, not TM in a row: the 16 threads of a half-warp
//   then read 16 consecutive float4 of a shared row, no bank conflicts)
//   // clang-format on
//
// Parts (launch_matmul_blocked_parts): products that read the same x — a
// layer's Q, K and V, its gate and up — in one launch, their column tiles
// side by side along grid.x. Alone, stories110M's 2048 x 768 Q fills 192
// blocks of 128x64 for 132 multiprocessors; with K and V beside it the
// launch has 288 of 128x128 (H200: 30.8 against 26.2 TFLOP/s).
//
// Which tile: the largest of 128x128, 128x64, 64x64 that still gives every
// multiprocessor a block (fewer, larger blocks reuse more; too few leave
// multiprocessors idle: stories15M's 2048 x 288 products make 48 blocks of
// 128x128 for the H200's 132 multiprocessors, 160 of 64x64).
// Whether to use it at all (matmul_blocked_pays): not under 64 rows (decode
// steps, small chunks: a 64-row tile would multiply zeros), and not when even
// 64x64 tiles leave most multiprocessors idle. On the H200 (2026-12-04,
// kernels/bench/gemm_kernels.cu) a busy multiprocessor ran a 64x64 block at
// ~107 GFLOP/s, and matmul_tiled's many 16x16 blocks ran ~11 per
// multiprocessor over all 132: 128 x 288 x 288 (10 blocks of 64x64) took
// 1070 GFLOP/s blocked against 1488 tiled, 512 x 768 x 288 (96 blocks) 11307
// against 4792. The two meet near 14 blocks; the rule asks for an eighth of
// the multiprocessors (17 on the H200).
//
// Bits: each output is still summed t = 0, 1, ..., k-1 from +0.0, one product
// at a time, so emulated (g++, no contraction) it is cpu-ref's strict_dot bit
// for bit; natively nvcc contracts into FMA, and the gpu backend's tolerance
// covers that (tests/gpu/test_kernels.cpp derives the bound). Zero padding
// past m, n and k adds exact zeros. matmul_tiled sums the same chain, so
// whichever kernel and tile a product takes, its bits are the same: a chunked
// prefill, whose small chunks take matmul_tiled or smaller tiles, gives the
// whole prompt's bits (test_gpu_prefill checks every plan natively). The 16-byte loads need k % 4 == 0 and
// 16-byte aligned x and w; any other call takes the same kernel with four
// 4-byte loads (kWide = false). Left out: tensor cores (TF32 would change
// the rounding by 2^-11 per product), warp-level tiling, split-k.
#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

namespace {

constexpr int kSliceK = 16;   // k per shared-memory slice
constexpr int kSide = 16;     // threads per side of the block: 16 x 16
constexpr int kPad = 4;       // floats after each shared row (keeps 16-byte alignment)
constexpr int kMinRows = 64;  // the smallest tile's rows: fewer would multiply padding

// Four consecutive k of row `row` (< rows) from k0 + 4·quad, or zeros past the
// matrix. kWide: one 16-byte load (k % 4 == 0 and the matrix 16-byte aligned,
// so a quad is whole and aligned, or wholly past k).
template <bool kWide>
__device__ __forceinline__ void load_quad(float (&q)[4], const float* a, int row, int rows, int k,
                                          int kk) {
    if (row >= rows) {
        q[0] = q[1] = q[2] = q[3] = 0.0f;
        return;
    }
    const float* p = a + static_cast<long long>(row) * k + kk;
    if (kWide) {
        if (kk < k) {
            load_float4(q, p);  // 16-byte aligned: see launch_matmul_blocked
        } else {
            q[0] = q[1] = q[2] = q[3] = 0.0f;
        }
    } else {
        for (int e = 0; e < 4; ++e) q[e] = kk + e < k ? p[e] : 0.0f;
    }
}

}  // namespace

// __launch_bounds__: at most 128 registers a thread, so that two blocks share a
// multiprocessor (16 warps to hide latency behind; 8x8 took 145 without it).
template <int TM, int TN, bool kWide>
__global__ void __launch_bounds__(256, 2)
    matmul_blocked_kernel(MatmulParts parts, const float* x, int m, int k) {
    constexpr int BM = kSide * TM, BN = kSide * TN;
    // This block's part, and its tile within that part (kernels.h part_tile).
    const PartTile pt = part_tile(parts, static_cast<int>(blockIdx.x), BN);
    float* const out = pt.out;
    const float* const w = pt.w;
    const int n = pt.n, tile_x = pt.tile;
    // Each thread moves BM/64 quads of x and BN/64 of w per slice: 256 threads
    // x 4 floats cover 64 rows of 16 k.
    constexpr int XQ = BM / 64, WQ = BN / 64;
    static_assert(TM % 4 == 0 && TN % 4 == 0 && XQ >= 1 && WQ >= 1);
    // Two slices of x and of w (double buffering), t-major; PLAB_SHARED arrays
    // are 16-byte aligned and rows are a multiple of 4 floats, so a row's
    // quads can be read as 16-byte loads.
    PLAB_SHARED(float, xs, [2][kSliceK][BM + kPad]);
    PLAB_SHARED(float, ws, [2][kSliceK][BN + kPad]);
    const int tid = static_cast<int>(threadIdx.x);
    const int tx = tid % kSide, ty = tid / kSide;
    const int m0 = static_cast<int>(blockIdx.y) * BM;
    const int n0 = tile_x * BN;
    // The copy: thread tid moves k quad tid % 4 of tile rows tid / 4 + 64·l.
    const int quad = tid % 4, lrow = tid / 4;

    float xq[XQ][4], wq[WQ][4];  // the next slice, in flight
    auto fetch = [&](int k0) {
        for (int l = 0; l < XQ; ++l)
            load_quad<kWide>(xq[l], x, m0 + lrow + 64 * l, m, k, k0 + 4 * quad);
        for (int l = 0; l < WQ; ++l)
            load_quad<kWide>(wq[l], w, n0 + lrow + 64 * l, n, k, k0 + 4 * quad);
    };
    auto store = [&](int buf) {  // transposed: t-major
        for (int l = 0; l < XQ; ++l) {
            for (int e = 0; e < 4; ++e) xs[buf][4 * quad + e][lrow + 64 * l] = xq[l][e];
        }
        for (int l = 0; l < WQ; ++l) {
            for (int e = 0; e < 4; ++e) ws[buf][4 * quad + e][lrow + 64 * l] = wq[l][e];
        }
    };

    float acc[TM][TN];
    PLAB_UNROLL
    for (int r = 0; r < TM; ++r) {
        PLAB_UNROLL
        for (int c = 0; c < TN; ++c) acc[r][c] = 0.0f;  // +0.0, as strict_dot starts
    }

    const int slices = (k + kSliceK - 1) / kSliceK;
    fetch(0);
    store(0);
    __syncthreads();  // slice 0 is complete
    for (int s = 0; s < slices; ++s) {
        const int buf = s % 2;
        if (s + 1 < slices) fetch((s + 1) * kSliceK);  // in flight while we multiply
        PLAB_UNROLL
        for (int t = 0; t < kSliceK; ++t) {
            float a[TM], b[TN];
            PLAB_UNROLL
            for (int g = 0; g < TM / 4; ++g) load_float4(&a[4 * g], &xs[buf][t][64 * g + 4 * ty]);
            PLAB_UNROLL
            for (int h = 0; h < TN / 4; ++h) load_float4(&b[4 * h], &ws[buf][t][64 * h + 4 * tx]);
            PLAB_UNROLL
            for (int r = 0; r < TM; ++r) {
                PLAB_UNROLL
                for (int c = 0; c < TN; ++c) acc[r][c] += a[r] * b[c];
            }
        }
        // The other buffer was last read in slice s - 1, before the barrier
        // that ended it: it may be overwritten now.
        if (s + 1 < slices) store(1 - buf);
        __syncthreads();  // slice s + 1 complete, and everyone done with slice s
    }

    PLAB_UNROLL
    for (int r = 0; r < TM; ++r) {
        const int i = m0 + 64 * (r / 4) + 4 * ty + r % 4;
        if (i >= m) continue;
        PLAB_UNROLL
        for (int c = 0; c < TN; ++c) {
            const int j = n0 + 64 * (c / 4) + 4 * tx + c % 4;
            if (j < n) out[static_cast<long long>(i) * n + j] = acc[r][c];
        }
    }
}

namespace {

// Multiprocessors of device 0, asked once (the emulator reports sm_90's 132).
int multiprocessors() {
    static const int count = [] {
        int device = 0, value = 0;
        PLAB_CUDA_CHECK(cudaGetDevice(&device));
        PLAB_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device));
        return std::max(value, 1);
    }();
    return count;
}

long long tiles(int m, int n, int bm, int bn) {
    return static_cast<long long>((m + bm - 1) / bm) * ((n + bn - 1) / bn);
}

template <int TM, int TN, bool kWide>
void launch_tile(const MatmulParts& parts, const float* x, int m, int k) {
    constexpr int BN = kSide * TN;
    long long column_tiles = 0;
    for (int p = 0; p < parts.count; ++p) column_tiles += (parts.n[p] + BN - 1) / BN;
    const dim3 grid(static_cast<unsigned>(column_tiles), blocks_for(m, kSide * TM));
    const std::string name = "matmul_blocked_kernel<" + std::to_string(TM) + ", " +
                             std::to_string(TN) + (kWide ? ", wide>" : ", narrow>");
    simt::launch(name.c_str(), matmul_blocked_kernel<TM, TN, kWide>, grid, dim3(kSide * kSide), 0,
                 parts, x, m, k);
}

template <int TM, int TN>
void launch_tile(const MatmulParts& parts, const float* x, int m, int k, bool wide) {
    if (wide) {
        launch_tile<TM, TN, true>(parts, x, m, k);
    } else {
        launch_tile<TM, TN, false>(parts, x, m, k);
    }
}

}  // namespace

bool matmul_blocked_pays(int m, int n) {
    return m >= kMinRows && tiles(m, n, 64, 64) * 8 >= multiprocessors();
}

MatmulTile matmul_blocked_tile(int m, int n) {
    const int sms = multiprocessors();
    if (tiles(m, n, 128, 128) >= sms) return {128, 128};
    if (tiles(m, n, 128, 64) >= sms) return {128, 64};
    return {64, 64};
}

void launch_matmul_blocked_parts(const float* x, int m, int k, const MatmulParts& parts) {
    PLAB_CHECK(parts.count >= 1 && parts.count <= kMaxMatmulParts,
               "matmul_blocked takes 1 to " << kMaxMatmulParts << " parts, got " << parts.count);
    // Global offsets are 64-bit (row · k, i · n); only the grid bounds m.
    PLAB_CHECK((m + 63) / 64 <= 65535,
               "matmul_blocked puts row tiles in grid.y (at most 65535 x 64 rows), got m = " << m);
    const auto aligned = [](const float* p) {
        return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
    };
    bool wide = k % 4 == 0 && aligned(x);
    for (int p = 0; p < parts.count; ++p) wide = wide && aligned(parts.w[p]);
    const MatmulTile t = matmul_blocked_tile(m, parts.n_total());
    if (t.rows == 128 && t.cols == 128) {
        launch_tile<8, 8>(parts, x, m, k, wide);
    } else if (t.rows == 128) {
        launch_tile<8, 4>(parts, x, m, k, wide);
    } else {
        launch_tile<4, 4>(parts, x, m, k, wide);
    }
}

void launch_matmul_blocked(float* out, const float* x, const float* w, int m, int n, int k) {
    launch_matmul_blocked_parts(x, m, k, MatmulParts::one(out, w, n));
}

}  // namespace plab::PLAB_SIMT_NS
