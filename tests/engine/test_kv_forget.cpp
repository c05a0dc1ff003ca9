// The KV cache under window-type masks (issue 9 phase 3): blocks that no
// present or future query may see go back to the pool, so memory stays flat as
// the prompt grows.
//
// What it shows: Mask::forgets is sound (a forgotten key is invisible to every
// later query, checked cell by cell) and, for the interval kinds, tight (a key
// it keeps, some later query sees); under window:W a prefill of 8·W tokens in
// chunks of C holds at most ceil(W/B)+1 blocks after each chunk and
// ceil((W+C-1)/B)+1 during one (plus the sinks' blocks), counted from the
// pool itself; decode stays flat too; causal frees nothing; and the answers
// are those of the dense reference, so no freed block was ever read.
#include <catch2/catch.hpp>

#include "core/kv_layout.h"
#include "mask_cases.h"
#include "runtime/mask_grammar.h"
#include "runtime/registry.h"
#include "runtime/session.h"
#include "test_util.h"
#include "trace/trace.h"

namespace plab::test {
namespace {

BoundMask bind_spec(const std::string& spec, const std::vector<int32_t>& tokens, int n_heads) {
    MaskContext mc;
    mc.tokens = tokens;
    mc.n_heads = n_heads;
    return make_mask(spec, mc);
}

int ceil_div(int a, int b) {
    return (a + b - 1) / b;
}

}  // namespace

TEST_CASE(
    "Mask::forgets: a forgotten key is seen by no later query, and interval kinds keep "
    "only what some later query sees",
    "[mask][kv]") {
    const int n = 48;
    const std::vector<int32_t> tokens = random_tokens(n, 50, 3);
    struct Case {
        const char* spec;
        bool tight;  // forgets exactly the keys no later query sees
    };
    const Case cases[] = {
        {"causal", true},  // forgets nothing, and every later query sees every key
        {"window:5", true},
        {"window:5+sink:2", true},
        {"dilated:3,2", false},           // holes: a kept key may be skipped by the dilation
        {"dilated:335850,55555", false},  // (W-1)·D beyond int: keys come back 55555 on
        {"chunked:7", true},
        {"docs:10,20,18", true},
        {"prefix:6", true},
        {"window:9+chunked:8", false},
        {"window:4|chunked:16", false},
    };
    for (const Case& c : cases) {
        INFO(c.spec);
        const BoundMask bm = bind_spec(c.spec, tokens, 4);
        const Mask m = bm.view();
        for (int q0 = 0; q0 < n; ++q0) {
            for (int k = 0; k < q0; ++k) {
                bool seen_later = false;
                for (int q = q0; q < n; ++q) seen_later = seen_later || m.visible(q, k);
                if (m.forgets(k, q0)) {
                    INFO("key " << k << " forgotten from query " << q0);
                    CHECK_FALSE(seen_later);
                } else if (c.tight) {
                    INFO("key " << k << " kept from query " << q0);
                    CHECK(seen_later);  // query q0 itself, here
                }
            }
        }
    }
}

TEST_CASE("window:W keeps at most ceil(W/B)+1 blocks after each chunk, counted from the pool",
          "[mask][kv]") {
    const ModelConfig c = small_config(32, 2, 4, 2, 8, 48, 61, 160);
    const Weights weights = make_random_weights(c, 51);
    const int W = 6, T = 8 * W;  // 48 tokens
    const std::vector<int32_t> tokens = random_tokens(T, c.vocab_size, 52);
    for (const char* backend_name : {"cpu-ref", "cpu", "gpu-ref", "gpu"}) {
        // The pool's bookkeeping is the backend's business only through what
        // it reads: every block size and chunk length on the CPU backends, a
        // subset on the emulated GPU ones (which ran 6 minutes of CI under ASan
        // with the whole grid).
        const bool gpu = std::string(backend_name).rfind("gpu", 0) == 0;
        for (const char* spec : {"window:6", "window:6+sink:3"}) {
            for (int B : gpu ? std::vector<int>{4} : std::vector<int>{2, 4, 5}) {
                for (int C : gpu ? std::vector<int>{3, 16} : std::vector<int>{1, 3, 7, 16}) {
                    INFO(backend_name << ", " << spec << ", B " << B << ", chunks of " << C);
                    auto backend = make_backend(backend_name);
                    const DeviceModel model(*backend, weights);
                    const bool sinks = std::string(spec).find("sink") != std::string::npos;
                    const int sink_blocks = sinks ? ceil_div(3, B) : 0;
                    Trace trace;
                    SessionOptions o;
                    o.block_size = B;
                    o.mask = bind_spec(spec, tokens, c.n_heads);
                    Session s(model, o, &trace);
                    for (int p = 0; p < T; p += C) {
                        const int len = std::min(C, T - p);
                        s.prefill(std::span(tokens).subspan(p, len), ChunkPlan{{len}});
                        // After the chunk: the window's blocks, one partly old, plus sinks.
                        CHECK(s.cache().blocks().blocks_in_use() <=
                              ceil_div(W, B) + 1 + sink_blocks);
                        CHECK(s.cache().blocks().blocks_in_use() ==
                              static_cast<int>(s.sequence().block_table.size()) -
                                  BlockManager::freed_blocks(s.sequence()));
                    }
                    // During a chunk (before its blocks were freed), from the trace.
                    int frees = 0;
                    for (const TraceEvent& e : trace.events()) {
                        if (e.name != "kv free") continue;
                        ++frees;
                        CHECK(std::stoi(e.args.at("blocks_in_use_before")) <=
                              ceil_div(W + C - 1, B) + 1 + sink_blocks);
                    }
                    CHECK(frees > 0);
                    CHECK(BlockManager::freed_blocks(s.sequence()) > 0);
                }
            }
        }
    }
}

TEST_CASE(
    "decode under a window keeps the pool flat, causal keeps every block, and freed "
    "blocks are never read",
    "[mask][kv]") {
    const ModelConfig c = small_config(32, 2, 4, 2, 8, 48, 61, 128);
    const Weights weights = make_random_weights(c, 61);
    const std::vector<int32_t> prompt = random_tokens(20, c.vocab_size, 62);
    const int B = 4, W = 8, steps = 60;
    for (const char* backend_name : {"cpu-ref", "cpu", "gpu-ref", "gpu"}) {
        INFO(backend_name);
        auto backend = make_backend(backend_name);
        const DeviceModel model(*backend, weights);
        // The same tokens fed through a window session and, for the answers, a
        // dense recompute of the whole sequence (no cache) under the same mask.
        std::vector<int32_t> all = prompt;
        for (int i = 0; i < steps; ++i) all.push_back((i * 7 + 3) % c.vocab_size);
        SessionOptions o;
        o.block_size = B;
        o.mask = bind_spec("window:8", all, c.n_heads);
        Session s(model, o);
        s.prefill(prompt, ChunkPlan{{20}});
        int most = 0;
        std::vector<float> last;
        for (int i = 0; i < steps; ++i) {
            last = s.decode_step(all[prompt.size() + std::size_t(i)]);
            most = std::max(most, s.cache().blocks().blocks_in_use());
        }
        CHECK(most <= ceil_div(W, B) + 1);
        CHECK(s.length() == 80);

        // No freed block was read: the last logits equal those of one prefill of
        // all 80 tokens under the same window on cpu-ref, which frees blocks only
        // after its single chunk, so it read every key it needed from the cache.
        auto ref_backend = make_backend("cpu-ref");
        const DeviceModel ref_model(*ref_backend, weights);
        SessionOptions ro;
        ro.block_size = B;
        ro.mask = o.mask;
        Session ref(ref_model, ro);
        ForwardProbes probes;
        probes.all_logits = true;
        const PrefillResult r = ref.prefill(all, ChunkPlan{{80}}, probes);
        const std::vector<float> expected(r.all_logits.end() - c.vocab_size, r.all_logits.end());
        if (backend->is_reference()) {
            // Decode's one-row products equal the prefill's rows bit for bit on the
            // reference backends (the spec fixes every sum's order).
            require_bitwise_equal(last, expected, "decode vs prefill under window:8");
        } else {
            double m = 0;
            for (float x : expected) m = std::max(m, double(std::fabs(x)));
            // Fast backends: relative 1e-5 of the largest logit, their promise.
            CHECK(max_abs_diff(last, expected) <= 1e-5 * m);
        }

        // Causal: nothing is ever freed.
        SessionOptions causal;
        causal.block_size = B;
        Session sc(model, causal);
        sc.prefill(prompt, ChunkPlan{{20}});
        for (int i = 0; i < 20; ++i) sc.decode_step(all[20 + std::size_t(i)]);
        CHECK(sc.cache().blocks().blocks_in_use() == ceil_div(40, B));
        CHECK(BlockManager::freed_blocks(sc.sequence()) == 0);
    }
}

}  // namespace plab::test
