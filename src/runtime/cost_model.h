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
    // (query, key) pairs the mask lets through, per head and layer (causal
    // unless with_visible_pairs says otherwise).
    double attention_pairs = 0;
    double total() const { return projection_flops + attention_flops + logits_flops; }
};

// Cost of prefilling n tokens after pos0 already cached tokens.
PrefillCost prefill_cost(const ModelConfig& c, int n, int pos0 = 0);
// The same cost under a mask that lets `visible_pairs` (query, key) pairs
// through per head and layer (runtime/mask_grammar.h count_visible_pairs): the
// attention term counts only those, as a kernel that skips every invisible
// pair would compute. A window shorter than the prompt makes it linear in T.
PrefillCost with_visible_pairs(PrefillCost cost, const ModelConfig& c, double visible_pairs);

// The prompt length from which a cold prefill's attention FLOPs exceed its
// projection and MLP FLOPs: attention grows as T², the rest as T, so below this
// length prefill time is *not* dominated by the quadratic term (lesson 6).
// The smallest T with prefill_cost(c, T).attention_flops > .projection_flops.
int attention_overtakes_projections_at(const ModelConfig& c);

// Bytes a decode step at context length `ctx` must read: every weight once (of an
// untied token-embedding table only the one row looked up) + K/V of ctx positions.
double decode_bytes(const ModelConfig& c, int ctx);

// The weight bytes a prefill in `chunks` chunks reads: every chunk runs every
// layer, so each layer's weights are read once per chunk; the final norm and
// the classifier only once, for the last chunk's last position (the first new
// token's logits; runtime/session.cpp skips them for earlier chunks). The
// embedding rows looked up are left out (a row per token, not the table).
// What small chunks cost besides their attention pairs (lesson 3).
struct PrefillWeightReads {
    int chunks = 0;
    double layer_bytes = 0;  // all layers' weights, read by every chunk
    double head_bytes = 0;   // final norm + classifier, read once
    double total() const { return chunks * layer_bytes + head_bytes; }
};
PrefillWeightReads prefill_weight_reads(const ModelConfig& c, int chunks);

// Bytes a prefill of n tokens after pos0 cached ones must read at least (the
// roofline's x axis, plab bench --plot): every weight once — the step's rows
// share each weight as a batched decode step's do, and of an untied embedding
// table only the n rows looked up — plus the K/V of all pos0 + n positions
// once, as attention tiled over keys reads them (FlashAttention, Dao et al.
// 2022). The chunk's own n positions count too: they are written to the KV
// cache and read back by the attention (at 2048 stories15M tokens, 28 MB: far
// beyond the caches). Activations are left out, as decode_bytes leaves them:
// T x D floats per op, small next to the weights below a few thousand tokens.
// For n = 1 this is decode_bytes(c, pos0 + 1).
double prefill_bytes(const ModelConfig& c, int n, int pos0 = 0);

// One decode step of `batch` sequences, each feeding back one token at context
// `ctx` (positions already cached; a mean over the sequences is fine: every
// term is linear in it). What batching changes (lessons/08-batching-decode.md):
//   FLOPs  grow with the batch: batch · per_token_flops, the FLOPs of one
//          token (prefill_cost(c, 1, ctx): projections, attention over ctx+1
//          keys, its logits);
//   bytes  barely do: the weights are read once for the whole step
//          (weight_bytes), and each sequence adds only its own K/V and its
//          row of an untied embedding table (per_token_bytes).
// At batch 1 the bytes are decode_bytes(c, ctx).
struct DecodeStepCost {
    int batch = 0;
    double ctx = 0;
    double per_token_flops = 0;
    double weight_bytes = 0;     // read once per step, whatever the batch
    double per_token_bytes = 0;  // K/V of ctx positions (+ one embedding row if untied)
    double flops() const { return batch * per_token_flops; }
    double bytes() const { return weight_bytes + batch * per_token_bytes; }
    double flops_per_byte() const { return flops() / bytes(); }  // arithmetic intensity
};
DecodeStepCost decode_step_cost(const ModelConfig& c, int batch, double ctx);

// The roofline's lower bound on a step's time, with the machine's peak
// (GFLOP/s) and bandwidth (GB/s): max(FLOPs / peak, bytes / bandwidth).
double roofline_step_s(const DecodeStepCost& k, double peak_gflops, double bandwidth_gb_per_s);

// The batch from which a decode step at context `ctx` is compute-bound on a
// machine whose ridge point is `ridge` FLOP per byte (peak / bandwidth):
//   b·f / peak > (W + b·k) / bandwidth  <=>  b > W / (f/ridge − k)
// with f = per-token FLOPs, W = weight bytes, k = per-token bytes (lower case:
// F and K name the MLP width and the keys). Without the K/V term this is
// 2·ridge for float32 weights (2 FLOPs per 4-byte weight per token). Returns
// +infinity when f/ridge <= k: the per-sequence bytes then grow as fast as
// the FLOPs, and no batch makes the step compute-bound.
double decode_compute_bound_batch(const ModelConfig& c, double ctx, double ridge);

}  // namespace plab
