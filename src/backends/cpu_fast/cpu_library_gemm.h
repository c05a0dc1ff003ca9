// The `fastest` kernel set's products (core/kernel_choice.h): each one handed to
// Eigen, the library, which picks the kernel for the product's shape.
//
// What it teaches (lesson 16): the library's order follows the shape. One
// row (a decode step of one sequence) goes to Eigen's GEMV, which sums a
// dot product in its own blocked order; several rows go to its GEMM, whose
// micro-kernel and blocking are chosen from the rows, columns and depth of
// the call. So a token's projection rounds one way alone and another way
// beside batch-mates or in another chunk — the behaviour lesson 15's
// chunk-invariant GEMM (cpu_gemm.h) was written to remove. On this project's
// machines the library is not even faster here (assets/bench/README.md):
// its GEMM packs both operands on every call, where cpu_gemm's weights are
// packed once at load.
#pragma once

#include <span>

#include "core/backend.h"

namespace plab::cpu_library_gemm {

// out = x · wᵀ for each part (x: m x k row-major, w: n x k row-major as
// uploaded, out: m x n), in one column slice per CPU of the process, on
// `threads` threads of the engine's pool, each slice one single-threaded
// Eigen product: its bits follow the shape (m, n, k), not the threads.
void products(Buffer x, int m, int k, std::span<const MatmulPart> parts, int threads);

}  // namespace plab::cpu_library_gemm
