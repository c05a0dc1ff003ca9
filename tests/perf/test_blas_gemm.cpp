// perf/blas_gemm.h: the OpenBLAS GEMM `plab bench` counts among the
// candidates for the machine's peak (issue 13), and which GEMM the peak names.
// A peak is only a peak of a GEMM that computes the product: OpenBLAS is
// called through dlopen'd symbols and CBLAS enum values, so a wrong layout or
// transpose flag would time a different product at the same speed. Checked
// here against a double-precision product on awkward, non-square sizes with
// fixed-seed random inputs, on one thread and on two.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "perf/blas_gemm.h"
#include "perf/machine.h"

using namespace plab;

TEST_CASE("OpenBLAS, loaded at run time, computes C = A B row-major", "[perf][blas]") {
    std::string why_not;
    const BlasGemm* blas = BlasGemm::openblas(&why_not);
    // .ci/debian-packages.txt installs libopenblas0-pthread: every machine
    // `make test` ran on has it.
    INFO(why_not);
    REQUIRE(blas != nullptr);
    REQUIRE(why_not.empty());
    REQUIRE(blas->name().rfind("OpenBLAS ", 0) == 0);
    REQUIRE(BlasGemm::openblas() == blas);  // loaded once

    std::mt19937 rng(13);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (const auto [m, n, k] :
         {std::array{7, 13, 5}, std::array{1, 33, 70}, std::array{65, 3, 129}}) {
        for (int threads : {1, 2}) {
            std::vector<float> a(std::size_t(m) * k), b(std::size_t(k) * n), c(std::size_t(m) * n);
            for (float& v : a) v = u(rng);
            for (float& v : b) v = u(rng);
            blas->sgemm(m, n, k, a.data(), b.data(), c.data(), threads);
            for (int i = 0; i < m; ++i) {
                for (int j = 0; j < n; ++j) {
                    double want = 0, magnitude = 0;
                    for (int kk = 0; kk < k; ++kk) {
                        const double t =
                            double(a[std::size_t(i) * k + kk]) * b[std::size_t(kk) * n + j];
                        want += t;
                        magnitude += std::abs(t);
                    }
                    // float32 sums of k terms in any order: within k units in
                    // the last place of the terms' magnitude (~6e-8 each).
                    INFO("m " << m << " n " << n << " k " << k << " (" << i << ", " << j << ")");
                    REQUIRE(std::abs(c[std::size_t(i) * n + j] - want) <=
                            k * 6e-8 * magnitude + 1e-30);
                }
            }
        }
    }
}

TEST_CASE("peak_source names the fastest GEMM measured, ties to the first listed", "[perf][blas]") {
    MachineSpeed m;
    m.eigen_gemm_gflops = 90;
    m.openblas_gemm_gflops = 140;
    m.engine_gemm_gflops = 100;
    REQUIRE(peak_source(m) == "OpenBLAS GEMM");
    m.engine_gemm_gflops = 150;
    REQUIRE(peak_source(m) == "engine GEMM, cpu_gemm");
    m.eigen_gemm_gflops = 150;  // a tie: Eigen, listed first
    REQUIRE(peak_source(m) == "Eigen GEMM");
    m = MachineSpeed{};
    m.eigen_gemm_gflops = 90;
    m.engine_gemm_gflops = 80;  // OpenBLAS not measured: 0
    REQUIRE(peak_source(m) == "Eigen GEMM");
}

TEST_CASE("PeakGemms runs each of the peak's GEMMs again, each time the product itself",
          "[perf][blas]") {
    // `plab bench` times the peak's GEMM once more after each paired prefill
    // run (perf/bench.h): the same three products measure_machine times, kept
    // ready. Each run checks C[0][0] against its own double sum (PLAB_ASSERT),
    // so a run that skipped or mis-laid the product would stop here.
    PeakGemms gemms(96, /*with_blas=*/true);
    REQUIRE(gemms.size() == 96);
    REQUIRE(gemms.openblas().rfind("OpenBLAS ", 0) == 0);
    for (GemmSource s : {GemmSource::eigen, GemmSource::openblas, GemmSource::engine}) {
        INFO(gemm_source_name(s));
        REQUIRE(gemms.has(s));
        for (int r = 0; r < 3; ++r) REQUIRE(gemms.run(s) > 0);
    }
    // After OpenBLAS's product, settle waits for its spinning threads (200 ms).
    const auto t0 = std::chrono::steady_clock::now();
    gemms.run(GemmSource::openblas, /*settle=*/true);
    REQUIRE(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(200));
    // Without OpenBLAS asked for, it is not there, and says why.
    const PeakGemms no_blas(64, /*with_blas=*/false);
    REQUIRE_FALSE(no_blas.has(GemmSource::openblas));
    REQUIRE(no_blas.openblas() == "not measured");
    // peak_source is the name of peak_gemm_source.
    MachineSpeed m;
    m.openblas_gemm_gflops = 2;
    REQUIRE(peak_gemm_source(m) == GemmSource::openblas);
    REQUIRE(peak_source(m) == gemm_source_name(GemmSource::openblas));
}
