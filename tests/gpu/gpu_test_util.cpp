#include "gpu_test_util.h"

namespace plab::test {

std::vector<std::unique_ptr<Backend>> gpu_backend_forms(GpuVariant variant) {
    std::vector<std::unique_ptr<Backend>> forms;
    forms.push_back(gpu_emulated::make_gpu_backend(variant));
#if PLAB_HAVE_CUDA
    if (gpu_native::device_count() > 0) forms.push_back(gpu_native::make_gpu_backend(variant));
#endif
    return forms;
}

}  // namespace plab::test
