// One engine, many requests (issue 10): batch invariance of a step over many
// sequences, the prefix cache, preemption under a tiny pool.
//
// The oracles are independent of the code under test: a sequence run alone,
// span by span, through forward_chunk on its own pool (batch invariance); an
// engine with the prefix cache off and an unconstrained pool (cold versus
// warm, preemption); Session-based generate() of each prompt alone.
#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/registry.h"
#include "test_util.h"

namespace plab::test {
namespace {

// Dh 16: a head_dim the gpu backend's flash attention is compiled for; GQA 4/2.
ModelConfig engine_config() {
    return small_config(48, 2, 4, 2, 16, 96, 97, 128);
}

// Fast backends: different row counts per matmul change how Eigen (cpu) splits
// its GEMM, so a row's sums may round differently; 1e-5 relative is the issue's
// bound, a few float ulps of the logits' magnitude.
constexpr double kFastRtol = 1e-5;
constexpr double kFastAtol = 1e-5;

void require_same(const Backend& be, const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
    if (be.is_reference()) {
        require_bitwise_equal(got, want, what);
    } else {
        require_allclose(got, want, kFastAtol, kFastRtol,
                         what + " (fast backend: GEMM splits depend on the step's row count)");
    }
}

struct Plan {
    std::vector<int32_t> tokens;  // prompt then "decode" tokens, all fixed in advance
    std::vector<int> spans;       // lengths: prompt chunks, then 1 per decode token
    int prompt = 0;
};

// Random sequences: prompts of 1..40 tokens cut into random chunks, then 1..6
// single-token spans (decode steps; their ids are fixed in advance, so the
// schedule cannot change what any sequence computes).
std::vector<Plan> random_plans(int n_seqs, int vocab, std::mt19937& rng) {
    std::vector<Plan> plans(static_cast<std::size_t>(n_seqs));
    for (Plan& p : plans) {
        p.prompt = std::uniform_int_distribution<int>(1, 40)(rng);
        const int decode = std::uniform_int_distribution<int>(1, 6)(rng);
        p.tokens = random_tokens(p.prompt + decode, vocab, rng());
        for (int left = p.prompt; left > 0;) {
            const int len = std::min(left, std::uniform_int_distribution<int>(1, 17)(rng));
            p.spans.push_back(len);
            left -= len;
        }
        for (int i = 0; i < decode; ++i) p.spans.push_back(1);
    }
    return plans;
}

}  // namespace

TEST_CASE("forward_step: a sequence's logits and K/V do not depend on what shares the step",
          "[engine][batch]") {
    const ModelConfig c = engine_config();
    const Weights w = make_random_weights(c, 2024);
    for (const std::string& name : backend_names()) {
        auto be = make_backend(name);
        const DeviceModel m(*be, w);
        for (std::uint32_t seed : {1u, 2u, 3u}) {
            INFO("backend " << name << ", seed " << seed);
            std::mt19937 rng(seed);
            const std::vector<Plan> plans = random_plans(6, c.vocab_size, rng);
            const int block = std::uniform_int_distribution<int>(1, 9)(rng);

            // Oracle: each sequence alone, span by span, on its own pool.
            std::vector<std::vector<std::vector<float>>> solo(plans.size());
            std::vector<std::vector<std::vector<float>>> solo_kv(plans.size());
            for (std::size_t s = 0; s < plans.size(); ++s) {
                KvCache cache(*be, c, block, (c.max_seq_len + block - 1) / block);
                Workspace ws(*be);
                Sequence seq;
                int at = 0;
                for (int len : plans[s].spans) {
                    const auto span = std::span<const int32_t>(plans[s].tokens).subspan(at, len);
                    solo[s].push_back(forward_chunk(m, cache, seq, span, ws, {}, nullptr).logits);
                    at += len;
                }
                for (int l = 0; l < c.n_layers; ++l) {
                    solo_kv[s].push_back(cache.read(seq, l, KvPart::K));
                    solo_kv[s].push_back(cache.read(seq, l, KvPart::V));
                }
                cache.release(seq);
            }

            // Mixed: every step takes a random subset of the unfinished sequences,
            // in random order, each with its next span (a chunk or a decode token),
            // from one shared pool.
            KvCache pool(*be, c, block, 6 * ((c.max_seq_len + block - 1) / block));
            Workspace ws(*be);
            std::vector<Sequence> seqs(plans.size());
            std::vector<std::size_t> next(plans.size(), 0);
            std::vector<int> at(plans.size(), 0);
            int steps = 0, mixed_steps = 0;
            for (;;) {
                std::vector<std::size_t> open;
                for (std::size_t s = 0; s < plans.size(); ++s)
                    if (next[s] < plans[s].spans.size()) open.push_back(s);
                if (open.empty()) break;
                std::shuffle(open.begin(), open.end(), rng);
                const std::size_t take =
                    std::uniform_int_distribution<std::size_t>(1, open.size())(rng);
                open.resize(take);
                std::vector<StepItem> items;
                bool has_prefill = false, has_decode = false;
                for (std::size_t s : open) {
                    const int len = plans[s].spans[next[s]];
                    items.push_back({&seqs[s],
                                     std::span<const int32_t>(plans[s].tokens).subspan(at[s], len),
                                     {},
                                     {}});
                    (at[s] < plans[s].prompt ? has_prefill : has_decode) = true;
                }
                const ChunkOutput out = forward_step(m, pool, items, ws, {}, nullptr);
                REQUIRE(out.logits.size() == open.size() * std::size_t(c.vocab_size));
                for (std::size_t i = 0; i < open.size(); ++i) {
                    const std::size_t s = open[i];
                    const std::vector<float> row(out.logits.begin() + i * c.vocab_size,
                                                 out.logits.begin() + (i + 1) * c.vocab_size);
                    require_same(*be, row, solo[s][next[s]],
                                 "sequence " + std::to_string(s) + " span " +
                                     std::to_string(next[s]) + " logits");
                    at[s] += plans[s].spans[next[s]];
                    ++next[s];
                }
                ++steps;
                mixed_steps += has_prefill && has_decode ? 1 : 0;
            }
            // The schedule did mix: some step held prefill chunks and decode tokens together.
            REQUIRE(mixed_steps > 0);
            for (std::size_t s = 0; s < plans.size(); ++s) {
                for (int l = 0; l < c.n_layers; ++l) {
                    require_same(
                        *be, pool.read(seqs[s], l, KvPart::K), solo_kv[s][2 * l],
                        "sequence " + std::to_string(s) + " K of layer " + std::to_string(l));
                    require_same(
                        *be, pool.read(seqs[s], l, KvPart::V), solo_kv[s][2 * l + 1],
                        "sequence " + std::to_string(s) + " V of layer " + std::to_string(l));
                }
                pool.release(seqs[s]);
            }
            REQUIRE(pool.blocks_in_use() == 0);
        }
    }
}

TEST_CASE("forward_step: a step whose blocks do not fit changes nothing", "[engine][batch]") {
    const ModelConfig c = engine_config();
    auto be = make_backend("cpu-ref");
    const DeviceModel m(*be, make_random_weights(c, 7));
    KvCache pool(*be, c, 4, 5);
    Workspace ws(*be);
    Sequence a, b;
    const auto ta = random_tokens(12, c.vocab_size, 1), tb = random_tokens(12, c.vocab_size, 2);
    const StepItem items[] = {{&a, ta, {}, {}}, {&b, tb, {}, {}}};  // 3 + 3 blocks > 5
    require_error([&] { forward_step(m, pool, items, ws, {}, nullptr); },
                  "this step needs 6 new blocks of 4 but only 5 of 5 are free");
    REQUIRE(a.length == 0);
    REQUIRE(b.length == 0);
    REQUIRE(pool.blocks_in_use() == 0);
}

}  // namespace plab::test
