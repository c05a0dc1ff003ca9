// A host vector copied to fresh device memory, freed when the copy goes out
// of scope (also when a launch throws: a refused shape leaks nothing). At
// least one element, so an empty input still has an address. The ladder
// runners' inputs and outputs (attention_ladder.cu, matmul_ladder.cu); both
// builds, like every kernel file.
#pragma once

#include <algorithm>
#include <vector>

#include "simt/simt.h"

namespace plab::PLAB_SIMT_NS {

template <typename T>
class LadderBuffer {
public:
    explicit LadderBuffer(const std::vector<T>& host) {
        PLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_),
                                   std::max<std::size_t>(host.size(), 1) * sizeof(T)));
        PLAB_CUDA_CHECK(
            cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    }
    ~LadderBuffer() { cudaFree(p_); }  // no throw from a destructor
    LadderBuffer(const LadderBuffer&) = delete;
    LadderBuffer& operator=(const LadderBuffer&) = delete;
    T* get() const { return p_; }
    // Its first n elements back on the host.
    std::vector<T> download(std::size_t n) const {
        std::vector<T> host(n);
        PLAB_CUDA_CHECK(cudaMemcpy(host.data(), p_, n * sizeof(T), cudaMemcpyDeviceToHost));
        return host;
    }

private:
    T* p_ = nullptr;
};

}  // namespace plab::PLAB_SIMT_NS
