#include "runtime/registry.h"

#include <cstdlib>
#include <sstream>

#include "backends/cpu_fast/cpu_fast.h"
#include "backends/cpu_ref.h"
#include "core/error.h"
#include "gpu_backend.h"
#include "runtime/measure_device_peak.h"

namespace plab {

namespace {

// The one CUDA-vs-no-CUDA decision of the program: a CUDA device present →
// the native kernels; no device, a CUDA error (no driver, or one too old), or
// a build without nvcc → the same kernels emulated on the CPU (kernels/simt).
// The backend's name says which ran; gpu_form_description says why.
NativeProbe native_probe() {
#if PLAB_HAVE_CUDA
    return gpu_native::probe();
#else
    return NativeProbe{};  // built_without_cuda
#endif
}

// Why the GPU backends are not native, in words that name the fix.
std::string emulation_reason(const NativeProbe& p) {
    switch (p.status) {
        case NativeProbe::Status::no_device:
            return "built with CUDA, but no CUDA device found";
        case NativeProbe::Status::cuda_error:
            return "built with CUDA, but the CUDA driver could not be used: " + p.error;
        case NativeProbe::Status::built_without_cuda:
            return "built without nvcc (configure with -DPLAB_CUDA=ON where nvcc exists)";
        case NativeProbe::Status::found:
            break;
    }
    return "";
}

// PLAB_REQUIRE_NATIVE=1: a device run must never pass silently in emulation.
bool native_required() {
    const char* v = std::getenv("PLAB_REQUIRE_NATIVE");
    return v != nullptr && std::string(v) == "1";
}

std::unique_ptr<Backend> make_gpu(GpuVariant variant) {
#ifdef __EMSCRIPTEN__
    (void)variant;
    PLAB_CHECK(false,
               "the GPU backends are not in the web build (viewer/web/README.md); "
               "valid backends: cpu-ref, cpu");
    return nullptr;
#else
    require_native_gpu_if_asked();
#if PLAB_HAVE_CUDA
    if (native_probe().status == NativeProbe::Status::found) {
        return gpu_native::make_gpu_backend(variant);
    }
#endif
    return gpu_emulated::make_gpu_backend(variant);
#endif
}

}  // namespace

std::span<const BackendEntry> backend_table() {
    // clang-format off
    static const BackendEntry kBackends[] = {
        {"cpu-ref", "the CPU reference: plain loops, one fixed order of the adds", true, true,
         [](Kernels) -> std::unique_ptr<Backend> { return std::make_unique<CpuRefBackend>(); }},
        {"cpu", "the fast CPU backend: packed GEMMs, tiled attention, threads", false, true,
         [](Kernels k) -> std::unique_ptr<Backend> { return std::make_unique<CpuFastBackend>(k); }},
        {"gpu-ref", "the GPU reference kernels: cpu-ref's order of the adds, in CUDA", true, false,
         [](Kernels) { return make_gpu(GpuVariant::reference); }},
        {"gpu", "the fast GPU kernels: tiled GEMMs, flash attention, CUDA graphs", false, false,
         [](Kernels) { return make_gpu(GpuVariant::fast); }},
    };
    // clang-format on
    return kBackends;
}

std::vector<std::string> backend_names() {
    std::vector<std::string> names;
    for (const BackendEntry& b : backend_table()) {
#ifdef __EMSCRIPTEN__
        // The web build (viewer/web): no CUDA, and the SIMT emulator's fibers need
        // ucontext, which WebAssembly lacks. make_backend refuses gpu-ref and gpu.
        if (!b.in_web_build) continue;
#endif
        names.push_back(b.name);
    }
    return names;
}

std::string gpu_form_description() {
    const NativeProbe p = native_probe();
#if PLAB_HAVE_CUDA
    if (p.status == NativeProbe::Status::found)
        return "native CUDA on " + gpu_native::device_name();
#endif
    return "emulated on the CPU (" + emulation_reason(p) + ")";
}

DeviceGemmPeak measure_device_gemm_peak(int size, int repeats) {
    const NativeProbe p = native_probe();
#if PLAB_HAVE_CUDA
    if (p.status == NativeProbe::Status::found)
        return gpu_native::measure_cublas_sgemm(size, repeats);
#else
    (void)size;
    (void)repeats;
#endif
    DeviceGemmPeak none;
    none.why_not = "the GPU backends run emulated here: " + emulation_reason(p);
    return none;
}

void require_native_gpu_if_asked() {
    if (!native_required()) return;
    const NativeProbe p = native_probe();
    PLAB_CHECK(p.status == NativeProbe::Status::found,
               "PLAB_REQUIRE_NATIVE=1, but the GPU backends would run emulated: "
                   << emulation_reason(p) << "; unset PLAB_REQUIRE_NATIVE to allow emulation");
}

std::unique_ptr<Backend> make_backend(const std::string& name, Kernels kernels) {
    for (const BackendEntry& b : backend_table()) {
        if (name != b.name) continue;
        // Only the fast CPU backend has a second kernel set (core/kernel_choice.h).
        PLAB_CHECK(kernels == Kernels::invariant || name == "cpu",
                   "--kernels fastest is a choice of the cpu backend; "
                       << name
                       << (b.reference ? " has one order of the adds by design (a reference)"
                                       : " has invariant kernels only")
                       << ": give --backend cpu, or leave --kernels out");
        return b.make(kernels);
    }
    std::ostringstream valid;
    for (const auto& n : backend_names()) valid << (valid.tellp() > 0 ? ", " : "") << n;
    PLAB_CHECK(false, "unknown backend '" << name << "'; valid backends: " << valid.str());
    return nullptr;
}

}  // namespace plab
