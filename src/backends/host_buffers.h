// Host memory for the cpu backends: released buffers are kept and handed out
// again, instead of going back to the operating system.
//
// What it teaches: a prefill allocates its activations (the residual stream,
// Q/K/V, the SwiGLU hidden states) and a fresh session its KV pool; freed and
// allocated again, large blocks come back from the OS as new pages, and every
// first touch of a page is a page fault. On the project's 2-vCPU VM a
// 1024-token prefill of the stories15M shape faulted ~9,200 pages (36 MB), and
// the fault time (hundreds of ms under load) made prefill speed dip at some
// lengths and swing between runs. Engines keep their memory for the same
// reason: PyTorch's CUDA caching allocator, vLLM's KV pool allocated once at
// start-up. Here: an exact-size free list, most recently released first.
// Left out: splitting or merging blocks (sizes repeat from one prefill to the
// next, so exact sizes suffice), and caching under AddressSanitizer, which must
// see every release to find a use after it.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

namespace plab {

class HostBufferCache {
public:
    // At most this many bytes are kept; beyond it the oldest go back to the OS.
    explicit HostBufferCache(std::size_t max_cached_bytes = std::size_t(512) << 20)
        : max_bytes_(max_cached_bytes) {}
    ~HostBufferCache();
    HostBufferCache(const HostBufferCache&) = delete;
    HostBufferCache& operator=(const HostBufferCache&) = delete;

    // n floats (at least one), not initialised: a kept buffer of exactly n
    // floats when there is one, else new memory.
    float* take(std::size_t n);
    // Keeps the buffer for the next take(n) of the same size.
    void give_back(float* data, std::size_t n) noexcept;

    struct Stats {
        long long reused = 0;     // takes served from the cache
        long long allocated = 0;  // takes that asked the OS
        std::size_t cached_bytes = 0;
    };
    Stats stats() const;

private:
    struct Kept {
        std::size_t n;
        float* data;
    };
    mutable std::mutex mutex_;  // sessions on one backend may run in several threads
    std::vector<Kept> kept_;    // oldest first
    std::size_t cached_bytes_ = 0;
    std::size_t max_bytes_;
    Stats stats_;
};

}  // namespace plab
