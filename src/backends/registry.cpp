#include "backends/registry.h"

#include <sstream>

#include "backends/cpu_fast.h"
#include "backends/cpu_ref.h"
#include "core/error.h"
#include "gpu_backend.h"

namespace plab {

namespace {

// The one CUDA-vs-no-CUDA decision of the program: a CUDA device present →
// the native kernels; no device, or a build without nvcc → the same kernels
// emulated on the CPU (kernels/simt). The backend's name says which ran.
[[maybe_unused]] bool gpu_is_native() {
#if PLAB_HAVE_CUDA
    return gpu_native::device_count() > 0;
#else
    return false;
#endif
}

std::unique_ptr<Backend> make_gpu(GpuVariant variant) {
#if PLAB_HAVE_CUDA
    if (gpu_is_native()) return gpu_native::make_gpu_backend(variant);
#endif
    return gpu_emulated::make_gpu_backend(variant);
}

}  // namespace

std::vector<std::string> backend_names() {
    return {"cpu-ref", "cpu", "gpu-ref", "gpu"};
}

std::string gpu_form_description() {
#if PLAB_HAVE_CUDA
    if (gpu_is_native()) return "native CUDA on " + gpu_native::device_name();
    return "emulated on the CPU (built with CUDA, but no CUDA device found)";
#else
    return "emulated on the CPU (built without nvcc)";
#endif
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
    if (name == "cpu-ref") return std::make_unique<CpuRefBackend>();
    if (name == "cpu") return std::make_unique<CpuFastBackend>();
    if (name == "gpu-ref") return make_gpu(GpuVariant::reference);
    if (name == "gpu") return make_gpu(GpuVariant::fast);
    std::ostringstream valid;
    for (const auto& n : backend_names()) valid << (valid.tellp() > 0 ? ", " : "") << n;
    PLAB_CHECK(false, "unknown backend '" << name << "'; valid backends: " << valid.str());
    return nullptr;
}

}  // namespace plab
