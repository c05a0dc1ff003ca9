// The fast CPU backend's matrix product, written so that each output does not
// depend on how many rows are computed with it: the chunk-invariant GEMM.
//
// What it teaches (lesson 15, "Why fast kernels differ in the last bits"):
// a float sum rounds after every add, so its bits depend on the order of the
// adds. A library GEMM (Eigen's, a BLAS) picks that order from the shape of
// the call — how many rows, which rows fall in a full register tile and
// which in the remainder code, whether one row takes the GEMV path — so the
// same token's projection can round differently when it is prefilled in a
// chunk of 5 tokens than in a chunk of 10. That is why chunked prefill on a
// fast backend used to differ from full prefill in the last bits.
//
// Here every output C[i][j] is one chain of fused multiply-adds over k in
// increasing order, acc = fma(A[i][k], B[k][j], acc) starting from +0, in one
// vector lane, whatever the micro-tile, the thread or the number of rows:
//
//   // clang-format off
//   B in column panels of kPanel columns (2 vector registers), k-major:
//     panel 0: B[0][0..31] B[1][0..31] ... B[K-1][0..31]   then panel 1 ...
//   micro-tile: R rows x P panels; per k: load the P panels' row k (2P vectors),
//   broadcast A[i][k] for each of the R rows, 2RP fused multiply-adds.
//   // clang-format on
//
// Splitting k into blocks would not change a bit either (storing and reloading
// an accumulator is exact), nor would splitting rows or columns among threads.
// This is the "broadcast A, stream B" micro-kernel of BLIS and GotoBLAS
// (Goto & van de Geijn 2008), with the weights repacked once into panels so
// the kernel streams them (prepare_weight in core/backend.h).
//
// A packed weight's next panel group is asked for (prefetch) while the
// current one computes: only the order of memory reads changes (cpu_gemm.cpp).
//
// Left out: a k-blocking for L1 (the panels are read from L2), AVX-512
// masked tails (a partial panel is zero-padded instead; only a
// last panel with at most one register of real columns skips its padding
// half).
#pragma once

#include <cstddef>

#include "core/host_memory.h"

namespace plab::cpu_gemm {

// Floats per vector register of this build (-march=native: 16 with AVX-512,
// 8 with AVX2), and columns per panel of B: two registers.
int lanes();
int panel_columns();
// Rows of the main micro-tile (6): a row range of a multiple of it has no
// remainder rows, which run slower.
int tile_rows();
// Panels of the main micro-tile (2 with AVX-512, 1 with AVX2): a run of
// panels of a multiple of it ends in no one-panel tile, which runs slower.
int tile_panels();

// B of (K, N) floats as column panels: element (k, j) lives at
//   data[(j / panel_columns()) * panel_stride + k * row_stride + j % panel_columns()]
// and columns past N up to the panel's end hold 0.
//   - packed weights: panel_stride = K * panel_columns(), row_stride = panel_columns();
//   - a row-major (K, N_padded) matrix (N_padded a multiple of panel_columns()):
//     panel_stride = panel_columns(), row_stride = N_padded.
struct Panels {
    const float* data = nullptr;
    int k = 0, n = 0;
    std::size_t panel_stride = 0, row_stride = 0;
};

// w (N, K) row-major -> B = wᵀ as packed panels (stored in `out`).
// The panels live in host memory in huge pages (host_memory.h): a decode step
// streams every weight once.
Panels pack_transposed(const float* w, int n, int k, HostVector& out);

// N rounded up to whole panels.
int padded_columns(int n);

// C[i][j] = sum_k A[i][k] B[k][j] for rows [row0, row1) and the columns of
// panels [panel0, panel1). A: row i at a + i * lda. C: row-major, row stride
// ldc, and `c` points at C's column panel0 * panel_columns() (row 0), so a task
// that owns some panels can pass its own slice. Columns past B.n are not
// written (nor, from a last panel of at most one register of real columns,
// computed).
void gemm(float* c, std::size_t ldc, const float* a, std::size_t lda, const Panels& b, int row0,
          int row1, int panel0, int panel1);

}  // namespace plab::cpu_gemm
