// Masks as data on whole models (cpu-ref and cpu; one attention call at a
// time: test_mask.cpp).
//
// What it shows: every mask kind, composition and score modifier
//   1. keeps chunked prefill == full prefill bitwise for all 512 plans of a
//      10-token prompt — except prefix-LM, whose plans that split the prefix are
//      refused (one line naming the rule and a plan that works);
//   2. as a window at least as long as the prompt, is causal bit for bit;
//   3. shows probes with exactly 0 probability and -inf score in every masked cell;
//   4. covers a custom mask's rows only (decoding past it is refused), and
//      keeps packed documents' logits and K/V equal to each document alone.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "mask_cases.h"
#include "model/weights.h"
#include "runtime/equivalence.h"
#include "runtime/registry.h"
#include "runtime/session.h"
#include "test_util.h"

namespace plab::test {

namespace fs = std::filesystem;

namespace {

ModelConfig mask_model_config(int variant) {
    // D, L, H, Hkv, Dh, F, V, max_seq_len: GQA with an odd head_dim, and MHA.
    return variant == 0 ? small_config(30, 2, 6, 2, 5, 40, 50, 48)
                        : small_config(27, 2, 3, 3, 9, 33, 50, 48);
}

}  // namespace

TEST_CASE(
    "masks: all 512 chunk plans of a 10-token prompt are bitwise equal to full on cpu-ref "
    "and cpu / and prefix-LM refuses exactly the plans that split its prefix",
    "[mask][prefill][equivalence]") {
    const fs::path dir = process_temp_dir("plab_mask_model_test");
    // The reference backend, and the fast one whose kernels are chunk-invariant
    // by design (cpu_gemm.h, cpu_vector.h): both keep every plan bitwise.
    const std::string name = GENERATE(as<std::string>{}, "cpu-ref", "cpu");
    INFO("backend " << name);
    auto backend = make_backend(name);
    const int t = 10;
    const ModelConfig c = mask_model_config(0);
    const Weights w = make_random_weights(c, 41);
    const DeviceModel dm(*backend, w);
    const std::vector<int32_t> tokens = mask_case_tokens(t, c.vocab_size, 42);
    const std::vector<ChunkPlan> plans = all_chunk_plans(t);
    REQUIRE(plans.size() == 512);
    for (const MaskCase& mc : mask_cases(t, dir)) {
        INFO("mask " << mc.spec);
        SessionOptions so;
        so.block_size = 3;  // blocks that do not divide the chunks
        so.mask = make_mask(mc.spec, mask_context(tokens, c.n_heads));
        const PrefillSnapshot full = run_prefill_snapshot(dm, tokens, ChunkPlan{{t}}, so);
        require_not_all_zero(full.last_logits, "full prefill logits");
        int accepted = 0, refused = 0;
        for (const ChunkPlan& plan : plans) {
            // The plans the mask allows: no query sees a key after its chunk's end.
            bool allowed = true;
            int c0 = 0;
            for (int len : plan.lengths) {
                for (int q = c0; q < c0 + len; ++q)
                    for (int k = c0 + len; k < t; ++k) allowed = allowed && !mc.visible(q, k);
                c0 += len;
            }
            if (!allowed) {
                INFO("plan " << plan.to_string());
                REQUIRE(mc.sees_future);
                require_error([&] { run_prefill_snapshot(dm, tokens, plan, so); },
                              mc.spec.rfind("prefix", 0) == 0 ? "splits the bidirectional prefix"
                                                              : "not computed yet");
                ++refused;
                continue;
            }
            const PrefillSnapshot s = run_prefill_snapshot(dm, tokens, plan, so);
            const Difference d = compare_snapshots(s, full);
            INFO("plan " << plan.to_string() << ": logits max diff " << d.logits_max_abs
                         << ", kv max diff " << d.kv_max_abs);
            REQUIRE(d.bitwise());
            ++accepted;
        }
        if (mc.spec == "prefix:4" || mc.spec == "prefix:4+alibi") {
            // Boundaries may fall at 4..9 only: 2^6 plans keep the prefix whole.
            REQUIRE(accepted == 64);
            REQUIRE(refused == 448);
        } else if (!mc.sees_future) {
            REQUIRE(accepted == 512);
        }
        WARN("mask " << mc.spec << ": " << accepted << " plans bitwise equal to full, " << refused
                     << " refused");
    }
}

TEST_CASE("masks: a dilated window whose reach (W-1)·D is beyond int still has tight ranges",
          "[mask]") {
    // The fuzzer's find: dilated:335850,55555 formed 335849·55555 in int. Each
    // query of a short prompt sees itself only (the next key of its stride is
    // 55555 back), and keys come back into view 55555 positions later.
    const BoundMask bound = make_mask("dilated:335850,55555", mask_context({1, 2, 3, 4, 5}, 1));
    const Mask m = bound.view();
    for (int q : {0, 4, 55554, 55555, 2000000000}) {
        INFO("q=" << q);
        const KeyRange r = m.key_range(q);
        REQUIRE(r.lo == q % 55555);
        REQUIRE(r.hi == q);
        REQUIRE(m.visible(q, q));
        REQUIRE(m.visible(q, r.lo));
        if (q >= 1) REQUIRE_FALSE(m.visible(q, q - 1));
        REQUIRE_FALSE(m.forgets(0, q));  // 0, 55555, 111110, ... all see key 0
    }
    REQUIRE(m.visible(55555, 0));
    REQUIRE_FALSE(m.visible(55556, 0));
}

TEST_CASE("masks: the refusal names the rule and a plan that works / and that plan works",
          "[mask][prefill]") {
    auto backend = make_backend("cpu-ref");
    const ModelConfig c = mask_model_config(1);
    const Weights w = make_random_weights(c, 43);
    const DeviceModel dm(*backend, w);
    const std::vector<int32_t> tokens = mask_case_tokens(10, c.vocab_size, 44);
    SessionOptions so;
    so.mask = make_mask("prefix:6", mask_context(tokens, c.n_heads));
    const ChunkPlan bad = parse_chunk_plan("3,7", 10);
    require_error([&] { run_prefill_snapshot(dm, tokens, bad, so); },
                  "chunk plan 3,7 splits the bidirectional prefix (positions 0..5) at position "
                  "3");
    require_error([&] { run_prefill_snapshot(dm, tokens, bad, so); }, "e.g. plan 6,4");
    const ChunkPlan good = nearest_valid_plan(so.mask.view(), bad);
    REQUIRE(good.to_string() == "6,4");
    const Difference d = compare_snapshots(run_prefill_snapshot(dm, tokens, good, so),
                                           run_prefill_snapshot(dm, tokens, ChunkPlan{{10}}, so));
    REQUIRE(d.bitwise());
    // Token by token is refused too; its nearest valid plan keeps the prefix whole.
    REQUIRE(nearest_valid_plan(so.mask.view(), fixed_chunk_plan(10, 1)).to_string() == "6,1,1,1,1");
}

TEST_CASE("masks: a window at least as long as the prompt is causal / bit for bit",
          "[mask][prefill]") {
    auto backend = make_backend("cpu-ref");
    for (int variant : {0, 1}) {
        const ModelConfig c = mask_model_config(variant);
        const Weights w = make_random_weights(c, 50 + variant);
        const DeviceModel dm(*backend, w);
        const int t = 13;
        const std::vector<int32_t> tokens = random_tokens(t, c.vocab_size, 51);
        ForwardProbes probes;
        probes.attention = {{1, c.n_heads - 1}};
        probes.attention_scores = true;
        auto run = [&](const std::string& spec, const ChunkPlan& plan) {
            SessionOptions so;
            so.mask = make_mask(spec, mask_context(tokens, c.n_heads));
            Session s(dm, so);
            PrefillResult r = s.prefill(tokens, plan, probes);
            return std::make_pair(snapshot_of(s, r), r.attention[0]);
        };
        const auto causal = run("causal", ChunkPlan{{t}});
        for (const char* spec : {"window:13", "window:100", "window:13+sink:3", "chunked:13",
                                 "dilated:13,1", "docs:13", "prefix:1", "window:20+causal"}) {
            for (const ChunkPlan& plan : {ChunkPlan{{t}}, parse_chunk_plan("4", t)}) {
                INFO("mask " << spec << " plan " << plan.to_string());
                const auto got = run(spec, plan);
                REQUIRE(compare_snapshots(got.first, causal.first).bitwise());
                require_bitwise_equal(got.second.probs, causal.second.probs, "probe probabilities");
                require_bitwise_equal(got.second.scores, causal.second.scores, "probe scores");
            }
        }
        // And a shorter window really is different (the test can fail).
        REQUIRE_FALSE(
            compare_snapshots(run("window:12", ChunkPlan{{t}}).first, causal.first).logits_bitwise);
    }
}

TEST_CASE(
    "masks: specs and bindings that are wrong are refused with one line saying what is "
    "right",
    "[mask]") {
    const fs::path dir = process_temp_dir("plab_mask_model_test");
    const std::vector<int32_t> tokens = random_tokens(10, 50, 3);
    auto bind = [&](const std::string& spec) { make_mask(spec, mask_context(tokens, 4)); };
    struct Bad {
        std::string spec, fragment;
    };
    {
        std::ofstream f(dir / "short.txt");
        f << "1000000000\n1100000000\n";
    }
    {
        std::ofstream f(dir / "two.txt");
        for (int q = 0; q < 10; ++q) f << (q == 1 ? "1200000000" : "1111111111") << "\n";
    }
    {
        std::ofstream f(dir / "empty_row.txt");
        for (int q = 0; q < 10; ++q) f << std::string(10, q == 5 ? '0' : '1') << "\n";
    }
    for (const Bad& b : std::vector<Bad>{
             {"window:0", "the window W must be at least 1, got 0"},
             {"window:-3", "the window W must be at least 1, got -3"},
             {"window:", "needs a value, e.g. window:8"},
             {"window:abc", "is not a whole number"},
             {"window:8x", "is not a whole number"},
             {"banana", "unknown mask kind 'banana'"},
             {"wndow:8", "unknown mask kind 'wndow'"},
             {"", "empty mask spec"},
             {"window:8++sink:2", "empty item"},
             {"window:8|", "empty item"},
             {"sink:2", "needs a window to attach to"},
             {"window:8+sink:0", "the number of sinks S must be at least 1"},
             {"dilated:4", "needs two values W,D"},
             {"dilated:4,0", "the spacing D must be at least 1"},
             {"chunked:0", "the chunk size L must be at least 1"},
             {"prefix:11",
              "the prefix of 11 tokens is longer than the prompt of 10; P must be 1..10"},
             {"docs:5,7,3", "the document lengths sum to 15 but the prompt has 10 tokens"},
             {"docs:5,0,5", "a document length must be at least 1"},
             {"softcap:0", "the cap must be a positive number"},
             {"softcap:-1", "the cap must be a positive number"},
             {"softcap:nan", "the cap must be a positive number"},
             {"alibi:2", "alibi takes no value"},
             {"alibi+alibi", "names alibi twice"},
             {"causal:1", "causal takes no value"},
             {"window:8 + sink:2", "contains a space"},
             {"alibi|window:4", "has no mask, only modifiers"},
             {"window:1+window:2+window:3+window:4+window:5", "at most 4 can be combined"},
             {"file:" + (dir / "missing.txt").string(), "cannot read mask file"},
             {"file:" + (dir / "short.txt").string(), "has 2 rows; the prompt has 10 tokens"},
             {"file:" + (dir / "two.txt").string(), "line 2 column 2: '2' is not 0 or 1"},
             {"file:" + (dir / "empty_row.txt").string(), "row 5 sees no key"},
             {"file:" + dir.string(), "is a directory"},
             {"window:2+chunked:3+prefix:1+docs:2,8|causal", "at most 4"}}) {
        INFO("spec '" << b.spec << "'");
        require_error([&] { bind(b.spec); }, b.fragment);
    }
    // docs:bos needs a BOS id.
    MaskContext no_bos = mask_context(tokens, 4);
    no_bos.bos_id = -1;
    require_error([&] { make_mask("docs:bos", no_bos); }, "needs a tokenizer with a BOS token");
}

TEST_CASE("masks: a custom mask covers its rows only and decoding past it is refused", "[mask]") {
    const fs::path dir = process_temp_dir("plab_mask_model_test");
    auto backend = make_backend("cpu-ref");
    const ModelConfig c = mask_model_config(0);
    const Weights w = make_random_weights(c, 61);
    const DeviceModel dm(*backend, w);
    const std::vector<int32_t> tokens = random_tokens(10, c.vocab_size, 62);
    std::vector<std::vector<bool>> cells;
    const std::string path = write_custom_mask(dir, 10, false, 63, cells);
    SessionOptions so;
    so.mask = make_mask("file:" + path, mask_context(tokens, c.n_heads));
    Session s(dm, so);
    s.prefill(tokens, ChunkPlan{{10}});
    require_error([&] { s.decode_step(3); }, "covers positions 0..9 but position 10");
    // Other masks decode on: a window slides with the new position.
    SessionOptions ws;
    ws.mask = make_mask("window:4+sink:1", mask_context(tokens, c.n_heads));
    Session s2(dm, ws);
    s2.prefill(tokens, ChunkPlan{{10}});
    require_not_all_zero(s2.decode_step(3), "decode logits under a window");
}

TEST_CASE(
    "masks on the cpu fast backend: within 1e-5 of cpu-ref / same greedy token / chunked "
    "== whole bitwise / and it skips exactly the tiles the mask calls empty",
    "[mask][prefill][fast]") {
    const fs::path dir = process_temp_dir("plab_mask_model_test");
    auto ref = make_backend("cpu-ref");
    auto fast = make_backend("cpu");
    double fast_worst = 0;  // reported: the largest logit difference seen, of max |logit|
    for (int variant : {0, 1}) {
        ModelConfig c = mask_model_config(variant);
        c.max_seq_len = 128;
        const Weights w = make_random_weights(c, 70 + variant);
        const DeviceModel ref_model(*ref, w), fast_model(*fast, w);
        const int t = 100;  // several 32-key tiles, so windows leave whole tiles empty
        const std::vector<int32_t> tokens = mask_case_tokens(t, c.vocab_size, 71);
        for (const MaskCase& mc : mask_cases(t, dir)) {
            SessionOptions so;
            so.mask = make_mask(mc.spec, mask_context(tokens, c.n_heads));
            const PrefillSnapshot want =
                run_prefill_snapshot(ref_model, tokens, ChunkPlan{{t}}, so);
            double scale = 0;
            for (float x : want.last_logits) scale = std::max(scale, double(std::fabs(x)));
            PrefillSnapshot whole;
            for (const ChunkPlan& plan :
                 {ChunkPlan{{t}}, nearest_valid_plan(so.mask.view(), parse_chunk_plan("37,63", t)),
                  nearest_valid_plan(so.mask.view(), fixed_chunk_plan(t, 7))}) {
                INFO("mask " << mc.spec << " plan " << plan.to_string() << " H=" << c.n_heads
                             << " Dh=" << c.head_dim);
                const PrefillSnapshot got =
                    prefill_checking_tiles(*fast, fast_model, tokens, plan, so);
                const Difference d = compare_snapshots(got, want);
                // 1e-5 of max |logit|: FMA chains, vector lanes and a polynomial exp
                // round differently through 2 layers (measured 7e-7 here).
                REQUIRE(d.logits_max_abs <= 1e-5 * scale);
                REQUIRE(d.same_argmax);
                fast_worst = std::max(fast_worst, d.logits_max_abs / scale);
                // Chunk-invariant kernels: every plan, the bits of cpu's own whole prefill.
                if (plan.lengths.size() == 1)
                    whole = got;
                else
                    REQUIRE(compare_snapshots(got, whole).bitwise());
            }
        }
    }
    WARN("cpu vs cpu-ref under every mask: max logit diff " << fast_worst << " of max |logit|");
}

TEST_CASE("packed documents: each document's logits and K/V equal running it alone / bitwise",
          "[mask][prefill][docs]") {
    const fs::path dir = process_temp_dir("plab_mask_model_test");
    auto backend = make_backend("cpu-ref");
    const ModelConfig c = mask_model_config(0);
    const Weights w = make_random_weights(c, 80);
    const DeviceModel dm(*backend, w);
    const std::vector<int> lengths{4, 7, 5};
    const int t = 16;
    const std::vector<int32_t> tokens = random_tokens(t, c.vocab_size, 81);
    const int V = c.vocab_size;
    ForwardProbes all;
    all.all_logits = true;
    // Packed, under docs:4,7,5, in two plans (one cuts through documents).
    auto packed = [&](const std::string& spec, const ChunkPlan& plan) {
        SessionOptions so;
        so.mask = make_mask(spec, mask_context(tokens, c.n_heads));
        Session s(dm, so);
        const PrefillResult r = s.prefill(tokens, plan, all);
        std::vector<std::vector<float>> kv;
        for (int l = 0; l < c.n_layers; ++l) {
            kv.push_back(s.read_kv(l, KvPart::K));
            kv.push_back(s.read_kv(l, KvPart::V));
        }
        return std::make_pair(r.all_logits, kv);
    };
    const int row = c.n_kv_heads * c.head_dim;
    for (const ChunkPlan& plan : {ChunkPlan{{t}}, parse_chunk_plan("3,6,7", t)}) {
        const auto [logits, kv] = packed("docs:4,7,5", plan);
        int start = 0;
        for (int len : lengths) {
            INFO("plan " << plan.to_string() << ", document at " << start << " of " << len);
            const std::vector<int32_t> doc(tokens.begin() + start, tokens.begin() + start + len);
            Session alone(dm);  // causal, positions from 0
            const PrefillResult r = alone.prefill(doc, ChunkPlan{{len}}, all);
            const std::vector<float> mine(logits.begin() + std::size_t(start) * V,
                                          logits.begin() + std::size_t(start + len) * V);
            require_not_all_zero(r.all_logits, "document logits");
            require_bitwise_equal(mine, r.all_logits, "a document's logits, packed vs alone");
            for (int l = 0; l < c.n_layers; ++l) {
                for (int which = 0; which < 2; ++which) {
                    const auto& packed_kv = kv[std::size_t(2 * l + which)];
                    const std::vector<float> part(
                        packed_kv.begin() + std::size_t(start) * row,
                        packed_kv.begin() + std::size_t(start + len) * row);
                    require_bitwise_equal(part,
                                          alone.read_kv(l, which == 1 ? KvPart::V : KvPart::K),
                                          which ? "V, packed vs alone" : "K, packed vs alone");
                }
            }
            start += len;
        }
    }
    // Without restarting positions the same block-diagonal mask is *not* "alone"
    // bit for bit: RoPE then rotates the second document by 4, 5, ... RoPE scores
    // depend only on relative positions (q_m . k_n is a function of m - n), so the
    // shift changes only the rounding of the rotated vectors — a difference in
    // the last bits, which the bitwise promise does not allow.
    const fs::path file = dir / "docs_as_file.txt";
    {
        std::ofstream f(file);
        const int starts[] = {0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 11, 11, 11, 11, 11};
        for (int q = 0; q < t; ++q) {
            for (int k = 0; k < t; ++k) f << (k <= q && k >= starts[q] ? '1' : '0');
            f << "\n";
        }
    }
    const auto as_file = packed("file:" + file.string(), ChunkPlan{{t}});
    const auto as_docs = packed("docs:4,7,5", ChunkPlan{{t}});
    const std::vector<float> first_doc_file(as_file.first.begin(), as_file.first.begin() + 4 * V);
    const std::vector<float> first_doc_docs(as_docs.first.begin(), as_docs.first.begin() + 4 * V);
    require_bitwise_equal(first_doc_file, first_doc_docs, "the first document (positions agree)");
    const double shifted = max_abs_diff(as_file.first, as_docs.first);
    WARN("logits with positions not restarted vs restarted: max |diff| " << shifted);
    REQUIRE(shifted > 0);     // not bitwise "alone"...
    REQUIRE(shifted < 1e-4);  // ...but only rounding apart: RoPE is relative (measured ~1e-6)
}

}  // namespace plab::test
