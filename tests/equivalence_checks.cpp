#include "equivalence_checks.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "backends/registry.h"
#include "runtime/equivalence.h"
#include "test_util.h"

namespace plab::test {
namespace {

void require_bitwise(const PrefillSnapshot& a, const PrefillSnapshot& b) {
    INFO(a.backend << " plan " << a.plan.to_string() << " vs " << b.backend << " plan "
                   << b.plan.to_string());
    require_not_all_zero(a.last_logits, "logits");
    require_bitwise_equal(a.last_logits, b.last_logits, "last-position logits");
    for (std::size_t l = 0; l < a.k.size(); ++l) {
        require_bitwise_equal(a.k[l], b.k[l], "K of layer " + std::to_string(l));
        require_bitwise_equal(a.v[l], b.v[l], "V of layer " + std::to_string(l));
    }
}

}  // namespace

void check_all_plans_of_ten_tokens(const std::vector<Backend*>& references) {
    const ModelConfig c = small_config(32, 2, 4, 2, 8, 48, 64, 32);
    const Weights w = make_random_weights(c, 7);
    const auto tokens = random_tokens(10, c.vocab_size, 11);
    SessionOptions so;
    so.block_size = 3;  // blocks that chunk boundaries cut through
    auto cpu_ref = make_backend("cpu-ref");
    const PrefillSnapshot oracle =
        run_prefill_snapshot(DeviceModel(*cpu_ref, w), tokens, ChunkPlan{{10}}, so);
    for (Backend* b : references) {
        const DeviceModel model(*b, w);
        for (const ChunkPlan& plan : all_chunk_plans(10)) {
            require_bitwise(run_prefill_snapshot(model, tokens, plan, so), oracle);
        }
    }
}

void check_random_configs(const std::vector<Backend*>& references, int prompts_per_config) {
    std::mt19937 rng(2024);
    struct Shape {
        int dim, layers, heads, kv_heads, head_dim, hidden, vocab, max_seq;
    };
    const Shape shapes[] = {
        {24, 2, 3, 1, 7, 40, 61, 40},  // GQA 3:1, odd head_dim (last dim unrotated)
        {20, 1, 4, 2, 5, 33, 50, 33},  // GQA 2:1, odd head_dim, D != H·Dh
        {16, 3, 2, 2, 8, 24, 37, 48},  // plain multi-head attention
        {12, 2, 6, 3, 2, 17, 29, 29},  // tiny heads
        {9, 1, 1, 1, 9, 13, 23, 21},   // one head, odd everything
    };
    auto cpu_ref = make_backend("cpu-ref");
    for (const Shape& s : shapes) {
        ModelConfig c = small_config(s.dim, s.layers, s.heads, s.kv_heads, s.head_dim, s.hidden,
                                     s.vocab, s.max_seq);
        c.rope_theta = 500.0 + rng() % 20000;
        const Weights w = make_random_weights(c, rng());
        const DeviceModel oracle_model(*cpu_ref, w);
        for (int trial = 0; trial < prompts_per_config; ++trial) {
            const int n = trial == 0 ? c.max_seq_len : 1 + int(rng() % c.max_seq_len);
            const auto tokens = random_tokens(n, c.vocab_size, rng());
            SessionOptions so;
            so.block_size = 1 + int(rng() % 8);
            const PrefillSnapshot oracle =
                run_prefill_snapshot(oracle_model, tokens, ChunkPlan{{n}}, so);
            // A random composition, a fixed size that does not divide n, token by token.
            ChunkPlan random_plan;
            for (int left = n; left > 0;) {
                const int len = 1 + int(rng() % std::min(left, 9));
                random_plan.lengths.push_back(len);
                left -= len;
            }
            for (Backend* b : references) {
                const DeviceModel model(*b, w);
                for (const ChunkPlan& p : {ChunkPlan{{n}}, random_plan, fixed_chunk_plan(n, 7),
                                           fixed_chunk_plan(n, 1)}) {
                    require_bitwise(run_prefill_snapshot(model, tokens, p, so), oracle);
                }
            }
        }
    }
}

void check_block_size_invariance(const std::vector<Backend*>& references) {
    const ModelConfig c = small_config(32, 2, 4, 2, 8, 48, 64, 40);
    const Weights w = make_random_weights(c, 3);
    const auto tokens = random_tokens(37, c.vocab_size, 5);
    SessionOptions small, large;
    small.block_size = 1;
    large.block_size = 16;
    auto cpu_ref = make_backend("cpu-ref");
    const PrefillSnapshot oracle =
        run_prefill_snapshot(DeviceModel(*cpu_ref, w), tokens, ChunkPlan{{37}}, large);
    for (Backend* b : references) {
        const DeviceModel model(*b, w);
        require_bitwise(run_prefill_snapshot(model, tokens, fixed_chunk_plan(37, 5), small),
                        oracle);
        require_bitwise(run_prefill_snapshot(model, tokens, ChunkPlan{{37}}, large), oracle);
    }
}

double check_fast_backend(Backend& fast, double& across_plans) {
    const ModelConfig c = small_config(64, 2, 4, 2, 16, 176, 258, 96);
    const Weights w = make_random_weights(c, 21);
    auto cpu_ref = make_backend("cpu-ref");
    const DeviceModel ref(*cpu_ref, w), model(fast, w);
    double worst = 0;
    across_plans = 0;
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        const int n = 20 + int(seed * 17);
        const auto tokens = random_tokens(n, c.vocab_size, seed);
        const PrefillSnapshot oracle = run_prefill_snapshot(ref, tokens, ChunkPlan{{n}});
        float scale = 0;
        for (float x : oracle.last_logits) scale = std::max(scale, std::fabs(x));
        const PrefillSnapshot whole = run_prefill_snapshot(model, tokens, ChunkPlan{{n}});
        for (const ChunkPlan& p : {ChunkPlan{{n}}, fixed_chunk_plan(n, 1), fixed_chunk_plan(n, 5),
                                   fixed_chunk_plan(n, 16)}) {
            const PrefillSnapshot s = run_prefill_snapshot(model, tokens, p);
            INFO(fast.name() << " plan " << p.to_string());
            // rel 1e-5 of the largest logit: GEMM blocking, tiles, online softmax, FMA
            // and the library exp round differently from the reference's ordered sums.
            require_allclose(s.last_logits, oracle.last_logits, 1e-5 * scale, 0,
                             "fast backend reorders sums; promise is 1e-5 of max |logit|");
            const Difference d = compare_snapshots(s, oracle);
            REQUIRE(d.same_argmax);
            worst = std::max(worst, d.logits_max_abs / scale);
            across_plans =
                std::max(across_plans, compare_snapshots(s, whole).logits_max_abs / scale);
        }
    }
    return worst;
}

}  // namespace plab::test
