#include "equivalence_checks.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <span>

#include "runtime/equivalence.h"
#include "runtime/registry.h"
#include "test_util.h"

namespace plab::test {
namespace {

std::vector<float> slice(const std::vector<float>& v, std::size_t row, std::size_t width) {
    REQUIRE((row + 1) * width <= v.size());
    return {v.begin() + std::ptrdiff_t(row * width), v.begin() + std::ptrdiff_t((row + 1) * width)};
}

// The oracle of every check: cpu-ref's whole prefill — itself checked first
// against a recompute that never carries a KV cache from one chunk to the
// next. Position t is recomputed by a fresh session that prefills only tokens
// 0..t as one chunk; its last row must give the whole prefill's logits of position t and
// its K/V rows at t, bit for bit. That holds on a reference backend by
// design (every row of a matmul, an RMSNorm and the causal attention is
// computed alone, in one fixed order), and fails when a later token leaks
// into position t (a wrong causal mask) or a row depends on its neighbours —
// without any chunk plan or cache reuse involved.
PrefillSnapshot oracle_prefill(const DeviceModel& cpu_ref, const std::vector<int32_t>& tokens,
                               const SessionOptions& so) {
    const int n = int(tokens.size());
    const ModelConfig& c = cpu_ref.config();
    const std::size_t V = std::size_t(c.vocab_size), row = std::size_t(c.n_kv_heads) * c.head_dim;
    Session whole(cpu_ref, so);
    ForwardProbes every_position;
    every_position.all_logits = true;
    const PrefillResult r = whole.prefill(tokens, ChunkPlan{{n}}, every_position);
    PrefillSnapshot oracle = snapshot_of(whole, r);
    REQUIRE(r.all_logits.size() == std::size_t(n) * V);
    require_not_all_zero(r.all_logits, "cpu-ref logits of every position");
    for (int t = 0; t < n; ++t) {
        Session prefix(cpu_ref, so);
        const PrefillResult p = prefix.prefill(
            std::span<const int32_t>(tokens.data(), std::size_t(t) + 1), ChunkPlan{{t + 1}});
        INFO("cache-free recompute of position " << t << " of " << n);
        require_bitwise_equal(p.last_logits, slice(r.all_logits, std::size_t(t), V),
                              "logits of position " + std::to_string(t));
        for (int l = 0; l < c.n_layers; ++l) {
            require_bitwise_equal(slice(prefix.read_kv(l, KvPart::K), std::size_t(t), row),
                                  slice(oracle.k[std::size_t(l)], std::size_t(t), row),
                                  "K of layer " + std::to_string(l));
            require_bitwise_equal(slice(prefix.read_kv(l, KvPart::V), std::size_t(t), row),
                                  slice(oracle.v[std::size_t(l)], std::size_t(t), row),
                                  "V of layer " + std::to_string(l));
        }
    }
    return oracle;
}

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

// Runs `plan` on `b` and requires it bitwise equal to `oracle` (made with
// `oracle_options`) — unless the run would be the oracle's own computation
// (same backend, same plan, same KV block size): that pair only shows
// determinism, so it is skipped and not counted. Returns 1 if compared.
int compare_with_oracle(Backend& b, const DeviceModel& model, const std::vector<int32_t>& tokens,
                        const ChunkPlan& plan, const SessionOptions& so,
                        const PrefillSnapshot& oracle, const SessionOptions& oracle_options) {
    if (b.name() == oracle.backend && plan.lengths == oracle.plan.lengths &&
        so.block_size == oracle_options.block_size) {
        return 0;
    }
    require_bitwise(run_prefill_snapshot(model, tokens, plan, so), oracle);
    return 1;
}

int count_backend(const std::vector<Backend*>& backends, const std::string& name) {
    int n = 0;
    for (const Backend* b : backends) n += b->name() == name ? 1 : 0;
    return n;
}

ModelConfig config_of(const RandomShape& s, std::mt19937& rng) {
    ModelConfig c = small_config(s.dim, s.layers, s.heads, s.kv_heads, s.head_dim, s.hidden,
                                 s.vocab, s.max_seq);
    c.rope_theta = 500.0 + rng() % 20000;
    return c;
}

// A random composition of n whose chunks are 1..9 tokens long, and at least
// two chunks when n > 1 (so it is never the whole prefill).
ChunkPlan random_plan(int n, std::mt19937& rng) {
    ChunkPlan p;
    for (int left = n; left > 0;) {
        const int cap = std::min(left == n ? n - 1 : left, 9);
        const int len = cap < 1 ? left : 1 + int(rng() % cap);
        p.lengths.push_back(len);
        left -= len;
    }
    return p;
}

// The plans of one random prompt, without duplicates (fixed size 7 is the
// whole prefill when n <= 7): whole, random, fixed size 7, token by token.
std::vector<ChunkPlan> plans_of(int n, std::mt19937& rng) {
    std::vector<ChunkPlan> plans;
    for (const ChunkPlan& p :
         {ChunkPlan{{n}}, random_plan(n, rng), fixed_chunk_plan(n, 7), fixed_chunk_plan(n, 1)}) {
        bool seen = false;
        for (const ChunkPlan& q : plans) seen = seen || q.lengths == p.lengths;
        if (!seen) plans.push_back(p);
    }
    return plans;
}

}  // namespace

// The gap between the largest and the second largest logit (by value, not
// through the engine's argmax, so a broken argmax cannot widen the near ties).
double top_two_gap(const std::vector<float>& logits) {
    double first = -INFINITY, second = -INFINITY;
    for (float x : logits) {
        if (x > first) {
            second = first;
            first = x;
        } else if (x > second) {
            second = x;
        }
    }
    return first - second;
}

const std::vector<RandomShape>& random_shapes() {
    static const std::vector<RandomShape> shapes = {
        // what, D, L, H, Hkv, Dh, F, V, max_seq_len
        {"GQA 3:1, odd head_dim (last dim unrotated)", 24, 2, 3, 1, 7, 40, 61, 40},
        {"GQA 2:1, odd head_dim, D != H*Dh", 20, 1, 4, 2, 5, 33, 50, 33},
        {"plain multi-head attention", 16, 3, 2, 2, 8, 24, 37, 48},
        {"tiny heads", 12, 2, 6, 3, 2, 17, 29, 29},
        {"one head, odd everything", 9, 1, 1, 1, 9, 13, 23, 21},
    };
    return shapes;
}

void check_all_plans_of_ten_tokens(const std::vector<Backend*>& references) {
    const ModelConfig c = small_config(32, 2, 4, 2, 8, 48, 64, 32);
    const Weights w = make_random_weights(c, 7);
    const auto tokens = random_tokens(10, c.vocab_size, 11);
    SessionOptions so;
    so.block_size = 3;  // blocks that chunk boundaries cut through
    auto cpu_ref = make_backend("cpu-ref");
    const PrefillSnapshot oracle = oracle_prefill(DeviceModel(*cpu_ref, w), tokens, so);
    int compared = 0;
    for (Backend* b : references) {
        const DeviceModel model(*b, w);
        for (const ChunkPlan& plan : all_chunk_plans(10)) {
            compared += compare_with_oracle(*b, model, tokens, plan, so, oracle, so);
        }
    }
    // 512 plans per backend, less cpu-ref's whole prefill (the oracle itself).
    REQUIRE(compared == 512 * int(references.size()) - count_backend(references, oracle.backend));
}

void check_random_configs(const std::vector<Backend*>& references, int prompts_per_config) {
    std::mt19937 rng(2024);
    auto cpu_ref = make_backend("cpu-ref");
    int compared = 0, expected = 0;
    for (const RandomShape& s : random_shapes()) {
        const ModelConfig c = config_of(s, rng);
        const Weights w = make_random_weights(c, rng());
        const DeviceModel oracle_model(*cpu_ref, w);
        for (int trial = 0; trial < prompts_per_config; ++trial) {
            INFO(s.what << ", prompt " << trial);
            const int n = trial == 0 ? c.max_seq_len : 1 + int(rng() % c.max_seq_len);
            const auto tokens = random_tokens(n, c.vocab_size, rng());
            SessionOptions so;
            so.block_size = 1 + int(rng() % 8);
            const PrefillSnapshot oracle = oracle_prefill(oracle_model, tokens, so);
            const std::vector<ChunkPlan> plans = plans_of(n, rng);
            for (Backend* b : references) {
                const DeviceModel model(*b, w);
                for (const ChunkPlan& p : plans) {
                    compared += compare_with_oracle(*b, model, tokens, p, so, oracle, so);
                }
            }
            // Every (backend, plan) pair, less cpu-ref's whole prefill.
            expected +=
                int(plans.size() * references.size()) - count_backend(references, oracle.backend);
        }
    }
    REQUIRE(compared == expected);
    REQUIRE(compared > 0);
}

void check_block_size_invariance(const std::vector<Backend*>& references) {
    const ModelConfig c = small_config(32, 2, 4, 2, 8, 48, 64, 40);
    const Weights w = make_random_weights(c, 3);
    const auto tokens = random_tokens(37, c.vocab_size, 5);
    SessionOptions small, large;
    small.block_size = 1;
    large.block_size = 16;
    auto cpu_ref = make_backend("cpu-ref");
    const PrefillSnapshot oracle = oracle_prefill(DeviceModel(*cpu_ref, w), tokens, large);
    int compared = 0;
    for (Backend* b : references) {
        const DeviceModel model(*b, w);
        compared +=
            compare_with_oracle(*b, model, tokens, fixed_chunk_plan(37, 5), small, oracle, large);
        compared += compare_with_oracle(*b, model, tokens, ChunkPlan{{37}}, large, oracle, large);
    }
    REQUIRE(compared == 2 * int(references.size()) - count_backend(references, oracle.backend));
}

FastReport check_fast_backend(Backend& fast, const std::function<int(int)>& head_dim_for) {
    REQUIRE_FALSE(fast.is_reference());
    auto cpu_ref = make_backend("cpu-ref");
    FastReport report;
    // One prompt, several plans of the fast backend against cpu-ref's whole prefill.
    auto check_prompt = [&](const Weights& w, const std::vector<int32_t>& tokens,
                            const std::vector<ChunkPlan>& plans, const SessionOptions& so) {
        const int n = int(tokens.size());
        const DeviceModel ref(*cpu_ref, w), model(fast, w);
        const PrefillSnapshot oracle = run_prefill_snapshot(ref, tokens, ChunkPlan{{n}}, so);
        require_not_all_zero(oracle.last_logits, "cpu-ref logits");
        double scale = 0;
        for (float x : oracle.last_logits) scale = std::max(scale, double(std::fabs(x)));
        // rel 1e-5 of the largest logit: GEMM blocking, tiles, online softmax, FMA
        // and the library exp round differently from the reference's ordered sums.
        const double tol = 1e-5 * scale;
        // A backend within `tol` of every logit can pick another greedy token
        // only if cpu-ref's top two logits are within 2·tol of each other (each
        // may move tol towards the other). Only there is the token not required.
        const double gap = top_two_gap(oracle.last_logits);
        const bool near_tie = gap <= 2 * tol;
        const PrefillSnapshot whole = run_prefill_snapshot(model, tokens, ChunkPlan{{n}}, so);
        for (const ChunkPlan& p : plans) {
            const PrefillSnapshot s = run_prefill_snapshot(model, tokens, p, so);
            INFO(fast.name() << " plan " << p.to_string() << ", " << n << " tokens, block size "
                             << so.block_size);
            require_allclose(s.last_logits, oracle.last_logits, tol, 0,
                             "fast backend reorders sums; promise is 1e-5 of max |logit|");
            const Difference d = compare_snapshots(s, oracle);
            ++report.comparisons;
            if (near_tie) {
                ++report.near_ties;
                WARN(fast.name() << " plan " << p.to_string() << ": cpu-ref's top-2 gap " << gap
                                 << " <= 2 x tolerance " << tol
                                 << ", greedy token not required to match (it "
                                 << (d.same_argmax ? "does" : "does not") << ")");
            } else {
                INFO("cpu-ref top-2 gap " << gap << ", tolerance " << tol);
                REQUIRE(d.same_argmax);
                ++report.argmax_checked;
            }
            report.worst = std::max(report.worst, d.logits_max_abs / scale);
            // Chunk-invariant kernels: the plan changes no bit of the fast
            // backend's own result (logits and every cached K/V).
            require_bitwise(s, whole);
            ++report.bitwise_to_own_full;
        }
    };

    // 1. Every random shape of the reference checks (odd head_dim, GQA 3:1 and
    //    2:1, D != H·Dh, tiny heads, one head): a prompt of max_seq_len and a
    //    random one, random KV block sizes.
    std::mt19937 rng(4048);
    int expected = 0;
    for (const RandomShape& s : random_shapes()) {
        INFO(s.what);
        ModelConfig c = config_of(s, rng);
        if (head_dim_for) c.head_dim = head_dim_for(c.head_dim);
        const Weights w = make_random_weights(c, rng());
        for (int trial = 0; trial < 2; ++trial) {
            const int n = trial == 0 ? c.max_seq_len : 1 + int(rng() % c.max_seq_len);
            const auto tokens = random_tokens(n, c.vocab_size, rng());
            SessionOptions so;
            so.block_size = 1 + int(rng() % 8);
            const std::vector<ChunkPlan> plans = plans_of(n, rng);
            check_prompt(w, tokens, plans, so);
            expected += int(plans.size());
        }
    }
    // 2. A larger model: prompts of 37..71 tokens cross the query tiles of
    //    attention (gpu 32, cpu 48) and the 6-row register tiles of the CPU
    //    GEMM (cpu_gemm.h).
    const ModelConfig c = small_config(64, 2, 4, 2, 16, 176, 258, 96);
    const Weights w = make_random_weights(c, 21);
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        const int n = 20 + int(seed * 17);
        check_prompt(w, random_tokens(n, c.vocab_size, seed),
                     {ChunkPlan{{n}}, fixed_chunk_plan(n, 1), fixed_chunk_plan(n, 5),
                      fixed_chunk_plan(n, 16)},
                     SessionOptions{});
        expected += 4;
    }
    REQUIRE(report.comparisons == expected);
    REQUIRE(report.argmax_checked + report.near_ties == report.comparisons);
    REQUIRE(report.bitwise_to_own_full == report.comparisons);
    return report;
}

void check_all_plans_of_ten_tokens_fast(Backend& fast,
                                        const std::function<int(int)>& head_dim_for) {
    REQUIRE_FALSE(fast.is_reference());
    ModelConfig c = small_config(32, 2, 4, 2, 8, 48, 64, 32);
    if (head_dim_for) c.head_dim = head_dim_for(c.head_dim);
    const Weights w = make_random_weights(c, 7);
    const auto tokens = random_tokens(10, c.vocab_size, 11);
    SessionOptions so;
    so.block_size = 3;  // blocks that chunk boundaries cut through
    auto cpu_ref = make_backend("cpu-ref");
    const PrefillSnapshot ref =
        run_prefill_snapshot(DeviceModel(*cpu_ref, w), tokens, ChunkPlan{{10}}, so);
    const DeviceModel model(fast, w);
    const PrefillSnapshot whole = run_prefill_snapshot(model, tokens, ChunkPlan{{10}}, so);
    double scale = 0;
    for (float x : ref.last_logits) scale = std::max(scale, double(std::fabs(x)));
    // The whole prefill itself: a different computation from cpu-ref's (FMA,
    // lanes, a polynomial exp), within the fast backends' promise.
    require_allclose(whole.last_logits, ref.last_logits, 1e-5 * scale, 0,
                     "fast backend reorders sums; promise is 1e-5 of max |logit|");
    int compared = 0;
    for (const ChunkPlan& plan : all_chunk_plans(10)) {
        if (plan.lengths.size() == 1) continue;  // the whole prefill: itself
        require_bitwise(run_prefill_snapshot(model, tokens, plan, so), whole);
        ++compared;
    }
    REQUIRE(compared == 511);
}

}  // namespace plab::test
