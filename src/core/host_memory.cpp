#include "core/host_memory.h"

#include <algorithm>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace plab {

std::size_t host_alignment(std::size_t bytes) {
    return bytes >= kHugePageBytes ? kHugePageBytes : 64;
}

void* host_allocate(std::size_t bytes) {
    bytes = std::max<std::size_t>(bytes, 1);
    void* p = ::operator new(bytes, std::align_val_t(host_alignment(bytes)));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (bytes >= kHugePageBytes) {
        // Asked before the first touch, so the pages fault in as huge ones.
        // A refusal (no THP in this kernel) leaves ordinary pages: ignored.
        constexpr std::size_t kPage = 4096;
        (void)madvise(p, (bytes + kPage - 1) / kPage * kPage, MADV_HUGEPAGE);
    }
#endif
    return p;
}

void host_deallocate(void* p, std::size_t bytes) noexcept {
    if (p == nullptr) return;
    bytes = std::max<std::size_t>(bytes, 1);
    ::operator delete(p, std::align_val_t(host_alignment(bytes)));
}

}  // namespace plab
