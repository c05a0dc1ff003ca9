// The shape of one attention call, built the one way the forward pass, the
// toy and the tests build it: C queries at positions pos0..pos0+C-1 of H query
// heads over Hkv KV heads of Dh, in KV blocks of B positions, under `mask`
// (causal by default), with the score scale 1/sqrt(Dh) computed once on the
// host (core/attention_math.h: AttentionShape).
#pragma once

#include <cmath>

#include "core/attention_math.h"

namespace plab {

inline AttentionShape attention_shape(int n_queries, int pos0, int n_heads, int n_kv_heads,
                                      int head_dim, int block_size, const Mask& mask = {}) {
    AttentionShape s;
    s.n_queries = n_queries;
    s.pos0 = pos0;
    s.n_heads = n_heads;
    s.n_kv_heads = n_kv_heads;
    s.head_dim = head_dim;
    s.block_size = block_size;
    s.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    s.mask = mask;
    return s;
}

}  // namespace plab
