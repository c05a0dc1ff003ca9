// DeviceGemmPeak: what `plab bench` measured of the device the GPU backends
// run on — a plain record, so that the registry (which measures it) and perf
// (which prints it) share it without either naming the kernels.
#pragma once

#include <cstddef>
#include <string>

namespace plab {

// The device's float32 GEMM rate: the GPU rows' "peak" in `plab bench`,
// as the host's fastest GEMM is the CPU rows'. Measured, never
// looked up in a datasheet: cuBLAS's SGEMM of size^3 on device 0, best of a
// few calls timed with CUDA events.
struct DeviceGemmPeak {
    double gflops = 0;    // 0: not measured, and why_not says why
    int size = 0;         // n of the n^3 product actually timed
    std::string source;   // e.g. "cuBLAS 130100 SGEMM (float32, CUBLAS_DEFAULT_MATH: no TF32)"
    std::string device;   // e.g. "NVIDIA H200 (sm_90)"
    std::string why_not;  // e.g. "the GPU backends run emulated here (...)"
    // The device's copy bandwidth (device to device cudaMemcpy, bytes read +
    // written per second, as the host's "copy bandwidth"), measured alongside
    // on the same buffers: the gpu rows' decode bound. 0: not measured.
    double copy_gb_per_s = 0;
    std::size_t copy_bytes = 0;  // bytes of one timed copy
};

}  // namespace plab
