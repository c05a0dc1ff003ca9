// The matmul ladder as host code sees it: the rungs in order, and one product
// run on each (matmul_ladder.cu). No CUDA or emulator header here.
//
// What it teaches: five kernels, one product. Each rung changes who loads
// what (kernels/README.md's table); the two strict rungs (naive and gpu-ref's
// blocked_ref) sum every output as cpu-ref does, bit for bit, and the three
// that may contract a multiply-add into an FMA (the gpu backend's) give each
// other the same bits: every output is one k-order chain on every rung.
#pragma once

#include <vector>

namespace plab {

enum class MatmulRung { naive, tiled, blocked_ref, blocked, rows };
inline constexpr MatmulRung kMatmulRungs[] = {MatmulRung::naive, MatmulRung::tiled,
                                              MatmulRung::blocked_ref, MatmulRung::blocked,
                                              MatmulRung::rows};
// The rung's kernel file, without ".cu" (matmul_naive, ...).
inline const char* matmul_rung_file(MatmulRung r) {
    switch (r) {
        case MatmulRung::naive:
            return "matmul_naive";
        case MatmulRung::tiled:
            return "matmul_tiled";
        case MatmulRung::blocked_ref:
            return "matmul_blocked_ref";
        case MatmulRung::blocked:
            return "matmul_blocked";
        case MatmulRung::rows:
            return "matmul_rows";
    }
    return "?";
}
// Whether the rung sums without FMA contraction, as cpu-ref does.
inline bool matmul_rung_strict(MatmulRung r) {
    return r == MatmulRung::naive || r == MatmulRung::blocked_ref;
}
// matmul_rows takes products of at most this many rows (kernels.h kRowsMax).
inline constexpr int kMatmulRowsRungMax = 8;

// out (m, n) = x (m, k) · w (n, k)ᵀ on one rung: upload, launch, download.
namespace gpu_native {
std::vector<float> run_matmul_rung(MatmulRung rung, const std::vector<float>& x,
                                   const std::vector<float>& w, int m, int n, int k);
}
namespace gpu_emulated {
std::vector<float> run_matmul_rung(MatmulRung rung, const std::vector<float>& x,
                                   const std::vector<float>& w, int m, int n, int k);
}

}  // namespace plab
