// Running one rung of the matmul ladder (matmul_ladder_run.h) on a host
// product: upload, launch, download. Compiled both ways like every kernel.
#include "kernels.h"
#include "ladder_upload.h"
#include "matmul_ladder_run.h"

namespace plab::PLAB_SIMT_NS {

namespace {

void launch_rung(MatmulRung rung, float* out, const float* x, const float* w, int m, int n, int k) {
    switch (rung) {
        case MatmulRung::naive:
            return launch_matmul_naive(out, x, w, m, n, k);
        case MatmulRung::tiled:
            return launch_matmul_tiled(out, x, w, m, n, k);
        case MatmulRung::blocked_ref:
            return launch_matmul_blocked_ref(out, x, w, m, n, k);
        case MatmulRung::blocked:
            return launch_matmul_blocked(out, x, w, m, n, k);
        case MatmulRung::rows:
            return launch_matmul_rows_parts(x, m, k, MatmulParts::one(out, w, n));
    }
}

}  // namespace

static_assert(kMatmulRowsRungMax == kRowsMax);

std::vector<float> run_matmul_rung(MatmulRung rung, const std::vector<float>& x,
                                   const std::vector<float>& w, int m, int n, int k) {
    PLAB_CHECK(x.size() == std::size_t(m) * k && w.size() == std::size_t(n) * k,
               "run_matmul_rung: x must hold m x k and w n x k floats");
    const LadderBuffer<float> dx(x), dw(w), out(std::vector<float>(std::size_t(m) * n, NAN));
    launch_rung(rung, out.get(), dx.get(), dw.get(), m, n, k);
    PLAB_CUDA_CHECK(cudaDeviceSynchronize());
    return out.download(std::size_t(m) * n);
}

}  // namespace plab::PLAB_SIMT_NS
