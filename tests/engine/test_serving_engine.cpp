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

#include "model/tokenizers/tokenizer.h"
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

// Every backend, fast ones included, promises a request the same bits
// whatever shares its step, however its prompt is chunked, warm or cold from
// the prefix cache (issue 48): the fast kernels compute each row's sums in one
// fixed order whatever the step's row count or thread (cpu_fast.h, cpu_gemm.h;
// kernels/README.md for gpu). So the batch tests compare bitwise on all of them.
void require_same(const Backend& be, const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
    require_bitwise_equal(got, want, what + " (backend " + be.name() + ")");
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
                    solo_kv[s].push_back(cache.storage().read(seq, l, KvPart::K));
                    solo_kv[s].push_back(cache.storage().read(seq, l, KvPart::V));
                }
                cache.blocks().release(seq);
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
                std::size_t wanting = 0;
                for (std::size_t s : open) {
                    const int len = plans[s].spans[next[s]];
                    // Some items want no logits (a prompt's earlier chunk in
                    // the engine): the classifier skips their rows, and the
                    // rows of the others come back compact, in item order.
                    const bool wants = std::bernoulli_distribution(0.7)(rng);
                    wanting += wants ? 1 : 0;
                    items.push_back({&seqs[s],
                                     std::span<const int32_t>(plans[s].tokens).subspan(at[s], len),
                                     {},
                                     {},
                                     wants});
                    (at[s] < plans[s].prompt ? has_prefill : has_decode) = true;
                }
                const StepOutput out = forward_step(m, pool, items, ws, {}, nullptr);
                REQUIRE(out.logits.size() == wanting * std::size_t(c.vocab_size));
                std::size_t row_i = 0;
                for (std::size_t i = 0; i < open.size(); ++i) {
                    const std::size_t s = open[i];
                    if (items[i].wants_logits) {
                        const std::vector<float> row(
                            out.logits.begin() + row_i * c.vocab_size,
                            out.logits.begin() + (row_i + 1) * c.vocab_size);
                        ++row_i;
                        require_same(*be, row, solo[s][next[s]],
                                     "sequence " + std::to_string(s) + " span " +
                                         std::to_string(next[s]) + " logits");
                    }
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
                        *be, pool.storage().read(seqs[s], l, KvPart::K), solo_kv[s][2 * l],
                        "sequence " + std::to_string(s) + " K of layer " + std::to_string(l));
                    require_same(
                        *be, pool.storage().read(seqs[s], l, KvPart::V), solo_kv[s][2 * l + 1],
                        "sequence " + std::to_string(s) + " V of layer " + std::to_string(l));
                }
                pool.blocks().release(seqs[s]);
            }
            REQUIRE(pool.blocks().blocks_in_use() == 0);
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
    REQUIRE(pool.blocks().blocks_in_use() == 0);
}

namespace {

// A prompt of `n` seeded random tokens.
std::vector<int32_t> prompt_of(int n, std::uint64_t seed) {
    return random_tokens(n, engine_config().vocab_size, seed);
}

RequestOptions greedy(int max_new, bool keep_logits = true) {
    RequestOptions o;
    o.max_new_tokens = max_new;
    o.keep_logits = keep_logits;
    return o;
}

std::vector<int32_t> new_tokens_of(const Engine& e, int id) {
    const auto t = e.request(id).new_tokens();
    return {t.begin(), t.end()};
}

// The cold oracle: the same engine options with the prefix cache off.
EngineOptions without_prefix_cache(EngineOptions o) {
    o.prefix_cache = false;
    return o;
}

// No block in use, every reference count zero: nothing leaked.
void require_no_leak(const Engine& e) {
    const KvCache& pool = e.cache();
    REQUIRE(pool.blocks().blocks_in_use() == 0);
    for (int b = 0; b < pool.blocks().num_blocks(); ++b) REQUIRE(pool.blocks().ref_count(b) == 0);
}

}  // namespace

TEST_CASE(
    "engine: under every policy, requests served together give the tokens of generate() alone",
    "[engine][serving]") {
    const ModelConfig c = engine_config();
    const Weights w = make_random_weights(c, 11);
    const std::vector<int> lengths = {5, 31, 1, 17, 40};
    // Oracle: runtime/generate.h, each request on its own Session.
    std::vector<std::vector<int32_t>> alone;
    {
        auto be = make_backend("cpu-ref");
        const DeviceModel m(*be, w);
        for (std::size_t i = 0; i < lengths.size(); ++i) {
            GenerateOptions g;
            g.max_new_tokens = 12;
            g.stop_at_eos = false;
            g.session.block_size = 4;
            ByteTokenizer tok;
            Trace trace;
            alone.push_back(
                generate(m, tok, "", prompt_of(lengths[i], 100 + i), g, trace).new_tokens);
        }
    }
    for (Policy policy :
         {Policy::one_at_a_time, Policy::static_batch, Policy::continuous, Policy::chunked}) {
        INFO("policy " << policy_name(policy));
        EngineOptions eo;
        eo.backend = "cpu-ref";
        eo.block_size = 4;
        eo.policy = policy;
        // Chunked: prompts longer than 24 tokens are prefilled over several
        // steps. The others prefill whole prompts: a budget of max_seq_len.
        eo.max_step_tokens = policy == Policy::chunked ? 24 : c.max_seq_len;
        Engine e(w, eo);
        // Three arrive first; two more after two steps, while those decode.
        for (std::size_t i = 0; i < 3; ++i)
            e.add_request(prompt_of(lengths[i], 100 + i), greedy(12));
        e.step();
        e.step();
        for (std::size_t i = 3; i < lengths.size(); ++i)
            e.add_request(prompt_of(lengths[i], 100 + i), greedy(12));
        e.run();
        for (std::size_t i = 0; i < lengths.size(); ++i) {
            const Request& r = e.request(static_cast<int>(i));
            INFO("request " << i);
            REQUIRE(new_tokens_of(e, int(i)) == alone[i]);
            REQUIRE(r.token_us.size() == alone[i].size());
            REQUIRE(r.finish_reason == "length");
        }
        // Continuous batching mixes one request's prefill with others' decode
        // tokens in a step; static batches and one-at-a-time never do.
        bool mixed = false;
        for (const StepRecord& s : e.steps()) mixed |= s.prefill_tokens > 0 && s.decode_tokens > 0;
        REQUIRE(mixed == (policy == Policy::chunked || policy == Policy::continuous));
        require_no_leak(e);
    }
    EngineOptions bad;
    bad.policy = Policy::continuous;
    bad.max_step_tokens = 64;
    require_error([&] { Engine e(w, bad); },
                  "policy continuous prefills whole prompts, so its token budget must hold the "
                  "longest, max_seq_len 128; got 64 (or use policy chunked)");
}

TEST_CASE("prefix cache: warm == cold, shared blocks counted, one token recomputed on a full hit",
          "[engine][prefix]") {
    const ModelConfig c = engine_config();
    const Weights w = make_random_weights(c, 12);
    const int B = 4;
    for (const std::string& name : backend_names()) {
        INFO("backend " << name);
        EngineOptions eo;
        eo.backend = name;
        eo.block_size = B;
        Engine cold_engine(w, without_prefix_cache(eo));
        Engine e(w, eo);
        const std::vector<int32_t> prompt = prompt_of(5 * B + 1, 7);  // 5 full blocks + 1
        const int cold = cold_engine.add_request(prompt, greedy(6));
        cold_engine.run();
        const int first = e.add_request(prompt, greedy(6));
        e.run();
        // The first request found nothing; its 5 full blocks were all misses.
        REQUIRE(e.request(first).cached_tokens == 0);
        REQUIRE(e.request(first).miss_blocks == 5);
        const int warm = e.add_request(prompt, greedy(6));
        e.run();
        const Request& r = e.request(warm);
        // A full hit: every full block of the prompt found, only the last
        // prompt token computed (its logits give the first new token).
        REQUIRE(r.cached_tokens == 5 * B);
        REQUIRE(r.hit_blocks == 5);
        REQUIRE(r.miss_blocks == 0);
        REQUIRE(r.computed_tokens == 1 + 5);  // 1 prompt token, then 5 decode tokens
        REQUIRE(e.pool_stats().hit_blocks == 5);
        for (std::size_t t = 0; t < r.logits.size(); ++t) {
            require_same(e.backend(), r.logits[t], cold_engine.request(cold).logits[t],
                         "warm vs cold logits of new token " + std::to_string(t));
        }
        REQUIRE(new_tokens_of(e, warm) == new_tokens_of(cold_engine, cold));
        require_no_leak(e);
        // Its blocks stayed cached: all on the LRU queue of cached free blocks.
        REQUIRE(e.cache().blocks().cached_free_blocks() >= 5);
    }
}

TEST_CASE("prefix cache: a prompt of whole blocks recomputes its last block, as vLLM does",
          "[engine][prefix]") {
    const Weights w = make_random_weights(engine_config(), 13);
    EngineOptions eo;
    eo.backend = "cpu-ref";
    eo.block_size = 4;
    Engine e(w, eo);
    const std::vector<int32_t> prompt = prompt_of(12, 8);  // exactly 3 blocks
    e.add_request(prompt, greedy(1));
    e.run();
    const int again = e.add_request(prompt, greedy(1));
    e.run();
    // Only the first 11 tokens are looked up (the last is always computed), so
    // the third block is not full within them: 2 hits, 4 tokens computed. A
    // shared block is never written into.
    REQUIRE(e.request(again).cached_tokens == 8);
    REQUIRE(e.request(again).computed_tokens == 4);
    REQUIRE(new_tokens_of(e, again) == new_tokens_of(e, 0));
}

// Planted bugs this test catches (issue 48), each through its own REQUIRE:
//  - the lookup matching all `len` prompt tokens instead of `len - 1`
//    (scheduler.cpp, Scheduler::admit): a repeated prompt of exactly k·B
//    tokens then finds every block and has nothing left to compute — the
//    REQUIRE_NOTHROW on its run names the length (before this test only an
//    internal check inside the engine caught it, in 1 of 31 tests);
//  - a lookup of `len - 2` (one token too few): a k·B + 1 prompt misses its
//    last full block — hit_blocks below (len - 1) / B;
//  - warm K/V served from the wrong blocks: the tokens differ from the cold run.
TEST_CASE("prefix cache: prompts of k·B - 1, k·B and k·B + 1 tokens, each repeated whole",
          "[engine][prefix]") {
    const Weights w = make_random_weights(engine_config(), 19);
    for (const int B : {1, 4, 16}) {
        for (const int k : {1, 2, 3}) {
            for (const int delta : {-1, 0, 1}) {
                const int len = k * B + delta;
                if (len < 1) continue;
                INFO("B " << B << ", prompt of " << len << " tokens (" << k << "·B"
                          << (delta < 0   ? " - 1"
                              : delta > 0 ? " + 1"
                                          : "")
                          << "), repeated whole");
                EngineOptions eo;
                eo.backend = "cpu-ref";
                eo.block_size = B;
                Engine e(w, eo);
                const std::vector<int32_t> prompt = prompt_of(len, 30 + len);
                const int cold = e.add_request(prompt, greedy(3));
                REQUIRE_NOTHROW(e.run());
                const int warm = e.add_request(prompt, greedy(3));
                REQUIRE_NOTHROW(e.run());
                const Request& r = e.request(warm);
                // Only the first len - 1 tokens are looked up: the last is always
                // computed (its logits give the first new token).
                const int full = (len - 1) / B;
                REQUIRE(r.hit_blocks == full);
                REQUIRE(r.cached_tokens == full * B);
                REQUIRE(r.computed_tokens == len - full * B + 2);  // + 2 decode tokens
                REQUIRE(r.computed_tokens >= 1 + 2);
                REQUIRE(new_tokens_of(e, warm) == new_tokens_of(e, cold));
                require_no_leak(e);
            }
        }
    }
}

TEST_CASE("prefix cache: a different token before a block boundary misses that block and all after",
          "[engine][prefix]") {
    const Weights w = make_random_weights(engine_config(), 14);
    const int B = 4;
    EngineOptions eo;
    eo.backend = "cpu-ref";
    eo.block_size = B;
    const std::vector<int32_t> base = prompt_of(6 * B + 3, 9);
    for (int changed : {0, 3, 4, 9, 15, 23}) {  // first/last position of some blocks
        INFO("token changed at position " << changed);
        Engine e(w, eo);
        e.add_request(base, greedy(1));
        e.run();
        std::vector<int32_t> other = base;
        other[changed] = (other[changed] + 1) % engine_config().vocab_size;
        const int id = e.add_request(other, greedy(1));
        e.run();
        const int block = changed / B;  // blocks before it still hit
        REQUIRE(e.request(id).cached_tokens == block * B);
        REQUIRE(e.request(id).hit_blocks == block);
        REQUIRE(e.request(id).miss_blocks == 6 - block);
        // What was shared gives the answer of a cold run.
        Engine cold(w, without_prefix_cache(eo));
        const int cid = cold.add_request(other, greedy(1));
        cold.run();
        require_bitwise_equal(e.request(id).logits[0], cold.request(cid).logits[0],
                              "logits after a partial hit");
    }
}

TEST_CASE("prefix cache: requests admitted in one step share blocks computed in that step",
          "[engine][prefix]") {
    const Weights w = make_random_weights(engine_config(), 15);
    EngineOptions eo;
    eo.backend = "cpu-ref";
    eo.block_size = 4;
    Engine e(w, eo);
    const std::vector<int32_t> prefix = prompt_of(20, 10);
    for (int i = 0; i < 4; ++i) {
        std::vector<int32_t> p = prefix;
        const auto tail = prompt_of(3 + i, 200 + i);
        p.insert(p.end(), tail.begin(), tail.end());
        e.add_request(p, greedy(4));
    }
    e.step();
    REQUIRE(e.steps()[0].requests.size() == 4);  // all four in the first step
    REQUIRE(e.request(0).cached_tokens == 0);
    for (int i = 1; i < 4; ++i) REQUIRE(e.request(i).cached_tokens == 20);
    // While they run, the 5 prefix blocks each have 4 references.
    for (int lb = 0; lb < 5; ++lb) {
        REQUIRE(e.cache().blocks().ref_count(e.request(0).seq.block_table[std::size_t(lb)]) == 4);
        for (int i = 1; i < 4; ++i)
            REQUIRE(e.request(i).seq.block_table[std::size_t(lb)] ==
                    e.request(0).seq.block_table[std::size_t(lb)]);
    }
    e.run();
    for (int i = 0; i < 4; ++i) {
        Engine alone(w, without_prefix_cache(eo));
        const int id = alone.add_request(e.request(i).prompt, greedy(4));
        alone.run();
        INFO("request " << i);
        REQUIRE(new_tokens_of(e, i) == new_tokens_of(alone, id));
        for (std::size_t t = 0; t < 4; ++t)
            require_bitwise_equal(e.request(i).logits[t], alone.request(id).logits[t], "logits");
    }
    require_no_leak(e);
}

TEST_CASE("prefix cache: cached free blocks are evicted least recently freed first",
          "[engine][prefix]") {
    const ModelConfig c = engine_config();
    auto be = make_backend("cpu-ref");
    const int B = 2;
    KvCache pool(*be, c, B, 6);
    const std::uint64_t salt = 42;
    auto fill = [&](Sequence& s, const std::vector<int32_t>& t) {
        pool.blocks().reserve(s, static_cast<int>(t.size()));
        pool.prefix().name_full_blocks(s, t, salt);
    };
    const auto ta = prompt_of(4, 1), tb = prompt_of(4, 2);  // two full blocks each
    Sequence a, b;
    fill(a, ta);
    fill(b, tb);
    const std::vector<int32_t> a_blocks = a.block_table, b_blocks = b.block_table;
    pool.blocks().release(a);  // queue: a1 a0 (a sequence's last block first)
    pool.blocks().release(b);  // queue: a1 a0 b1 b0
    REQUIRE(pool.blocks().cached_free_blocks() == 4);
    REQUIRE(pool.prefix().match(ta, salt).size() == 2);
    // Six free blocks: two never named go first, then the LRU front, a1.
    Sequence x;
    fill(x, prompt_of(6, 3));
    REQUIRE(pool.blocks().counters().evictions == 1);
    REQUIRE(x.block_table.back() == a_blocks[1]);
    REQUIRE(pool.prefix().match(ta, salt).size() == 1);  // a0 still there, a1 gone
    REQUIRE(pool.prefix().match(tb, salt).size() == 2);
    // Taking a block back (a hit) removes it from the queue: it is not evicted next.
    Sequence a2;
    pool.prefix().share(a2, pool.prefix().match(ta, salt));
    REQUIRE(a2.block_table == std::vector<int32_t>{a_blocks[0]});
    Sequence y;
    pool.blocks().reserve(y, B);  // evicts b1 (a0 is in use again)
    REQUIRE(y.block_table[0] == b_blocks[1]);
    REQUIRE(pool.blocks().counters().evictions == 2);
    REQUIRE(pool.prefix().match(tb, salt).size() == 1);
    REQUIRE(pool.prefix().match(ta, salt).size() == 1);
    for (Sequence* s : {&x, &a2, &y}) pool.blocks().release(*s);
    REQUIRE(pool.blocks().blocks_in_use() == 0);
}

TEST_CASE("prefix cache: a hash collision cannot return a wrong block", "[engine][prefix]") {
    // The same name with other tokens is refused by the stored-token check:
    // a block made under one salt is not found under another salt, and equal
    // tokens with a different parent do not match either.
    const ModelConfig c = engine_config();
    auto be = make_backend("cpu-ref");
    KvCache pool(*be, c, 2, 8);
    const auto t = prompt_of(4, 5);
    Sequence s;
    pool.blocks().reserve(s, 4);
    pool.prefix().name_full_blocks(s, t, 1);
    REQUIRE(pool.prefix().match(t, 1).size() == 2);
    REQUIRE(pool.prefix().match(t, 2).empty());  // another model
    const std::vector<int32_t> swapped = {t[2], t[3], t[0], t[1]};
    REQUIRE(pool.prefix().match(swapped, 1).empty());  // block 1's tokens, but first
    REQUIRE(PrefixCache::block_hash(0, std::span<const int32_t>(t).first(2), 1) !=
            PrefixCache::block_hash(1, std::span<const int32_t>(t).first(2), 1));
    pool.blocks().release(s);
}

TEST_CASE("greedy sampling on the device: the tokens of the host's argmax, no logits copied back",
          "[engine][serving]") {
    const ModelConfig c = engine_config();
    const Weights w = make_random_weights(c, 31);
    for (const std::string backend : {"cpu-ref", "cpu", "gpu-ref", "gpu"}) {
        INFO("backend " << backend);
        EngineOptions eo;
        eo.backend = backend;
        eo.block_size = 4;
        eo.max_step_tokens = 16;  // prompts in chunks, next to others' decode tokens
        auto run = [&](bool keep_logits, Trace& trace) {
            Engine e(w, eo, &trace);
            for (int i = 0; i < 4; ++i)
                e.add_request(prompt_of(5 + 9 * i, 300 + std::uint64_t(i)), greedy(6, keep_logits));
            e.run();
            std::vector<std::vector<int32_t>> tokens;
            for (int i = 0; i < 4; ++i) tokens.push_back(new_tokens_of(e, i));
            return tokens;
        };
        // keep_logits: the logits come to the host and the sampler's argmax
        // picks (the oracle); without: Backend::argmax on the device.
        Trace host_trace, device_trace;
        const auto host = run(true, host_trace);
        const auto device = run(false, device_trace);
        REQUIRE(device == host);
        auto copies = [](const Trace& t) {
            return std::count_if(t.events().begin(), t.events().end(), [](const TraceEvent& e) {
                return e.name == "copy logits to host";
            });
        };
        REQUIRE(copies(host_trace) > 0);
        REQUIRE(copies(device_trace) == 0);
    }
}

TEST_CASE("preemption under a tiny pool, then recompute: the tokens of an unconstrained run",
          "[engine][preempt]") {
    const Weights w = make_random_weights(engine_config(), 16);
    for (const std::string& name : {std::string("cpu-ref"), std::string("gpu-ref")}) {
        for (bool prefix : {false, true}) {
            INFO("backend " << name << ", prefix cache " << prefix);
            auto run = [&](int kv_blocks) {
                EngineOptions eo;
                eo.backend = name;
                eo.block_size = 4;
                eo.kv_blocks = kv_blocks;
                eo.prefix_cache = prefix;
                auto e = std::make_unique<Engine>(w, eo);
                for (int i = 0; i < 4; ++i) e->add_request(prompt_of(10 + i, 300 + i), greedy(20));
                e->run();
                return e;
            };
            const auto roomy = run(0);
            // Each request holds up to ceil((13 + 19) / 4) = 8 blocks; 10 fit one.
            const auto tight = run(10);
            REQUIRE(roomy->pool_stats().preemptions == 0);
            REQUIRE(tight->pool_stats().preemptions > 0);
            for (int i = 0; i < 4; ++i) {
                INFO("request " << i << ", preempted " << tight->request(i).preemptions);
                REQUIRE(new_tokens_of(*tight, i) == new_tokens_of(*roomy, i));
                for (std::size_t t = 0; t < 20; ++t)
                    require_bitwise_equal(tight->request(i).logits[t], roomy->request(i).logits[t],
                                          "logits after recompute");
            }
            require_no_leak(*tight);
        }
    }
}

TEST_CASE("engine: bad requests and options are refused with one clear line", "[engine]") {
    const Weights w = make_random_weights(engine_config(), 17);
    EngineOptions eo;
    eo.backend = "cpu-ref";
    eo.block_size = 4;
    eo.kv_blocks = 3;
    Engine e(w, eo);
    require_error([&] { e.add_request(prompt_of(10, 1), greedy(8)); },
                  "request 0 needs 5 KV blocks of 4 positions (10 prompt + 7 fed-back new tokens) "
                  "but the whole pool has 3; give --kv-blocks 5 or more");
    require_error([&] { e.add_request({}, greedy(1)); }, "empty prompt");
    require_error([&] { e.add_request({1, 500}, greedy(1)); }, "token id 500 at position 1");
    require_error([&] { e.add_request({1}, greedy(0)); }, "max_new_tokens 0 must be at least 1");
    REQUIRE(e.num_requests() == 0);
    REQUIRE_FALSE(e.has_unfinished());
    eo.kv_blocks = -1;
    require_error([&] { Engine bad(w, eo); }, "the KV pool needs at least one block");
}

}  // namespace plab::test
