// Embedding gather: the first op of the forward pass.
//
// What it teaches: a token id selects a row of the (V, D) embedding table; one
// thread per output value copies one float, so neighbouring threads read
// neighbouring addresses (coalesced loads). Token ids are checked on the host.
#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

__global__ void embed_kernel(float* out, const float* table, const int32_t* tokens, int n_tokens,
                             int dim) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(n_tokens) * dim) return;
    const long long i = idx / dim;
    const long long d = idx % dim;
    out[idx] = table[static_cast<long long>(tokens[i]) * dim + d];
}

}  // namespace plab::PLAB_SIMT_NS
