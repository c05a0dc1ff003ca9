#include "gpu_test_util.h"

#include <algorithm>

#include "core/error.h"
#include "kernels.h"
#include "runtime/registry.h"

namespace plab::test {

std::vector<std::unique_ptr<Backend>> gpu_backend_forms(GpuVariant variant) {
    // PLAB_REQUIRE_NATIVE=1 (kernels/device-check.sh): no device means the
    // test fails with the reason, instead of passing on the emulated form alone.
    require_native_gpu_if_asked();
    std::vector<std::unique_ptr<Backend>> forms;
    forms.push_back(gpu_emulated::make_gpu_backend(variant));
#if PLAB_HAVE_CUDA
    if (gpu_native::probe().status == NativeProbe::Status::found)
        forms.push_back(gpu_native::make_gpu_backend(variant));
#endif
    return forms;
}

std::vector<int> flash_head_dims() {
    return {std::begin(gpu_emulated::kFlashHeadDims), std::end(gpu_emulated::kFlashHeadDims)};
}

int flash_head_dim_at_least(int dh) {
    const std::vector<int> dims = flash_head_dims();
    const auto it = std::lower_bound(dims.begin(), dims.end(), dh);
    PLAB_ASSERT(it != dims.end());
    return *it;
}

}  // namespace plab::test
