#include "backends/cpu_fast/cpu_library_gemm.h"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>

#include "core/cpu_threads.h"
#include "core/error.h"
#include "core/machine_override.h"

namespace plab::cpu_library_gemm {

namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMajor>;
using Map = Eigen::Map<RowMajor>;

// Eigen runs a large product on OpenMP threads of its own whenever
// omp_get_max_threads() > 1 on the calling thread; inside a pool task that
// would start a second team. One thread per product: the pool splits.
class SerialEigen {
public:
    SerialEigen() : saved_(omp_get_max_threads()) {
        if (saved_ != 1) omp_set_num_threads(1);
    }
    ~SerialEigen() {
        if (saved_ != 1) omp_set_num_threads(saved_);
    }
    SerialEigen(const SerialEigen&) = delete;
    SerialEigen& operator=(const SerialEigen&) = delete;

private:
    int saved_;
};

// Column slices start on whole cache lines of the outputs.
constexpr int kColumnAlign = 16;

}  // namespace

void products(Buffer x, int m, int k, std::span<const MatmulPart> parts, int threads) {
    PLAB_ASSERT(x.size >= std::size_t(m) * k && threads >= 1);
    apply_cpu_cache_override();  // Eigen blocks for these caches (PLAB_CPU_CACHES)
    const ConstMap X(x.data, m, k);
    for (const MatmulPart& p : parts) {
        PLAB_ASSERT(p.out.size >= std::size_t(m) * p.n && p.w.size >= std::size_t(p.n) * k);
        const ConstMap W(p.w.data, p.n, k);
        Map O(p.out.data, m, p.n);
        // One slice per CPU of the process, whatever number of threads this
        // op is given: the slices (and Eigen's kernel and blocking for each)
        // follow the product's shape, never how many threads were awake, so
        // the same step gives the same bits run after run.
        const int slices = std::clamp(p.n / kColumnAlign, 1, cpu_threads());
        const int width = (p.n + slices - 1) / slices;
        const int cols = (width + kColumnAlign - 1) / kColumnAlign * kColumnAlign;
        run_cpu_tasks(threads, (p.n + cols - 1) / cols, [&](int t) {
            const SerialEigen serial;
            const int c0 = t * cols, c1 = std::min(p.n, c0 + cols);
            // One row: Eigen's GEMV; more: its GEMM. Either way the library
            // picks the order of the adds for this shape.
            O.middleCols(c0, c1 - c0).noalias() = X * W.middleRows(c0, c1 - c0).transpose();
        });
    }
}

}  // namespace plab::cpu_library_gemm
