#include "perf/machine.h"

#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/cpu_threads.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "core/machine_override.h"
#include "perf/blas_gemm.h"
#include "runtime/registry.h"

namespace plab {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// The operands of the three products, and what each needs to run: a cpu
// backend holding the engine's (its weight repacked once, as a model's is)
// and the loaded OpenBLAS.
struct PeakGemms::Operands {
    using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    int n = 0;
    Mat a, b, c;
    const BlasGemm* blas = nullptr;
    std::string openblas = "not measured";
    std::unique_ptr<Backend> cpu;
    Buffer x, w, out;
};

PeakGemms::PeakGemms(int n, bool with_blas) : ops_(std::make_unique<Operands>()) {
    Operands& o = *ops_;
    o.n = n;
    apply_cpu_cache_override();  // the peak under the caches the engine's products see
    o.a = Operands::Mat::Random(n, n);
    o.b = Operands::Mat::Random(n, n);
    o.c.resize(n, n);
    if (with_blas) {
        o.blas = BlasGemm::openblas(&o.openblas);
        if (o.blas != nullptr) o.openblas = o.blas->name();
    }
    // The engine's own: the cpu backend's matmul, so the peak includes the
    // fastest GEMM the engine could run (if it beats Eigen's, the fractions
    // of peak are against it).
    o.cpu = make_backend("cpu");
    const std::size_t nn = std::size_t(n) * n;
    o.x = o.cpu->alloc(nn);
    o.w = o.cpu->alloc(nn);
    o.out = o.cpu->alloc(nn);
    o.cpu->upload(o.x, o.a.data(), nn);
    o.cpu->upload(o.w, o.b.data(), nn);
    o.cpu->prepare_weight(o.w, n, n);
}

PeakGemms::~PeakGemms() {
    for (Buffer buf : {ops_->x, ops_->w, ops_->out}) ops_->cpu->release(buf);
}

int PeakGemms::size() const {
    return ops_->n;
}

bool PeakGemms::has(GemmSource s) const {
    return s != GemmSource::openblas || ops_->blas != nullptr;
}

const std::string& PeakGemms::openblas() const {
    return ops_->openblas;
}

double PeakGemms::run(GemmSource s, bool settle) {
    PLAB_ASSERT(has(s));
    Operands& o = *ops_;
    const int n = o.n;
    const auto t0 = std::chrono::steady_clock::now();
    switch (s) {
        case GemmSource::eigen:
            o.c.noalias() = o.a * o.b;
            break;
        case GemmSource::openblas:
            o.blas->sgemm(n, n, n, o.a.data(), o.b.data(), o.c.data(), omp_get_max_threads());
            break;
        case GemmSource::engine:
            o.cpu->matmul(o.out, o.x, o.w, n, n, n);
            break;
    }
    const double gflops = 2.0 * n * n * double(n) / seconds_since(t0) / 1e9;
    // A product that was really computed: C[0][0] against its own sum (the
    // engine's is x · wᵀ, a torch Linear's layout).
    float c00 = o.c(0, 0);
    double sum = 0;
    if (s == GemmSource::engine) {
        o.cpu->download(&c00, o.out, 1);
        for (int k = 0; k < n; ++k) sum += double(o.a(0, k)) * o.b(0, k);
    } else {
        for (int k = 0; k < n; ++k) sum += double(o.a(0, k)) * o.b(k, 0);
    }
    PLAB_ASSERT(std::abs(c00 - sum) <= 1e-3 * (1 + std::abs(sum)));
    if (settle && s == GemmSource::openblas)
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return gflops;
}

MachineSpeed measure_machine(int n, int repeats, bool with_blas) {
    PeakGemms gemms(n, with_blas);
    return measure_machine(gemms, repeats);
}

MachineSpeed measure_machine(PeakGemms& gemms, int repeats) {
    MachineSpeed m;
    m.threads = omp_get_max_threads();
    m.gemm_size = gemms.size();
    m.gemm_repeats = repeats;
    m.openblas = gemms.openblas();
    // Each after an untimed warm-up (page in, spin up threads); the best run.
    // OpenBLAS first: its spinning threads (PeakGemms::run) are asleep after
    // the settle, before Eigen's warm-up.
    const auto best_of = [&](GemmSource s) {
        gemms.run(s);
        double best = 0;
        for (int r = 0; r < repeats; ++r) best = std::max(best, gemms.run(s, r + 1 == repeats));
        return best;
    };
    if (gemms.has(GemmSource::openblas)) m.openblas_gemm_gflops = best_of(GemmSource::openblas);
    m.eigen_gemm_gflops = best_of(GemmSource::eigen);
    m.engine_gemm_gflops = best_of(GemmSource::engine);
    m.gemm_gflops = std::max({m.eigen_gemm_gflops, m.openblas_gemm_gflops, m.engine_gemm_gflops});
    // 256 MiB source: far larger than any cache level. The bandwidths are
    // measured in the memory the engine keeps its weights and cache in (huge
    // pages where the kernel gives them, core/host_memory.h).
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

WeightSweep::WeightSweep(double bytes)
    : floats_(std::max<std::size_t>(std::size_t(bytes / sizeof(float)), 1)),
      w_(floats_),
      sums_(static_cast<std::size_t>(cpu_threads() * kTasksPerThread)) {
    for (std::size_t i = 0; i < floats_; ++i) w_[i] = 1.0f + float(i % 7) * 0x1p-8f;
    sweep();  // warm-up: page in, and into whatever cache holds it
}

void WeightSweep::sweep() {
    using namespace Eigen::internal;
    using Packet = packet_traits<float>::type;
    constexpr int kLanes = packet_traits<float>::size;
    const int threads = cpu_threads();
    const int tasks = static_cast<int>(sums_.size());  // dynamic: a late thread delays one piece
    run_cpu_tasks(threads, tasks, [&](int t) {
        const std::size_t lo = floats_ * std::size_t(t) / tasks;
        const std::size_t hi = floats_ * std::size_t(t + 1) / tasks;
        // Four independent multiply-add chains, as a decode GEMV keeps.
        const Packet x = pset1<Packet>(0.5f);
        Packet a0 = pset1<Packet>(0.0f), a1 = a0, a2 = a0, a3 = a0;
        std::size_t i = lo;
        for (; i + 4 * kLanes <= hi; i += 4 * kLanes) {
            a0 = pmadd(ploadu<Packet>(&w_[i]), x, a0);
            a1 = pmadd(ploadu<Packet>(&w_[i + kLanes]), x, a1);
            a2 = pmadd(ploadu<Packet>(&w_[i + 2 * kLanes]), x, a2);
            a3 = pmadd(ploadu<Packet>(&w_[i + 3 * kLanes]), x, a3);
        }
        float s = predux(padd(padd(a0, a1), padd(a2, a3)));
        for (; i < hi; ++i) s += w_[i] * 0.5f;
        sums_[std::size_t(t)] = s;
    });
    PLAB_ASSERT(sums_[0] > 0);  // the sweep was really taken
}

double WeightSweep::seconds() {
    const auto t0 = std::chrono::steady_clock::now();
    sweep();
    return seconds_since(t0);
}

GemmSource peak_gemm_source(const MachineSpeed& m) {
    // Ties go to the first: Eigen, OpenBLAS, the engine.
    if (m.eigen_gemm_gflops >= std::max(m.openblas_gemm_gflops, m.engine_gemm_gflops))
        return GemmSource::eigen;
    return m.openblas_gemm_gflops >= m.engine_gemm_gflops ? GemmSource::openblas
                                                          : GemmSource::engine;
}

std::string gemm_source_name(GemmSource s) {
    switch (s) {
        case GemmSource::eigen:
            return "Eigen GEMM";
        case GemmSource::openblas:
            return "OpenBLAS GEMM";
        case GemmSource::engine:
            return "engine GEMM, cpu_gemm";
    }
    PLAB_ASSERT(false);
    return "";
}

std::string peak_source(const MachineSpeed& m) {
    return gemm_source_name(peak_gemm_source(m));
}

}  // namespace plab
