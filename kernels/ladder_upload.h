// A host vector copied to fresh device memory (at least one element, so an
// empty input still has an address): the ladder runners' inputs
// (attention_ladder.cu, matmul_ladder.cu). Both builds, like every kernel file.
#pragma once

#include <algorithm>
#include <vector>

#include "simt/simt.h"

namespace plab::PLAB_SIMT_NS {

template <typename T>
T* ladder_upload(const std::vector<T>& host) {
    T* p = nullptr;
    PLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p),
                               std::max<std::size_t>(host.size(), 1) * sizeof(T)));
    PLAB_CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}

}  // namespace plab::PLAB_SIMT_NS
