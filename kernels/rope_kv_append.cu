// RoPE of Q and K and the K/V append, in one launch (Backend::rope_kv_append).
//
// What it teaches: kernel fusion for a latency-bound step. In a decode step
// each of these ops touches a few kilobytes; launched one by one (rope of Q,
// rope of K, kv_append) the step pays three launches and three trips through
// memory for work each thread could do in one. Here a thread takes one
// rotated pair of one head of one row, of Q or of K: a Q pair is rotated in
// place; a K pair is rotated in place too (the chunk's K rows keep the
// rotated values, as rope_rows leaves them) and written straight into its
// cache slot, with the V values of the same two columns beside it. An odd
// head_dim leaves its last column unrotated (no pair): one more thread per
// K/V head copies it.
//
// Bits: the rotation is core/rope.h rope_rotate_pair, as rope_kernel calls it
// on the same cos/sin table entries, and the append is a copy: the same
// values rope_rows then kv_append give.
#include <climits>

#include "core/rope.h"
#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

__global__ void rope_kv_append_kernel(RopeKvAppendArgs a) {
    const int half = a.head_dim / 2;
    const int per_head = (a.head_dim + 1) / 2;  // pairs, and the odd column's copy
    const int heads = a.n_heads + a.n_kv_heads;
    const int idx = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (idx >= a.rows * heads * per_head) return;
    const int i = idx % per_head;
    const int head = (idx / per_head) % heads;
    const int row = idx / (per_head * heads);
    const int position = a.positions != nullptr ? a.positions[row] : a.pos0 + row;
    const int table = position * half + i;
    if (head < a.n_heads) {  // a query head: rotate in place
        if (i == half) return;
        float* xh = a.q + (row * a.n_heads + head) * a.head_dim;
        rope_rotate_pair(xh + i, xh + i + half, a.cos[table], a.sin[table]);
        return;
    }
    const int kv_head = head - a.n_heads;
    const int row_size = a.n_kv_heads * a.head_dim;
    const int at = row * row_size + kv_head * a.head_dim;
    const long long slot = static_cast<long long>(a.slots[row]) * row_size + kv_head * a.head_dim;
    float* kh = a.k + at;
    const float* vh = a.v + at;
    if (i == half) {  // odd head_dim: the last column has no pair
        const int last = a.head_dim - 1;
        a.k_pool[slot + last] = kh[last];
        a.v_pool[slot + last] = vh[last];
        return;
    }
    rope_rotate_pair(kh + i, kh + i + half, a.cos[table], a.sin[table]);
    a.k_pool[slot + i] = kh[i];
    a.k_pool[slot + i + half] = kh[i + half];
    a.v_pool[slot + i] = vh[i];
    a.v_pool[slot + i + half] = vh[i + half];
}

void launch_rope_kv_append(const RopeKvAppendArgs& a, int last_position) {
    const long long per_head = (a.head_dim + 1) / 2;
    const long long threads =
        static_cast<long long>(a.rows) * (a.n_heads + a.n_kv_heads) * per_head;
    const long long q_elements = static_cast<long long>(a.rows) * a.n_heads * a.head_dim;
    const long long table = (static_cast<long long>(last_position) + 1) * (a.head_dim / 2);
    PLAB_CHECK(threads <= INT_MAX && q_elements <= INT_MAX && table <= INT_MAX,
               "rope_kv_append indexes with 32-bit ints: rows x heads x head_dim ("
                   << q_elements << ") and (last position + 1) x head_dim/2 (" << table
                   << ") must stay below 2^31; split the chunk");
    PLAB_LAUNCH(rope_kv_append_kernel, blocks_for(threads, kThreadsPerBlock), kThreadsPerBlock, 0,
                a);
}

}  // namespace plab::PLAB_SIMT_NS
