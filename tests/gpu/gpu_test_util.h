// Helpers of the GPU tests: which forms of a GPU backend this machine can run.
#pragma once

#include <memory>
#include <vector>

#include "backends/backend.h"
#include "gpu_backend.h"

namespace plab::test {

// The emulated form always; the native form too when a CUDA device is present.
// Throws plab::Error naming why (no device, CUDA error, built without CUDA)
// when PLAB_REQUIRE_NATIVE=1 is set and there is no native form.
std::vector<std::unique_ptr<Backend>> gpu_backend_forms(GpuVariant variant);

}  // namespace plab::test
