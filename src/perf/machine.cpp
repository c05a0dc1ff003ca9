#include "perf/machine.h"

#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "runtime/registry.h"

namespace plab {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

MachineSpeed measure_machine(int n, int repeats) {
    MachineSpeed m;
    m.threads = omp_get_max_threads();
    using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Mat a = Mat::Random(n, n), b = Mat::Random(n, n), c(n, n);
    c.noalias() = a * b;  // warm-up: page in, spin up threads
    const double flops = 2.0 * n * n * double(n);
    for (int r = 0; r < repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        c.noalias() = a * b;
        m.eigen_gemm_gflops = std::max(m.eigen_gemm_gflops, flops / seconds_since(t0) / 1e9);
    }
    // The engine's own: the cpu backend's matmul, its weight repacked once as
    // a model's is (prepare_weight), so the peak includes the fastest GEMM
    // the engine could run (if it beats Eigen's, the fractions of peak are
    // against it).
    {
        auto cpu = make_backend("cpu");
        const std::size_t nn = std::size_t(n) * n;
        const Buffer x = cpu->alloc(nn), w = cpu->alloc(nn), out = cpu->alloc(nn);
        cpu->upload(x, a.data(), nn);
        cpu->upload(w, b.data(), nn);
        cpu->prepare_weight(w, n, n);
        cpu->matmul(out, x, w, n, n, n);  // warm-up
        for (int r = 0; r < repeats; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            cpu->matmul(out, x, w, n, n, n);
            m.engine_gemm_gflops = std::max(m.engine_gemm_gflops, flops / seconds_since(t0) / 1e9);
        }
        for (Buffer buf : {x, w, out}) cpu->release(buf);
    }
    m.gemm_gflops = std::max(m.eigen_gemm_gflops, m.engine_gemm_gflops);
    // 256 MiB source: far larger than any cache level.
    const std::size_t bytes = std::size_t(256) << 20;
    std::vector<char> src(bytes, 1), dst(bytes, 0);
    for (int r = 0; r < repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel
        {
            const int t = omp_get_thread_num(), nt = omp_get_num_threads();
            const std::size_t per = bytes / nt;
            std::memcpy(dst.data() + t * per, src.data() + t * per, per);
        }
        const double s = seconds_since(t0);
        m.copy_gb_per_s = std::max(m.copy_gb_per_s, 2.0 * bytes / s / 1e9);
    }
    // Read-only: Eigen's vectorised sum over each thread's share of 1 GiB.
    const std::size_t floats = (std::size_t(1) << 30) / sizeof(float);
    std::vector<float> big(floats, 1.0f);
    double sink = 0;
    for (int r = 0; r < repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel reduction(+ : sink)
        {
            const int t = omp_get_thread_num(), nt = omp_get_num_threads();
            const std::size_t per = floats / nt;
            sink += Eigen::Map<const Eigen::ArrayXf>(big.data() + t * per, per).sum();
        }
        const double s = seconds_since(t0);
        m.read_gb_per_s = std::max(m.read_gb_per_s, floats * sizeof(float) / s / 1e9);
    }
    PLAB_ASSERT(sink > 0);  // the sums were really taken
    return m;
}

}  // namespace plab
