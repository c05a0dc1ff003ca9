// KV append: copy a chunk's K and V rows into their slots of the paged cache.
//
// What it teaches: PagedAttention (Kwon et al. 2023) scatters a sequence's
// positions over fixed-size blocks; the host turns positions into slots
// (core/kv_layout.h kv_slot) and the kernel only scatters: one thread per
// value of a row, so each row is one coalesced copy.
#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

__global__ void kv_append_kernel(float* k_pool, float* v_pool, const float* k, const float* v,
                                 const int32_t* slots, int n_rows, int row_size) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(n_rows) * row_size) return;
    const long long i = idx / row_size;
    const long long e = idx % row_size;
    const long long dst = static_cast<long long>(slots[i]) * row_size + e;
    k_pool[dst] = k[idx];
    v_pool[dst] = v[idx];
}

}  // namespace plab::PLAB_SIMT_NS
