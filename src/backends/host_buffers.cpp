#include "backends/host_buffers.h"

#include "core/host_memory.h"

namespace plab {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kKeepBuffers = true;  // ASan must see each delete (host_buffers.h)
#else
constexpr bool kKeepBuffers = true;
#endif

namespace {

// The memory itself: 64-byte aligned, a large buffer in huge pages
// (host_memory.h).
float* new_floats(std::size_t n) {
    return static_cast<float*>(host_allocate(n * sizeof(float)));
}
void delete_floats(float* data, std::size_t n) noexcept {
    host_deallocate(data, n * sizeof(float));
}

}  // namespace

HostBufferCache::~HostBufferCache() {
    for (const Kept& k : kept_) delete_floats(k.data, k.n);
}

float* HostBufferCache::take(std::size_t n) {
    n = n > 0 ? n : 1;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (std::size_t i = kept_.size(); i-- > 0;) {  // the most recently released first
            if (kept_[i].n != n) continue;
            float* data = kept_[i].data;
            kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(i));
            cached_bytes_ -= n * sizeof(float);
            ++stats_.reused;
            return data;
        }
        ++stats_.allocated;
    }
    return new_floats(n);
}

void HostBufferCache::give_back(float* data, std::size_t n) noexcept {
    if (data == nullptr) return;
    n = n > 0 ? n : 1;
    const std::size_t bytes = n * sizeof(float);
    if (!kKeepBuffers || bytes > max_bytes_) {
        delete_floats(data, n);
        return;
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        try {
            kept_.push_back({n, data});
        } catch (...) {  // no memory to remember it: give it back instead
            delete_floats(data, n);
            return;
        }
        cached_bytes_ += bytes;
        std::size_t drop = 0;
        while (cached_bytes_ > max_bytes_) {
            cached_bytes_ -= kept_[drop].n * sizeof(float);
            delete_floats(kept_[drop].data, kept_[drop].n);
            ++drop;
        }
        kept_.erase(kept_.begin(), kept_.begin() + static_cast<std::ptrdiff_t>(drop));
    }
}

HostBufferCache::Stats HostBufferCache::stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    Stats s = stats_;
    s.cached_bytes = cached_bytes_;
    return s;
}

}  // namespace plab
