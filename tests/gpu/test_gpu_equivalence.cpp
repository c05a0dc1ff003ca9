// The foundation's equivalence tests (tests/engine/test_equivalence.cpp), run
// on the GPU backends: the same models, prompts and chunk plans.
//
// What it shows: gpu-ref keeps every promise cpu-ref keeps — all 512 chunk
// plans of a 10-token prompt, random configs (grouped-query attention, odd
// head_dim with an unrotated last component, D != H·Dh), any KV block size —
// and equals cpu-ref itself bit for bit. gpu keeps the fast backends' promise:
// relative 1e-5 of the largest logit, the same greedy token, for every plan.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "backends/registry.h"
#include "gpu_test_util.h"
#include "runtime/equivalence.h"
#include "test_util.h"

namespace plab::test {
namespace {

void require_bitwise(const PrefillSnapshot& a, const PrefillSnapshot& b) {
    INFO(a.backend << " plan " << a.plan.to_string() << " vs " << b.backend << " plan "
                   << b.plan.to_string());
    require_not_all_zero(a.last_logits, "logits");
    const Difference d = compare_snapshots(a, b);
    INFO("logits max |diff| " << d.logits_max_abs << ", K/V max |diff| " << d.kv_max_abs);
    REQUIRE(d.logits_bitwise);
    REQUIRE(d.kv_bitwise);
}

}  // namespace

TEST_CASE("gpu-ref: all 512 chunk plans of a 10-token prompt equal cpu-ref's full prefill",
          "[gpu][prefill][equivalence]") {
    const ModelConfig c = small_config(32, 2, 4, 2, 8, 48, 64, 32);
    const Weights w = make_random_weights(c, 7);
    const auto tokens = random_tokens(10, c.vocab_size, 11);
    SessionOptions so;
    so.block_size = 3;  // blocks that chunk boundaries cut through
    auto cpu_ref = make_backend("cpu-ref");
    const PrefillSnapshot oracle =
        run_prefill_snapshot(DeviceModel(*cpu_ref, w), tokens, ChunkPlan{{10}}, so);
    for (auto& gpu : gpu_backend_forms(GpuVariant::reference)) {
        const DeviceModel model(*gpu, w);
        for (const ChunkPlan& plan : all_chunk_plans(10)) {
            require_bitwise(run_prefill_snapshot(model, tokens, plan, so), oracle);
        }
    }
}

TEST_CASE("gpu-ref: random configs (GQA, odd head_dim) and prompts equal cpu-ref",
          "[gpu][prefill][equivalence]") {
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
    auto gpus = gpu_backend_forms(GpuVariant::reference);
    for (const Shape& s : shapes) {
        ModelConfig c = small_config(s.dim, s.layers, s.heads, s.kv_heads, s.head_dim, s.hidden,
                                     s.vocab, s.max_seq);
        c.rope_theta = 500.0 + rng() % 20000;
        const Weights w = make_random_weights(c, rng());
        const DeviceModel ref_model(*cpu_ref, w);
        for (int trial = 0; trial < 2; ++trial) {
            const int n = trial == 0 ? c.max_seq_len : 1 + int(rng() % c.max_seq_len);
            const auto tokens = random_tokens(n, c.vocab_size, rng());
            SessionOptions so;
            so.block_size = 1 + int(rng() % 8);
            const PrefillSnapshot oracle =
                run_prefill_snapshot(ref_model, tokens, ChunkPlan{{n}}, so);
            ChunkPlan random_plan;
            for (int left = n; left > 0;) {
                const int len = 1 + int(rng() % std::min(left, 9));
                random_plan.lengths.push_back(len);
                left -= len;
            }
            for (auto& gpu : gpus) {
                const DeviceModel model(*gpu, w);
                for (const ChunkPlan& p : {ChunkPlan{{n}}, random_plan, fixed_chunk_plan(n, 7),
                                           fixed_chunk_plan(n, 1)}) {
                    require_bitwise(run_prefill_snapshot(model, tokens, p, so), oracle);
                }
            }
        }
    }
}

TEST_CASE("gpu-ref: the KV block size does not change a bit", "[gpu][prefill][equivalence]") {
    const ModelConfig c = small_config(32, 2, 4, 2, 8, 48, 64, 40);
    const Weights w = make_random_weights(c, 3);
    const auto tokens = random_tokens(37, c.vocab_size, 5);
    SessionOptions a, b;
    a.block_size = 1;
    b.block_size = 16;
    auto cpu_ref = make_backend("cpu-ref");
    const PrefillSnapshot oracle =
        run_prefill_snapshot(DeviceModel(*cpu_ref, w), tokens, ChunkPlan{{37}}, b);
    for (auto& gpu : gpu_backend_forms(GpuVariant::reference)) {
        const DeviceModel model(*gpu, w);
        require_bitwise(run_prefill_snapshot(model, tokens, fixed_chunk_plan(37, 5), a), oracle);
        require_bitwise(run_prefill_snapshot(model, tokens, ChunkPlan{{37}}, b), oracle);
    }
}

TEST_CASE("gpu vs cpu-ref: within rel 1e-5 on logits, same greedy token, every plan",
          "[gpu][prefill][equivalence]") {
    const ModelConfig c = small_config(64, 2, 4, 2, 16, 176, 258, 96);
    const Weights w = make_random_weights(c, 21);
    auto cpu_ref = make_backend("cpu-ref");
    const DeviceModel ref(*cpu_ref, w);
    for (auto& gpu : gpu_backend_forms(GpuVariant::fast)) {
        const DeviceModel fast(*gpu, w);
        double worst = 0;
        for (std::uint64_t seed = 1; seed <= 2; ++seed) {
            const int n = 20 + int(seed * 17);
            const auto tokens = random_tokens(n, c.vocab_size, seed);
            const PrefillSnapshot oracle = run_prefill_snapshot(ref, tokens, ChunkPlan{{n}});
            float scale = 0;
            for (float x : oracle.last_logits) scale = std::max(scale, std::fabs(x));
            for (const ChunkPlan& p : {ChunkPlan{{n}}, fixed_chunk_plan(n, 1),
                                       fixed_chunk_plan(n, 5), fixed_chunk_plan(n, 16)}) {
                const PrefillSnapshot s = run_prefill_snapshot(fast, tokens, p);
                INFO(gpu->name() << " plan " << p.to_string());
                // Same promise and reason as cpu vs cpu-ref: tiles, online softmax,
                // FMA (native) and the library exp round differently.
                require_allclose(s.last_logits, oracle.last_logits, 1e-5 * scale, 0,
                                 "fast backend reorders sums; promise is 1e-5 of max |logit|");
                const Difference d = compare_snapshots(s, oracle);
                REQUIRE(d.same_argmax);
                worst = std::max(worst, d.logits_max_abs / scale);
            }
        }
        WARN(gpu->name() << " vs cpu-ref: max logit diff " << worst << " of max |logit|");
    }
}

}  // namespace plab::test
