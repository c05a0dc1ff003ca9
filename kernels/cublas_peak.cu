// The device's float32 GEMM peak: cuBLAS's SGEMM, timed with CUDA events
// (gpu_backend.h, DeviceGemmPeak), and its copy bandwidth (a device to device
// cudaMemcpy of one of the same buffers, the gpu rows' decode bound). Native
// builds only.
//
// What it teaches: a fraction of peak needs a peak measured on the same
// device in the same run, by the fastest GEMM available there (the CPU
// rows' rule, applied to the GPU rows). cuBLAS is that GEMM on an
// NVIDIA device. Its math mode is CUBLAS_DEFAULT_MATH, which keeps SGEMM in
// float32 FMAs: TF32 tensor cores (CUBLAS_TF32_TENSOR_OP_MATH) would be a
// different, lower-precision product than the one `gpu` computes.
//
// Loaded with dlopen, never linked: the static CUDA runtime lets `plab` start
// without libcudart, and cuBLAS (hundreds of MB, its own SONAME per CUDA
// major) must not become a start-up dependency either. The function types
// come from cublas_v2.h (decltype), so the signatures are cuBLAS's own.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <string>
#include <vector>

#include "gpu_backend.h"

namespace plab::gpu_native {
namespace {

struct Cublas {
    decltype(&cublasCreate_v2) create = nullptr;
    decltype(&cublasDestroy_v2) destroy = nullptr;
    decltype(&cublasSetMathMode) set_math_mode = nullptr;
    decltype(&cublasGetVersion_v2) get_version = nullptr;
    decltype(&cublasSgemm_v2) sgemm = nullptr;
};

// The SONAMEs of the CUDA majors this build may meet, first by the loader's
// path, then where the CUDA installer puts them.
bool load_cublas(Cublas& c, std::string& why_not) {
    const char* sonames[] = {"libcublas.so.13", "libcublas.so.12"};
    std::vector<std::string> names(std::begin(sonames), std::end(sonames));
    names.push_back("libcublas.so");
    const char* dirs[] = {std::getenv("CUDA_HOME"), "/usr/local/cuda"};
    for (const char* dir : dirs) {
        if (dir == nullptr) continue;
        for (const char* so : sonames) names.push_back(std::string(dir) + "/lib64/" + so);
    }
    void* h = nullptr;
    std::string first_error;
    for (const std::string& n : names) {
        h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (h != nullptr) break;
        if (first_error.empty()) first_error = dlerror();
    }
    if (h == nullptr) {
        why_not = "cuBLAS not found (" + first_error + ")";
        return false;
    }
    c.create = reinterpret_cast<decltype(c.create)>(dlsym(h, "cublasCreate_v2"));
    c.destroy = reinterpret_cast<decltype(c.destroy)>(dlsym(h, "cublasDestroy_v2"));
    c.set_math_mode = reinterpret_cast<decltype(c.set_math_mode)>(dlsym(h, "cublasSetMathMode"));
    c.get_version = reinterpret_cast<decltype(c.get_version)>(dlsym(h, "cublasGetVersion_v2"));
    c.sgemm = reinterpret_cast<decltype(c.sgemm)>(dlsym(h, "cublasSgemm_v2"));
    if (!c.create || !c.destroy || !c.set_math_mode || !c.get_version || !c.sgemm) {
        why_not = "the cuBLAS found lacks cublasCreate_v2, cublasSgemm_v2 or cublasSetMathMode";
        return false;
    }
    return true;
}

// Values in [-1, 1) from a hash of the index: fixed, never all zeros (a
// product of zeros could run faster than real data on some hardware).
__global__ void fill_pattern(float* x, std::size_t n, unsigned seed) {
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
         i += std::size_t(gridDim.x) * blockDim.x) {
        unsigned h = unsigned(i) * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        x[i] = float(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
    }
}

std::string cuda_error(const char* what, cudaError_t e) {
    return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

// What one measurement holds on the device, released on every way out.
struct Resources {
    const Cublas& cublas;
    float* buf[3] = {nullptr, nullptr, nullptr};
    cublasHandle_t handle = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    explicit Resources(const Cublas& c) : cublas(c) {}
    Resources(const Resources&) = delete;
    Resources& operator=(const Resources&) = delete;
    ~Resources() {
        if (start) cudaEventDestroy(start);
        if (stop) cudaEventDestroy(stop);
        if (handle) cublas.destroy(handle);
        for (float* b : buf)
            if (b) cudaFree(b);
    }
};

}  // namespace

DeviceGemmPeak measure_cublas_sgemm(int size, int repeats) {
    DeviceGemmPeak p;
    try {
        p.device = device_name();  // PLAB_CUDA_CHECK inside: a CUDA error throws
    } catch (const std::exception& e) {
        p.why_not = e.what();
        return p;
    }
    if (p.device.empty()) {
        p.why_not = "no CUDA device";
        return p;
    }
    Cublas c;
    std::size_t free_bytes = 0, total_bytes = 0;
    cudaError_t e = cudaMemGetInfo(&free_bytes, &total_bytes);
    if (e != cudaSuccess) {
        p.why_not = cuda_error("cudaMemGetInfo", e);
        return p;
    }
    int n = std::max(256, size);
    // Three n x n matrices in at most half of the free memory.
    while (n > 256 && 3.0 * n * n * sizeof(float) > 0.5 * double(free_bytes)) n /= 2;
    const std::size_t elems = std::size_t(n) * n;
    Resources res(c);
    for (float*& b : res.buf) {
        if ((e = cudaMalloc(&b, elems * sizeof(float))) != cudaSuccess) {
            p.why_not = cuda_error("cudaMalloc", e);
            return p;
        }
    }
    fill_pattern<<<1024, 256>>>(res.buf[0], elems, 1u);
    fill_pattern<<<1024, 256>>>(res.buf[1], elems, 2u);
    cudaEventCreate(&res.start);
    cudaEventCreate(&res.stop);
    // The copy bandwidth first, on the same buffers (it needs no cuBLAS):
    // buf[0] -> buf[2], best of the repeats after one untimed copy.
    float best_copy_ms = 0;
    for (int r = 0; r <= std::max(1, repeats); ++r) {
        cudaEventRecord(res.start, 0);
        e = cudaMemcpyAsync(res.buf[2], res.buf[0], elems * sizeof(float), cudaMemcpyDeviceToDevice,
                            0);
        cudaEventRecord(res.stop, 0);
        if (e == cudaSuccess) e = cudaEventSynchronize(res.stop);
        if (e != cudaSuccess) {
            p.why_not = cuda_error("cudaMemcpyAsync (device to device)", e);
            return p;
        }
        float ms = 0;
        cudaEventElapsedTime(&ms, res.start, res.stop);
        if (r > 0 && (best_copy_ms == 0 || ms < best_copy_ms)) best_copy_ms = ms;
    }
    if (best_copy_ms > 0) {
        p.copy_bytes = elems * sizeof(float);
        p.copy_gb_per_s = 2.0 * double(p.copy_bytes) / (best_copy_ms * 1e-3) / 1e9;
    }
    if (!load_cublas(c, p.why_not)) return p;
    if (c.create(&res.handle) != CUBLAS_STATUS_SUCCESS ||
        c.set_math_mode(res.handle, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS) {
        p.why_not = "cublasCreate or cublasSetMathMode failed";
        return p;
    }
    int version = 0;
    c.get_version(res.handle, &version);
    const float one = 1.0f, zero = 0.0f;
    float best_ms = 0;
    // The first call is a warm-up (cuBLAS picks and loads its kernel), untimed.
    for (int r = 0; r <= std::max(1, repeats); ++r) {
        cudaEventRecord(res.start, 0);
        const cublasStatus_t s = c.sgemm(res.handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one,
                                         res.buf[0], n, res.buf[1], n, &zero, res.buf[2], n);
        cudaEventRecord(res.stop, 0);
        if (s != CUBLAS_STATUS_SUCCESS) {
            p.why_not = "cublasSgemm_v2 failed (status " + std::to_string(int(s)) + ")";
            return p;
        }
        if ((e = cudaEventSynchronize(res.stop)) != cudaSuccess) {
            p.why_not = cuda_error("cudaEventSynchronize", e);
            return p;
        }
        float ms = 0;
        cudaEventElapsedTime(&ms, res.start, res.stop);
        if (r > 0 && (best_ms == 0 || ms < best_ms)) best_ms = ms;
    }
    if (best_ms <= 0) {
        p.why_not = "the CUDA events timed 0 ms";
        return p;
    }
    p.size = n;
    p.gflops = 2.0 * n * double(n) * n / (best_ms * 1e-3) / 1e9;
    p.source =
        "cuBLAS " + std::to_string(version) + " SGEMM (float32, CUBLAS_DEFAULT_MATH: no TF32)";
    return p;
}

}  // namespace plab::gpu_native
