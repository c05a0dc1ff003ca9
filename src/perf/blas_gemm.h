// The machine's BLAS, for `plab bench`'s GEMM peak: Debian's OpenBLAS,
// loaded at run time when it is installed (package libopenblas0-pthread, in
// .ci/debian-packages.txt).
//
// What it teaches: "of peak" is only as honest as the peak. The lab defines
// it as the fastest float32 GEMM available on the machine, measured in the
// same run; a GEMM written for this engine (cpu_gemm.h) and Eigen's are two
// candidates, and a tuned BLAS, with kernels and cache blocking chosen per
// CPU model, is the third an inference engineer would try first. On an AVX2
// EPYC (Zen 3, 2 vCPUs) OpenBLAS ran a 2048³ product at 132-163 GFLOP/s
// against the engine's 66-128: without it, "of peak" there was measured
// against a peak up to a third too low. (The engine's own then reached
// 116-146 after a fix to its AVX2 inner loop, cpu_gemm.cpp.)
//
// The engine itself does not call it: a BLAS picks its blocking and its
// order of adds from the shape of the call, so a token's projection would
// round differently in a chunk of 5 than in a chunk of 10 (lesson 15; the cpu
// backend's GEMM keeps one FMA chain per output for that reason).
//
// Loaded with dlopen, by the bench only: a process that never measures the
// machine starts no OpenBLAS threads.
#pragma once

#include <string>

namespace plab {

class BlasGemm {
public:
    // The installed OpenBLAS, or nullptr (why_not, if given, says why). Loaded
    // once per process; later calls return the same object.
    static const BlasGemm* openblas(std::string* why_not = nullptr);

    // Its build as it reports it (openblas_get_config), e.g. "OpenBLAS 0.3.21
    // NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64": the kernels it
    // chose for this CPU (Zen) are part of the figure.
    const std::string& name() const { return name_; }

    // C = A · B, all row-major: A (m, k), B (k, n), C (m, n), on `threads` threads.
    void sgemm(int m, int n, int k, const float* a, const float* b, float* c, int threads) const;

private:
    using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                           int, float, float*, int);
    using SetThreads = void (*)(int);
    BlasGemm() = default;
    std::string name_;
    Sgemm sgemm_ = nullptr;
    SetThreads set_threads_ = nullptr;
};

}  // namespace plab
