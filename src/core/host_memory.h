// Host memory for the cpu backends' large arrays, in 2 MiB pages where the
// kernel gives them.
//
// What it teaches: every load goes through a translation from virtual to
// physical address, cached in the TLB. Streaming a model's weights (tens of
// MB per decode step) or a batch's KV cache in 4 KiB pages needs a new
// translation every 4 KiB — in a virtual machine each miss walks two page
// tables — and the hardware prefetchers stop at every page edge. In 2 MiB
// pages ("transparent huge pages", asked for with madvise(MADV_HUGEPAGE))
// one translation covers 512 times as much. llama.cpp and PyTorch's CPU
// allocator ask for them for the same reason. Measured here (stories15M,
// weights and cache in huge pages vs not, interleaved): a decode step's
// layer products 20-30% faster, the step ~10%; a 64-sequence step's
// attention 5-8%; prefill's products (compute, each weight read once) no
// change.
//
// An array of at least kHugePageBytes starts on a 2 MiB edge and is asked
// for in huge pages; a smaller one is 64-byte aligned (a cache line). Where
// the kernel has no huge pages to give (THP off, memory fragmented) the
// memory is ordinary pages: same values, same bits, only slower.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace plab {

constexpr std::size_t kHugePageBytes = std::size_t(2) << 20;

// `bytes` (at least 1) of uninitialised memory, aligned as above.
void* host_allocate(std::size_t bytes);
// Gives back what host_allocate(bytes) returned.
void host_deallocate(void* p, std::size_t bytes) noexcept;
// The alignment host_allocate gives an array of this many bytes.
std::size_t host_alignment(std::size_t bytes);

// A std::allocator that takes its memory from host_allocate: a
// std::vector<float, HostAllocator<float>> of a weight's panels lives in
// huge pages.
template <class T>
struct HostAllocator {
    using value_type = T;
    HostAllocator() = default;
    template <class U>
    HostAllocator(const HostAllocator<U>&) noexcept {}
    T* allocate(std::size_t n) {
        if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
        return static_cast<T*>(host_allocate(n * sizeof(T)));
    }
    void deallocate(T* p, std::size_t n) noexcept { host_deallocate(p, n * sizeof(T)); }
    template <class U>
    bool operator==(const HostAllocator<U>&) const noexcept {
        return true;
    }
};

using HostVector = std::vector<float, HostAllocator<float>>;

}  // namespace plab
