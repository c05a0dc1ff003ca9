// The device's float32 GEMM peak and copy bandwidth, for `plab bench`'s GPU
// rows. Apart from runtime/registry.h, so the engine's includers do not see a
// benchmark: only perf and `plab bench` include this.
#pragma once

#include "core/device_peak.h"

namespace plab {

// cuBLAS's SGEMM of size^3, best of `repeats`, when the GPU backends run
// natively; otherwise not measured (gflops 0), why_not saying why.
// (Implemented in runtime/registry.cpp, which knows how the GPU runs.)
DeviceGemmPeak measure_device_gemm_peak(int size, int repeats);

}  // namespace plab
