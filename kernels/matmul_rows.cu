// One-row product: out = x · wᵀ for a decode step's few rows (m <= kRowsMax).
//
// What it teaches: why a kernel written for prefill is slow at decode, and
// what a decode product needs instead. A decode step multiplies one row (or a
// handful: a small batch) by every weight matrix. matmul_tiled gives such a
// product 16 of its 256 threads a block and walks k in 16-wide steps, each a
// load -> barrier -> 16 multiply-adds: k/16 dependent round trips to memory
// per block. Here a block owns kRowOutputs outputs and streams their weight
// rows, which lie end to end in memory ((n, k) layout: rows j0..j0+15 are one
// contiguous stretch), into shared memory with every one of its threads
// loading (coalesced, dozens of loads in flight each), then each output runs
// its k-order chain out of shared memory. One memory round trip per slice of
// kRowSliceK, instead of one per 16 k.
//
// Bits: each output is still one chain, t = 0, 1, ..., k-1 from +0.0, one
// `acc += x * w` at a time, the very expression of matmul_tiled and
// matmul_blocked (contracted into FMA natively, as theirs: this file opts in
// to --fmad=true beside them; not contracted emulated). So a decode step's
// products give the bits a whole prefill's rows get, and chunked == whole
// stays bitwise whichever kernel each chunk takes. A chain cannot be split
// over k without changing its sum: that is why one output is one thread, and
// why the slices go through shared memory rather than through lanes.
//
// Epilogues (fused elementwise steps, one launch where there were two or
// three):
//   plain   out[i][j] = acc                        (Q|K|V side by side, W_o, down, classifier)
//   swiglu  out[i][j] = silu(gate acc) * (up acc)  (gate and up in one block: strict_swiglu,
//                                                   the function swiglu_kernel calls)
//
//   // clang-format off
//   block: 128 threads = kRowOutputs (16) outputs x kRowsMax (8) rows
//   thread (j, r): output j0 + j of row r, one chain (two with swiglu: gate and up)
//   shared: x rows  [8][256]  and the weight rows  [W][16][257]  (257: thread j reads
//           row j at stride 257, so the 16 threads of a row hit 16 different banks)
//   // clang-format on
//
// Left out: 16-byte loads, double buffering the slices, and one warp per
// output with the chain's k split over its lanes (the fastest GEMV, but a
// different sum: the bits would follow the kernel, not the row).
#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

namespace {
constexpr int kRowOutputs = 16;  // outputs a block
constexpr int kRowSliceK = 256;  // k a shared-memory slice
constexpr int kRowThreads = kRowOutputs * kRowsMax;
}  // namespace

// kSwiglu: parts holds gate (part 0) and up (part 1) of the same n; out is
// parts.out[0]. Else parts side by side along grid.x, as matmul_blocked.
template <bool kSwiglu>
__global__ void __launch_bounds__(kRowThreads)
    matmul_rows_kernel(MatmulParts parts, const float* x, int m, int k) {
    constexpr int J = kRowOutputs, KS = kRowSliceK, W = kSwiglu ? 2 : 1;
    PLAB_SHARED(float, xs, [kRowsMax][KS]);
    PLAB_SHARED(float, ws, [W][J][KS + 1]);

    // This block's part and first output (kernels.h part_tile); with kSwiglu
    // one part, gate, whose up (part 1) has the same rows.
    const PartTile pt =
        kSwiglu ? PartTile{parts.out[0], parts.w[0], parts.n[0], static_cast<int>(blockIdx.x)}
                : part_tile(parts, static_cast<int>(blockIdx.x), J);
    float* const out = pt.out;
    const float* const w0 = pt.w;
    const float* const w1 = parts.w[1];  // up, with kSwiglu
    const int n = pt.n, tile = pt.tile;
    const int j0 = tile * J;
    const int tid = static_cast<int>(threadIdx.x);
    const int j = tid % J, r = tid / J;

    float acc0 = 0.0f, acc1 = 0.0f;  // +0.0, as strict_dot starts
    for (int k0 = 0; k0 < k; k0 += KS) {
        const int len = k - k0 < KS ? k - k0 : KS;
        // Every thread loads: consecutive threads, consecutive k of one row.
        for (int e = tid; e < m * KS; e += kRowThreads) {
            const int row = e / KS, t = e % KS;
            xs[row][t] = t < len ? x[static_cast<long long>(row) * k + k0 + t] : 0.0f;
        }
        for (int e = tid; e < J * KS; e += kRowThreads) {
            const int row = e / KS, t = e % KS;
            const bool in = j0 + row < n && t < len;
            const long long at = static_cast<long long>(j0 + row) * k + k0 + t;
            ws[0][row][t] = in ? w0[at] : 0.0f;
            if (kSwiglu) ws[W - 1][row][t] = in ? w1[at] : 0.0f;
        }
        __syncthreads();  // the slice is complete
        if (r < m) {
            for (int t = 0; t < len; ++t) {
                acc0 += xs[r][t] * ws[0][j][t];
                if (kSwiglu) acc1 += xs[r][t] * ws[W - 1][j][t];
            }
        }
        __syncthreads();  // read before the next slice overwrites it
    }
    if (r < m && j0 + j < n) {
        const long long at = static_cast<long long>(r) * n + j0 + j;
        out[at] = kSwiglu ? strict_swiglu(acc0, acc1) : acc0;
    }
}

bool matmul_rows_pays(int m) {
    return m >= 1 && m <= kRowsMax;
}

void launch_matmul_rows_parts(const float* x, int m, int k, const MatmulParts& parts) {
    PLAB_CHECK(matmul_rows_pays(m), "matmul_rows takes 1 to " << kRowsMax << " rows, got " << m);
    PLAB_CHECK(parts.count >= 1 && parts.count <= kMaxMatmulParts,
               "matmul_rows takes 1 to " << kMaxMatmulParts << " parts, got " << parts.count);
    unsigned blocks = 0;
    for (int p = 0; p < parts.count; ++p) blocks += blocks_for(parts.n[p], kRowOutputs);
    PLAB_LAUNCH(matmul_rows_kernel<false>, blocks, kRowThreads, 0, parts, x, m, k);
}

void launch_matmul_rows_swiglu(float* out, const float* x, const float* w_gate, const float* w_up,
                               int m, int f, int k) {
    PLAB_CHECK(matmul_rows_pays(m), "matmul_rows takes 1 to " << kRowsMax << " rows, got " << m);
    MatmulParts gate_up;
    gate_up.out[0] = out;
    gate_up.w[0] = w_gate;
    gate_up.w[1] = w_up;
    gate_up.n[0] = gate_up.n[1] = f;
    gate_up.count = 2;
    PLAB_LAUNCH(matmul_rows_kernel<true>, blocks_for(f, kRowOutputs), kRowThreads, 0, gate_up, x, m,
                k);
}

}  // namespace plab::PLAB_SIMT_NS
