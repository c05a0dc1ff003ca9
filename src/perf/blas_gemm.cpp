#include "perf/blas_gemm.h"

#include <dlfcn.h>

#include <memory>

namespace plab {
namespace {

// CBLAS's enum values (cblas.h): the ABI, fixed by the standard.
constexpr int kRowMajor = 101, kNoTrans = 111;

}  // namespace

const BlasGemm* BlasGemm::openblas(std::string* why_not) {
    struct Loaded {
        std::unique_ptr<BlasGemm> blas;
        std::string error;
    };
    static const Loaded loaded = [] {
        Loaded l;
        // The SONAME of Debian's OpenBLAS (32-bit integers), whichever of its
        // thread variants the alternatives system points at. Never unloaded:
        // OpenBLAS's worker threads live as long as the process.
        void* h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
        if (h == nullptr) {
            l.error = "OpenBLAS not installed (Debian package libopenblas0-pthread)";
            return l;
        }
        auto blas = std::unique_ptr<BlasGemm>(new BlasGemm());
        blas->sgemm_ = reinterpret_cast<Sgemm>(dlsym(h, "cblas_sgemm"));
        blas->set_threads_ = reinterpret_cast<SetThreads>(dlsym(h, "openblas_set_num_threads"));
        using Config = const char* (*)();
        const auto config = reinterpret_cast<Config>(dlsym(h, "openblas_get_config"));
        if (blas->sgemm_ == nullptr || blas->set_threads_ == nullptr || config == nullptr) {
            l.error =
                "libopenblas.so.0 lacks cblas_sgemm, openblas_set_num_threads or "
                "openblas_get_config";
            return l;
        }
        blas->name_ = config();
        l.blas = std::move(blas);
        return l;
    }();
    if (why_not != nullptr) *why_not = loaded.error;
    return loaded.blas.get();
}

void BlasGemm::sgemm(int m, int n, int k, const float* a, const float* b, float* c,
                     int threads) const {
    set_threads_(threads);
    sgemm_(kRowMajor, kNoTrans, kNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}

}  // namespace plab
