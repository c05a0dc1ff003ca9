// FLOP and byte accounting (perf/flops): the numbers plab prefill, plab bench
// and lesson 6 print, checked against counts made here from the architecture.
#include <catch2/catch.hpp>
#include <cmath>

#include "runtime/cost_model.h"
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

TEST_CASE("attention FLOPs overtake the projections' at the length the closed form gives",
          "[flops]") {
    // Per layer, attention is 2·Dh·H·T(T+1) and projections + MLP 2·T·P with
    // P = D·H·Dh + 2·D·Hkv·Dh + H·Dh·D + 3·D·F: attention is larger exactly when
    // T + 1 > P / (Dh·H). Worked by hand for the three shapes lesson 6 names:
    //   shipped model (D 128, H 4, Hkv 2, Dh 32, F 384):  P/(Dh·H) = 196608/128 = 1536
    //   stories15M    (D 288, H 6, Hkv 6, Dh 48, F 768):  P/(Dh·H) = 995328/288 = 3456
    //   stories110M   (D 768, H 12, Hkv 12, Dh 64, F 2048): 7077888/768 = 9216
    // so the first length where attention wins is 1536, 3456 and 9216 tokens.
    REQUIRE(attention_overtakes_projections_at(
                test::small_config(128, 4, 4, 2, 32, 384, 512, 512)) == 1536);
    REQUIRE(attention_overtakes_projections_at(
                test::small_config(288, 6, 6, 6, 48, 768, 32000, 256)) == 3456);
    REQUIRE(attention_overtakes_projections_at(
                test::small_config(768, 12, 12, 12, 64, 2048, 32000, 1024)) == 9216);
    // And on odd shapes, against the closed form: smallest T with T + 1 > P / (Dh·H).
    for (const ModelConfig& c : {test::small_config(24, 2, 3, 1, 7, 40, 61, 40),
                                 test::small_config(20, 1, 4, 2, 5, 33, 50, 33),
                                 test::small_config(9, 1, 1, 1, 9, 13, 23, 21)}) {
        const double p = double(c.dim) * c.n_heads * c.head_dim +
                         2.0 * c.dim * c.n_kv_heads * c.head_dim +
                         double(c.n_heads) * c.head_dim * c.dim + 3.0 * c.dim * c.hidden_dim;
        const double ratio = p / (double(c.head_dim) * c.n_heads);
        const int want =
            static_cast<int>(std::floor(ratio));  // T + 1 > ratio <=> T >= floor(ratio)
        INFO("P/(Dh*H) = " << ratio);
        REQUIRE(attention_overtakes_projections_at(c) == want);
    }
}
