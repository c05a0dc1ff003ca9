#include "perf/flops.h"

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

}  // namespace plab
