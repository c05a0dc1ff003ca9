// The GPU backends: gpu-ref (bitwise = cpu-ref) and gpu (fast kernels).
//
// What it teaches: one Backend implementation (gpu_backend.cu) compiled two
// ways. nvcc makes plab::gpu_native, which runs on a CUDA device; g++ makes
// plab::gpu_emulated, which runs the very same kernel sources on the CPU
// through kernels/simt. Which one a user gets is decided in one place,
// src/backends/registry.cpp: a CUDA device present → native; otherwise, or
// when the build had no nvcc (PLAB_HAVE_CUDA == 0) → emulated. Every name the
// backends print says which form ran: "gpu-ref (native)", "gpu (emulated)".
// Host-only header: g++ and nvcc both include it.
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"

namespace plab {

enum class GpuVariant {
    reference,  // "gpu-ref": one thread per output, core/*.h spec functions, no FMA
    fast,       // "gpu": tiled GEMM, FlashAttention-style online softmax
};

namespace gpu_native {
// CUDA devices visible to this process; 0 when there is no driver or device.
int device_count();
// "NVIDIA H200 (sm_90)" for device 0, "" without one.
std::string device_name();
std::unique_ptr<Backend> make_gpu_backend(GpuVariant variant);
}  // namespace gpu_native

namespace gpu_emulated {
std::unique_ptr<Backend> make_gpu_backend(GpuVariant variant);
}  // namespace gpu_emulated

}  // namespace plab
