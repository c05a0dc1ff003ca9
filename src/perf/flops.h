// FLOP and byte accounting: what a prefill or a decode step must compute and read.
//
// What it teaches (lessons/06-compute-vs-memory.md): prefill of T tokens costs
//   projections  2·T·L·(D·H·Dh + 2·D·Hkv·Dh + H·Dh·D + 3·D·F)     (Q,K,V,O + SwiGLU)
//   attention    4·Dh·H·L · pairs,  pairs = sum over queries of visible keys
//                = T(T+1)/2 for a cold prompt — quadratic in T
//   logits       2·D·V for the last position only
// A decode step reads every weight once (plus the KV cache) for ~2 FLOPs per
// weight: its arithmetic intensity is ~0.5 FLOP/byte, so it is memory-bound,
// while prefill reuses each weight T times and is often compute-bound — how
// often depends on length, batch, implementation and device.
// Left out: norms, RoPE, softmax and residual adds (O(T·D), under 1% here).
#pragma once

#include <cstddef>

#include "model/config.h"

namespace plab {

struct PrefillCost {
    double projection_flops = 0;
    double attention_flops = 0;
    double logits_flops = 0;
    double attention_pairs =
        0;  // (query, key) pairs the causal mask lets through, per head and layer
    double total() const { return projection_flops + attention_flops + logits_flops; }
};

// Cost of prefilling n tokens after pos0 already cached tokens.
PrefillCost prefill_cost(const ModelConfig& c, int n, int pos0 = 0);

// The prompt length from which a cold prefill's attention FLOPs exceed its
// projection and MLP FLOPs: attention grows as T², the rest as T, so below this
// length prefill time is *not* dominated by the quadratic term (lesson 6).
// The smallest T with prefill_cost(c, T).attention_flops > .projection_flops.
int attention_overtakes_projections_at(const ModelConfig& c);

// Bytes a decode step at context length `ctx` must read: every weight once (of an
// untied token-embedding table only the one row looked up) + K/V of ctx positions.
double decode_bytes(const ModelConfig& c, int ctx);

}  // namespace plab
