#include "backends/host_buffers.h"

namespace plab {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kKeepBuffers = true;  // ASan must see each delete (host_buffers.h)
#else
constexpr bool kKeepBuffers = true;
#endif

HostBufferCache::~HostBufferCache() {
    for (const Kept& k : kept_) delete[] k.data;
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
    return new float[n];
}

void HostBufferCache::give_back(float* data, std::size_t n) noexcept {
    if (data == nullptr) return;
    n = n > 0 ? n : 1;
    const std::size_t bytes = n * sizeof(float);
    if (!kKeepBuffers || bytes > max_bytes_) {
        delete[] data;
        return;
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        try {
            kept_.push_back({n, data});
        } catch (...) {  // no memory to remember it: give it back instead
            delete[] data;
            return;
        }
        cached_bytes_ += bytes;
        std::size_t drop = 0;
        while (cached_bytes_ > max_bytes_) {
            cached_bytes_ -= kept_[drop].n * sizeof(float);
            delete[] kept_[drop].data;
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
