#include "core/backend.h"

#include <utility>

namespace plab {

DeviceArray::DeviceArray(Backend& backend, std::size_t n) : backend_(&backend) {
    buf_ = backend.alloc(n);
}

DeviceArray::~DeviceArray() {
    if (backend_ != nullptr) backend_->release(buf_);
}

DeviceArray::DeviceArray(DeviceArray&& other) noexcept
    : backend_(std::exchange(other.backend_, nullptr)), buf_(std::exchange(other.buf_, {})) {}

DeviceArray& DeviceArray::operator=(DeviceArray&& other) noexcept {
    if (this != &other) {
        if (backend_ != nullptr) backend_->release(buf_);
        backend_ = std::exchange(other.backend_, nullptr);
        buf_ = std::exchange(other.buf_, {});
    }
    return *this;
}

}  // namespace plab
