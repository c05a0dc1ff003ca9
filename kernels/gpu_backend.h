// The GPU backends: gpu-ref (bitwise = cpu-ref) and gpu (fast kernels).
//
// What it teaches: one Backend implementation (gpu_backend.cu) compiled two
// ways. nvcc makes plab::gpu_native, which runs on a CUDA device; g++ makes
// plab::gpu_emulated, which runs the very same kernel sources on the CPU
// through kernels/simt. Which one a user gets is decided in one place,
// src/runtime/registry.cpp: a CUDA device present → native; otherwise, or
// when the build had no nvcc (PLAB_HAVE_CUDA == 0) → emulated. Every name the
// backends print says which form ran: "gpu-ref (native)", "gpu (emulated)".
// Why it is emulated is never guessed: NativeProbe keeps "no device", "the
// driver refused" and "built without CUDA" apart, because on a host whose
// driver is too old for the runtime every native test would otherwise pass
// silently in emulation.
// Host-only header: g++ and nvcc both include it.
#pragma once

#include <memory>
#include <string>

#include "core/backend.h"
#include "core/device_peak.h"

namespace plab {

enum class GpuVariant {
    reference,  // "gpu-ref": core/*.h spec functions in cpu-ref's order, no FMA
    fast,       // "gpu": tiled GEMM, FlashAttention-style online softmax
};

// What asking the CUDA runtime for devices found. The registry fills in
// built_without_cuda itself: without nvcc there is no runtime to ask.
struct NativeProbe {
    enum class Status {
        found,               // devices > 0: the native kernels run
        no_device,           // the runtime and driver work, but see no CUDA device
        cuda_error,          // cudaGetDeviceCount failed: e.g. no driver or one too old
        built_without_cuda,  // this build has no nvcc (PLAB_HAVE_CUDA == 0)
    };
    Status status = Status::built_without_cuda;
    int devices = 0;
    // For cuda_error: "cudaErrorInsufficientDriver (35): CUDA driver version is
    // insufficient for CUDA runtime version", the runtime's own words.
    std::string error;
};

namespace gpu_native {
// cuBLAS is loaded at run time (dlopen), as perf/blas_gemm.h loads OpenBLAS:
// `plab` starts, and its native kernels run, on a machine whose CUDA has no
// cuBLAS or keeps it off the loader's path; then only this figure is missing.
// size is lowered (halved) until three size^2 matrices fit in free device
// memory. Never throws: a CUDA or cuBLAS error is returned in why_not.
DeviceGemmPeak measure_cublas_sgemm(int size, int repeats);
// Asks cudaGetDeviceCount once per call; never throws.
NativeProbe probe();
// CUDA devices visible to this process; 0 when probe() is not `found`.
int device_count();
// "NVIDIA H200 (sm_90)" for device 0, "" without one.
std::string device_name();
std::unique_ptr<Backend> make_gpu_backend(GpuVariant variant);
}  // namespace gpu_native

namespace gpu_emulated {
std::unique_ptr<Backend> make_gpu_backend(GpuVariant variant);
}  // namespace gpu_emulated

}  // namespace plab
