// The native half of kernels/simt/simt.h: the one knob of PLAB_LAUNCH.
//
// PLAB_CUDA_SYNC=1 makes every launch wait for its kernel, so an error that
// happens while a kernel runs (an illegal address, say) is reported with that
// kernel's name instead of at the next cudaMemcpy. Off by default: it costs speed.
#include <cstdlib>
#include <cstring>

#include "simt/simt.h"

namespace plab::simt {

bool sync_after_launch() {
    static const bool enabled = [] {
        const char* v = std::getenv("PLAB_CUDA_SYNC");
        return v != nullptr && std::strcmp(v, "0") != 0 && v[0] != '\0';
    }();
    return enabled;
}

}  // namespace plab::simt
