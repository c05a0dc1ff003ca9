// Helpers of the GPU tests: which forms of a GPU backend this machine can run.
#pragma once

#include <memory>
#include <vector>

#include "core/backend.h"
#include "gpu_backend.h"

namespace plab::test {

// The emulated form always; the native form too when a CUDA device is present.
// Throws plab::Error naming why (no device, CUDA error, built without CUDA)
// when PLAB_REQUIRE_NATIVE=1 is set and there is no native form.
std::vector<std::unique_ptr<Backend>> gpu_backend_forms(GpuVariant variant);

// The head dims the gpu backend's flash attention is compiled for
// (kFlashHeadDims, kernels/kernels.h), and the smallest of them >= dh: test
// models run on `gpu` with it, while gpu-ref keeps any Dh (odd ones included).
std::vector<int> flash_head_dims();
int flash_head_dim_at_least(int dh);

}  // namespace plab::test
