// FLOP and byte accounting (perf/flops): the numbers plab prefill, plab bench
// and lesson 6 print, checked against counts made here from the architecture.
#include <catch2/catch.hpp>

#include "perf/flops.h"
#include "test_util.h"

using namespace plab;

namespace {

// Weights of the model written out from the architecture (lesson 6's sum),
// independently of ModelConfig::n_params.
double weights_by_hand(const ModelConfig& c) {
    const double d = c.dim, h = c.n_heads, hkv = c.n_kv_heads, dh = c.head_dim, f = c.hidden_dim,
                 v = c.vocab_size;
    const double per_layer = d                   // attention RMSNorm
                             + d * h * dh        // Wq
                             + 2 * d * hkv * dh  // Wk, Wv
                             + h * dh * d        // Wo
                             + d                 // MLP RMSNorm
                             + 3 * d * f;        // W1 (gate), W3 (up), W2 (down)
    return c.n_layers * per_layer + d            // final RMSNorm
           + v * d                               // token embeddings
           + (c.tied_embeddings ? 0 : v * d);    // separate classifier
}

}  // namespace

TEST_CASE("decode reads every weight once, but only one row of an untied embedding table",
          "[flops]") {
    ModelConfig c = test::small_config(40, 3, 5, 1, 8, 72, 301, 64);
    for (bool tied : {true, false}) {
        c.tied_embeddings = tied;
        INFO("tied classifier: " << tied);
        REQUIRE(double(c.n_params()) == weights_by_hand(c));
        const double kv_per_token = 2.0 * c.n_layers * c.n_kv_heads * c.head_dim * 4;
        // Tied: the classifier x·Eᵀ reads the whole table, which the lookup shares.
        // Untied: the classifier is read whole, the embedding table one row.
        const double read =
            tied ? weights_by_hand(c) : weights_by_hand(c) - double(c.vocab_size) * c.dim + c.dim;
        for (int ctx : {0, 1, 17, 64}) {
            REQUIRE(decode_bytes(c, ctx) == read * 4 + ctx * kv_per_token);
        }
    }
}

TEST_CASE("prefill attention pairs: T(T+1)/2 whole, and chunks add up to the same", "[flops]") {
    const ModelConfig c = test::small_config(32, 2, 4, 2, 8, 48, 64, 128);
    for (int t : {1, 7, 33, 128}) {
        const PrefillCost whole = prefill_cost(c, t);
        REQUIRE(whole.attention_pairs == double(t) * (t + 1) / 2);
        // Chunks of 5: each chunk's queries see the cached keys plus its own causal triangle.
        double pairs = 0, projections = 0;
        for (int pos0 = 0; pos0 < t; pos0 += 5) {
            const PrefillCost chunk = prefill_cost(c, std::min(5, t - pos0), pos0);
            pairs += chunk.attention_pairs;
            projections += chunk.projection_flops;
        }
        REQUIRE(pairs == whole.attention_pairs);
        REQUIRE(projections == whole.projection_flops);
    }
}
