#include "runtime/cost_model.h"

#include <algorithm>
#include <limits>

namespace plab {

PrefillCost prefill_cost(const ModelConfig& c, int n, int pos0) {
    const double D = c.dim, L = c.n_layers, H = c.n_heads, Hkv = c.n_kv_heads, Dh = c.head_dim,
                 F = c.hidden_dim, V = c.vocab_size;
    PrefillCost k;
    k.projection_flops = 2.0 * n * L * (D * H * Dh + 2 * D * Hkv * Dh + H * Dh * D + 3 * D * F);
    // Query at position pos0+i sees pos0+i+1 keys.
    k.attention_pairs = double(n) * pos0 + double(n) * (n + 1) / 2;
    k.attention_flops = 4.0 * Dh * H * L * k.attention_pairs;  // q·k and p·v, 2 FLOPs per MAC
    k.logits_flops = 2.0 * D * V;
    return k;
}

PrefillCost with_visible_pairs(PrefillCost cost, const ModelConfig& c, double visible_pairs) {
    cost.attention_pairs = visible_pairs;
    cost.attention_flops = 4.0 * c.head_dim * c.n_heads * c.n_layers * visible_pairs;
    return cost;
}

int attention_overtakes_projections_at(const ModelConfig& c) {
    // attention / projections grows with T (it is ∝ T+1): double, then bisect.
    const auto attention_wins = [&](int t) {
        const PrefillCost k = prefill_cost(c, t);
        return k.attention_flops > k.projection_flops;
    };
    int hi = 1;
    while (!attention_wins(hi)) hi *= 2;
    int lo = hi / 2;  // attention does not win at lo (or lo is 0)
    while (hi - lo > 1) {
        const int mid = lo + (hi - lo) / 2;
        (attention_wins(mid) ? hi : lo) = mid;
    }
    return hi;
}

double decode_bytes(const ModelConfig& c, int ctx) {
    // Every weight is read once per step, except the token-embedding table: the
    // step looks up one row of it. A tied classifier reads the whole table
    // anyway (logits = x · Eᵀ), so only an untied table is counted as one row.
    const double embedding = double(c.vocab_size) * c.dim;
    const double params =
        c.tied_embeddings ? double(c.n_params()) : double(c.n_params()) - embedding + c.dim;
    return params * sizeof(float) + double(ctx) * c.kv_floats_per_token() * sizeof(float);
}

PrefillWeightReads prefill_weight_reads(const ModelConfig& c, int chunks) {
    const double D = c.dim, H = c.n_heads, Hkv = c.n_kv_heads, Dh = c.head_dim, F = c.hidden_dim;
    PrefillWeightReads r;
    r.chunks = chunks;
    // Per layer: Q, K, V, O, gate, up, down, and the two RMSNorm weights.
    r.layer_bytes = c.n_layers * (D * H * Dh + 2 * D * Hkv * Dh + H * Dh * D + 3 * D * F + 2 * D) *
                    sizeof(float);
    r.head_bytes = (D + double(c.vocab_size) * D) * sizeof(float);
    return r;
}

double prefill_bytes(const ModelConfig& c, int n, int pos0) {
    // decode_bytes counts one embedding row (untied) and `ctx` positions of K/V:
    // a prefill looks up n rows and reads pos0 + n positions.
    const double row = c.tied_embeddings ? 0.0 : double(c.dim) * sizeof(float);
    return decode_bytes(c, pos0 + n) + (n - 1) * row;
}

DecodeStepCost decode_step_cost(const ModelConfig& c, int batch, double ctx) {
    DecodeStepCost k;
    k.batch = batch;
    k.ctx = ctx;
    // One token: projections, MLP and logits as prefill_cost counts them, and
    // attention over its ctx cached keys and itself (linear in ctx).
    const PrefillCost one = prefill_cost(c, 1, 0);
    k.per_token_flops = one.projection_flops + one.logits_flops +
                        4.0 * c.head_dim * c.n_heads * c.n_layers * (ctx + 1);
    // decode_bytes split into what the step shares and what each token adds:
    // an untied embedding table is looked up one row per token, not shared.
    const double row = c.tied_embeddings ? 0.0 : double(c.dim) * sizeof(float);
    k.weight_bytes = decode_bytes(c, 0) - row;
    k.per_token_bytes = ctx * c.kv_floats_per_token() * sizeof(float) + row;
    return k;
}

double roofline_step_s(const DecodeStepCost& k, double peak_gflops, double bandwidth_gb_per_s) {
    return std::max(k.flops() / (peak_gflops * 1e9), k.bytes() / (bandwidth_gb_per_s * 1e9));
}

double decode_compute_bound_batch(const ModelConfig& c, double ctx, double ridge) {
    const DecodeStepCost k = decode_step_cost(c, 1, ctx);
    const double margin = k.per_token_flops / ridge - k.per_token_bytes;
    if (margin <= 0) return std::numeric_limits<double>::infinity();
    return k.weight_bytes / margin;
}

}  // namespace plab
