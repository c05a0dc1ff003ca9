// The backend registry: the one place that knows which backends exist.
//
// Model and runtime code ask for a backend by name and never test for CUDA
// themselves. The GPU backends come from kernels/ (natively on a CUDA device,
// emulated on the CPU otherwise; see kernels/gpu_backend.h).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/kernel_choice.h"

namespace plab {

// One row per backend: the table make_backend, backend_names and the docs read.
// Adding a backend: its class (src/backends/ or kernels/), its row here, and a
// column in tests/engine/backend_op_rows.h for its tolerance (src/runtime/README.md).
struct BackendEntry {
    const char* name;     // as --backend takes it
    const char* summary;  // one line: what it is
    bool reference;       // promises cpu-ref's bits (Backend::is_reference)
    bool in_web_build;    // the browser page (viewer/web) has no CUDA and no emulator
    std::unique_ptr<Backend> (*make)(Kernels kernels);
};
std::span<const BackendEntry> backend_table();

// Names accepted by make_backend, in the table's order: "cpu-ref", "cpu", then
// the GPU ones (the web build: the CPU ones only).
std::vector<std::string> backend_names();
// Throws plab::Error listing the valid names for an unknown one. `kernels`
// (core/kernel_choice.h): `fastest` only for "cpu" (its name then "cpu-fastest");
// asked of another backend, one plab::Error line.
std::unique_ptr<Backend> make_backend(const std::string& name,
                                      Kernels kernels = Kernels::invariant);
// How "gpu-ref" and "gpu" run here: "native CUDA on NVIDIA H200 (sm_90)" or
// "emulated on the CPU (...why...)", the why one of three: no CUDA device, a
// CUDA error (the runtime's own words, e.g. an insufficient driver), or a
// build without nvcc.
std::string gpu_form_description();

// With PLAB_REQUIRE_NATIVE=1 in the environment, throws plab::Error (one line
// naming why) when the GPU backends would run emulated; otherwise does
// nothing. make_backend("gpu"/"gpu-ref") and the GPU tests call it, so a
// device run cannot pass silently in emulation.
void require_native_gpu_if_asked();

}  // namespace plab
