#include "perf/machine.h"

#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu_threads.h"
#include "backends/host_memory.h"
#include "core/error.h"
#include "perf/blas_gemm.h"
#include "runtime/registry.h"

namespace plab {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

MachineSpeed measure_machine(int n, int repeats, bool with_blas) {
    MachineSpeed m;
    m.threads = omp_get_max_threads();
    m.gemm_size = n;
    m.gemm_repeats = repeats;
    using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Mat a = Mat::Random(n, n), b = Mat::Random(n, n), c(n, n);
    const double flops = 2.0 * n * n * double(n);
    // OpenBLAS first: after a call its worker threads keep spinning for a
    // while (2^28 cycles, its THREAD_TIMEOUT, ~0.1 s) before they sleep, and
    // Eigen's untimed warm-up below, then a pause, outlast that, so they take
    // no core from the measurements after it.
    std::string why_not = "not measured";
    const BlasGemm* blas = with_blas ? BlasGemm::openblas(&why_not) : nullptr;
    m.openblas = blas != nullptr ? blas->name() : why_not;
    if (blas != nullptr) {
        blas->sgemm(n, n, n, a.data(), b.data(), c.data(), m.threads);  // warm-up
        for (int r = 0; r < repeats; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            blas->sgemm(n, n, n, a.data(), b.data(), c.data(), m.threads);
            m.openblas_gemm_gflops =
                std::max(m.openblas_gemm_gflops, flops / seconds_since(t0) / 1e9);
        }
        // A product that was really computed: C[0][0] against its own sum.
        double c00 = 0;
        for (int k = 0; k < n; ++k) c00 += double(a(0, k)) * b(k, 0);
        PLAB_ASSERT(std::abs(c(0, 0) - c00) <= 1e-3 * (1 + std::abs(c00)));
    }
    c.noalias() = a * b;  // warm-up: page in, spin up threads
    if (blas != nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(200));
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
    m.gemm_gflops = std::max({m.eigen_gemm_gflops, m.openblas_gemm_gflops, m.engine_gemm_gflops});
    // 256 MiB source: far larger than any cache level. The bandwidths are
    // measured in the memory the engine keeps its weights and cache in (huge
    // pages where the kernel gives them, backends/host_memory.h).
    const std::size_t bytes = std::size_t(256) << 20;
    std::vector<char, HostAllocator<char>> src(bytes, 1), dst(bytes, 0);
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
    HostVector big(floats, 1.0f);
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

double weight_sweep_seconds(double bytes, int repeats) {
    using namespace Eigen::internal;
    using Packet = packet_traits<float>::type;
    constexpr int kLanes = packet_traits<float>::size;
    const std::size_t floats = std::max<std::size_t>(std::size_t(bytes / sizeof(float)), 1);
    // In the memory the engine keeps its weights in (huge pages where the
    // kernel gives them, backends/host_memory.h): the limit of the same reads.
    HostVector w(floats);
    for (std::size_t i = 0; i < floats; ++i) w[i] = 1.0f + float(i % 7) * 0x1p-8f;
    const int threads = cpu_threads();
    const int tasks = threads * 8;  // dynamic: a late thread delays one piece
    std::vector<float> sums(static_cast<std::size_t>(tasks));
    const auto sweep = [&] {
        run_cpu_tasks(threads, tasks, [&](int t) {
            const std::size_t lo = floats * std::size_t(t) / tasks;
            const std::size_t hi = floats * std::size_t(t + 1) / tasks;
            // Four independent multiply-add chains, as a decode GEMV keeps.
            const Packet x = pset1<Packet>(0.5f);
            Packet a0 = pset1<Packet>(0.0f), a1 = a0, a2 = a0, a3 = a0;
            std::size_t i = lo;
            for (; i + 4 * kLanes <= hi; i += 4 * kLanes) {
                a0 = pmadd(ploadu<Packet>(&w[i]), x, a0);
                a1 = pmadd(ploadu<Packet>(&w[i + kLanes]), x, a1);
                a2 = pmadd(ploadu<Packet>(&w[i + 2 * kLanes]), x, a2);
                a3 = pmadd(ploadu<Packet>(&w[i + 3 * kLanes]), x, a3);
            }
            float s = predux(padd(padd(a0, a1), padd(a2, a3)));
            for (; i < hi; ++i) s += w[i] * 0.5f;
            sums[std::size_t(t)] = s;
        });
    };
    sweep();  // warm-up: page in, and into whatever cache holds it
    std::vector<double> times;
    for (int r = 0; r < repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        sweep();
        times.push_back(seconds_since(t0));
    }
    PLAB_ASSERT(sums[0] > 0);  // the sweep was really taken
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

std::string peak_source(const MachineSpeed& m) {
    // Ties go to the first: Eigen, OpenBLAS, the engine.
    if (m.eigen_gemm_gflops >= std::max(m.openblas_gemm_gflops, m.engine_gemm_gflops))
        return "Eigen GEMM";
    return m.openblas_gemm_gflops >= m.engine_gemm_gflops ? "OpenBLAS GEMM"
                                                          : "engine GEMM, cpu_gemm";
}

}  // namespace plab
