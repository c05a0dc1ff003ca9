// The viewer's self-checks and its snapshot cache, without a window (issue 8).
//
// Each self-check must pass on the engine's real answer and fail when one
// number of that answer is wrong in a way the engine could get wrong (a slot in
// another block, a length off by one, a fast backend off by more than its
// promise). The cache test moves the chunk-size slider through more plans than
// the cache keeps and checks every cell of the equivalence matrix against an
// oracle the test computes itself.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "app/controller.h"
#include "checks/self_check.h"
#include "model/model_io.h"
#include "model/tokenizers/tokenizer.h"
#include "model/weights.h"
#include "runtime/device_model.h"
#include "runtime/equivalence.h"
#include "runtime/generate.h"
#include "runtime/registry.h"
#include "test_util.h"
#include "tiny_model.h"

namespace plab::viewer {
namespace {

// tests/viewer/tiny_model.h
Model tiny_model() {
    return plab::test::tiny_viewer_model();
}

ViewerState tiny_state() {
    ViewerState s;
    s.prompt = "the cat sat on the mat";  // 22 bytes + BOS = 23 tokens
    return s;
}

}  // namespace

// 1. Toy ------------------------------------------------------------------------------
TEST_CASE("toy self-check: every backend gives the known means 2, 3, 14/3, 6", "[viewer]") {
    Controller ctrl(tiny_model());
    for (const std::string& name : backend_names()) {
        ViewerState st = tiny_state();
        st.backend = name;
        ToySnapshot toy;
        ctrl.refresh_toy(st, toy);
        const CheckResult r = check_toy(toy);
        INFO(r.line);
        REQUIRE(r.ok);
        // The answer worked out by hand for V = 2, 4, 8, 10 with equal scores.
        REQUIRE(r.line.find("(2, 3, 14/3, 6)") != std::string::npos);
        REQUIRE(r.line.find("4 of 4 positions known") != std::string::npos);
    }
}

TEST_CASE("toy self-check fails when full and chunked are wrong alike, on every backend",
          "[viewer]") {
    // The old check only compared chunked with full, and passed any fast backend:
    // an engine that is wrong the same way in both runs got a "yes".
    Controller ctrl(tiny_model());
    for (const std::string& name : backend_names()) {
        ViewerState st = tiny_state();
        st.backend = name;
        ToySnapshot toy;
        ctrl.refresh_toy(st, toy);
        INFO("backend " << name);
        {
            ToySnapshot bad = toy;
            // Reference: one ulp off 14/3. Fast: 1e-4 off, 40x its bound (2+3)·2^-24·8.
            for (ToyRun* run : {&bad.full, &bad.chunked})
                run->outputs[2] = toy.reference ? std::nextafter(run->outputs[2], 10.0f)
                                                : run->outputs[2] + 1e-4f;
            const CheckResult r = check_toy(bad);
            INFO(r.line);
            REQUIRE_FALSE(r.ok);
            REQUIRE(r.line.find("position 2: output") != std::string::npos);
        }
        {
            ToySnapshot bad = toy;
            // A future key that leaks through the causal mask.
            for (ToyRun* run : {&bad.full, &bad.chunked}) run->probs[0 * 4 + 3] = 1e-7f;
            const CheckResult r = check_toy(bad);
            INFO(r.line);
            REQUIRE_FALSE(r.ok);
            REQUIRE(r.line.find("future key 3") != std::string::npos);
        }
    }
}

// 2. KV cache ---------------------------------------------------------------------------
namespace {

KvSnapshot kv_of(Controller& ctrl, int block_size, const std::string& chunks, int decode) {
    ViewerState st = tiny_state();
    st.block_size = block_size;
    st.chunks = chunks;
    st.decode_steps = decode;
    KvSnapshot kv;
    ctrl.refresh_kv(st, kv);
    return kv;
}

}  // namespace

TEST_CASE("kv self-check: length, block tables and kv append slots match the plan", "[viewer]") {
    Controller ctrl(tiny_model());
    struct Case {
        int block_size;
        const char* chunks;
        int decode;
    };
    for (const Case& c : {Case{16, "8", 4}, Case{4, "3,1,4,1,5,9", 3}, Case{5, "full", 7},
                          Case{1, "2", 1}, Case{7, "1", 0}}) {
        const KvSnapshot kv = kv_of(ctrl, c.block_size, c.chunks, c.decode);
        const CheckResult r = check_kv(kv);
        INFO(r.line);
        REQUIRE(r.ok);
        REQUIRE(static_cast<int>(kv.stages.size()) ==
                static_cast<int>(kv.plan.lengths.size()) + c.decode);
    }
}

TEST_CASE("kv scene default: chunk boundaries fall inside blocks", "[viewer]") {
    // Issue 8, item 7: with chunks landing on block boundaries, a cache that
    // started every chunk in a fresh block would look right. The defaults must
    // put a chunk start inside a half-filled block, and the check must cover it.
    const ViewerState defaults;
    Controller ctrl(tiny_model());
    const KvSnapshot kv = kv_of(ctrl, defaults.block_size, defaults.chunks, defaults.decode_steps);
    const CheckResult r = check_kv(kv);
    INFO(r.line);
    REQUIRE(r.ok);
    int inside = 0, first = 0;
    for (std::size_t i = 0; i + 1 < kv.plan.lengths.size(); ++i) {
        first += kv.plan.lengths[i];
        if (first % kv.block_size != 0) ++inside;
    }
    REQUIRE(inside >= 1);
    REQUIRE(r.line.find(std::to_string(inside) + " of ") != std::string::npos);
}

TEST_CASE("kv self-check fails on a wrong slot, position, length, table or event count",
          "[viewer]") {
    Controller ctrl(tiny_model());
    // B = 16, chunks of 8: chunk 1 (positions 8..15) continues block 0.
    const KvSnapshot kv = kv_of(ctrl, 16, "8", 2);
    REQUIRE(check_kv(kv).ok);
    REQUIRE(kv.stages[1].appends[0].args.at("slots") == "8-15");
    auto require_fails = [](const KvSnapshot& bad, const char* why) {
        const CheckResult r = check_kv(bad);
        INFO(r.line);
        REQUIRE_FALSE(r.ok);
        REQUIRE(r.line.find(why) != std::string::npos);
    };
    {  // A chunk written into a fresh block instead of the half-filled one.
        KvSnapshot bad = kv;
        bad.stages[1].appends[1].args["slots"] = "16-23";
        require_fails(bad, "slots '16-23'");
    }
    {  // The trace names positions the plan does not imply.
        KvSnapshot bad = kv;
        bad.stages[2].appends[0].args["positions"] = "17-24";
        require_fails(bad, "positions 17-24");
    }
    {  // The session lost a position (same block count: the old check passed this).
        KvSnapshot bad = kv;
        bad.stages[1].length = 15;
        require_fails(bad, "the session holds 15 positions");
    }
    {  // An earlier block table entry moved.
        KvSnapshot bad = kv;
        bad.stages[2].block_table[0] = 7;
        require_fails(bad, "an earlier block table entry changed");
    }
    {  // One layer's append went missing.
        KvSnapshot bad = kv;
        bad.stages[0].appends.pop_back();
        require_fails(bad, "'kv append' events for 2 layers");
    }
    {  // A decode step that wrote two positions.
        KvSnapshot bad = kv;
        bad.stages.back().length += 1;
        require_fails(bad, "decode step 2: the session holds");
    }
}

// The shipped model (a trained one: prompt lookup's guesses are sometimes
// right, a random model's never) on the default prompt, which repeats itself.
Model shipped_model() {
    return load_model(std::string(PLAB_TESTS_DIR) + "/../assets/model");
}
ViewerState shipped_state() {
    ViewerState s;
    s.prompt = kDefaultPrompt;
    return s;
}

TEST_CASE("kv self-check: verify steps keep the accepted guesses and make greedy's tokens",
          "[viewer][speculative]") {
    Controller ctrl(shipped_model());
    long long accepted = 0, rolled_back = 0;
    for (int k : {1, 3, 8}) {
        for (int b : {1, 4, 16}) {
            ViewerState st = shipped_state();
            st.block_size = b;
            st.decode_steps = 6;
            st.speculate = k;
            st.draft_ngram = 1;
            KvSnapshot kv;
            ctrl.refresh_kv(st, kv);
            const CheckResult r = check_kv(kv);
            INFO(r.line);
            REQUIRE(r.ok);
            REQUIRE(r.line.find("plain greedy decoding's tokens: yes") != std::string::npos);
            int verify = 0;
            for (const KvStage& s : kv.stages) {
                if (!s.verify) continue;
                ++verify;
                REQUIRE(s.length == s.first_pos + 1 + s.accepted);
                REQUIRE(s.n_pos <= k + 1);
                REQUIRE(s.blocks_verified >= s.blocks_in_use);
                accepted += s.accepted;
                rolled_back += s.blocks_verified - s.blocks_in_use;
            }
            REQUIRE(verify == 6);
            // The tokens the verify steps made, the first one included.
            std::size_t made = 1;
            for (const KvStage& s : kv.stages) made += s.emitted.size();
            REQUIRE(kv.plain_tokens.size() == made);
        }
    }
    REQUIRE(accepted > 0);
    REQUIRE(rolled_back > 0);
}

TEST_CASE("kv self-check fails on a verify step that keeps a rejected guess or makes other tokens",
          "[viewer][speculative]") {
    Controller ctrl(shipped_model());
    ViewerState st = shipped_state();
    st.block_size = 2;
    st.decode_steps = 6;
    st.speculate = 4;
    KvSnapshot kv;
    ctrl.refresh_kv(st, kv);
    REQUIRE(check_kv(kv).ok);
    // A verify step with an accepted guess, and one that rejected a guess.
    int with_accepted = -1, with_rejected = -1;
    for (int i = 0; i < static_cast<int>(kv.stages.size()); ++i) {
        const KvStage& s = kv.stages[static_cast<std::size_t>(i)];
        if (s.verify && s.accepted > 0 && with_accepted < 0) with_accepted = i;
        if (s.verify && s.accepted + 1 < s.n_pos && with_rejected < 0) with_rejected = i;
    }
    REQUIRE(with_accepted >= 0);
    REQUIRE(with_rejected >= 0);
    auto require_fails = [](const KvSnapshot& bad, const char* why) {
        const CheckResult r = check_kv(bad);
        INFO(r.line);
        REQUIRE_FALSE(r.ok);
        REQUIRE(r.line.find(why) != std::string::npos);
    };
    {  // No roll-back: the rejected guess's position kept.
        KvSnapshot bad = kv;
        bad.stages[std::size_t(with_rejected)].length += 1;
        require_fails(bad, "the session holds");
    }
    {  // An accepted guess that is not the token emitted.
        KvSnapshot bad = kv;
        KvStage& s = bad.stages[std::size_t(with_accepted)];
        s.emitted[0] = (s.emitted[0] + 1) % 256;
        require_fails(bad, "accepted guess 1 is not the token emitted");
    }
    {  // Plain greedy decoding made another token.
        KvSnapshot bad = kv;
        bad.plain_tokens.back() = (bad.plain_tokens.back() + 1) % 256;
        require_fails(bad, "the verify steps made other tokens than plain greedy decoding");
    }
    {  // The table before the roll-back does not hold the whole chunk.
        KvSnapshot bad = kv;
        KvStage& s = bad.stages[std::size_t(with_rejected)];
        s.table_verified.resize(s.block_table.size() - 1);
        require_fails(bad, "the table before the roll-back has");
    }
    {  // The roll-back moved a kept block.
        KvSnapshot bad = kv;
        KvStage& s = bad.stages[std::size_t(with_rejected)];
        s.table_verified[0] += 1;
        require_fails(bad, "the roll-back changed logical block 0");
    }
}

// 3. Equivalence ------------------------------------------------------------------------
TEST_CASE("equivalence self-check holds fast rows to 1e-5 of max |logit| and the greedy token",
          "[viewer]") {
    Controller ctrl(tiny_model());
    EquivalenceSnapshot eq;
    ctrl.refresh_equivalence(tiny_state(), eq);
    const CheckResult r = check_equivalence(eq);
    INFO(r.line);
    REQUIRE(r.ok);
    REQUIRE(eq.logit_scale > 0);
    std::size_t fast_row = eq.backends.size();
    for (std::size_t i = 0; i < eq.backends.size(); ++i)
        if (!eq.reference[i]) fast_row = i;
    REQUIRE(fast_row < eq.backends.size());
    const std::size_t cell = fast_row * eq.plans.size() + 1;
    {  // Twice the promise: the old check ignored fast rows and passed this.
        EquivalenceSnapshot bad = eq;
        bad.cells[cell].logits_max_abs = 2e-5 * eq.logit_scale;
        const CheckResult b = check_equivalence(bad);
        INFO(b.line);
        REQUIRE_FALSE(b.ok);
        REQUIRE(b.line.find("more than 1e-5") != std::string::npos);
    }
    {  // Another greedy token although the top two logits are far apart.
        EquivalenceSnapshot bad = eq;
        bad.logit_top2_gap = 1.0;
        bad.cells[cell].same_argmax = false;
        const CheckResult b = check_equivalence(bad);
        INFO(b.line);
        REQUIRE_FALSE(b.ok);
        REQUIRE(b.line.find("another greedy token") != std::string::npos);
    }
    {  // ... which a near tie excuses: the gap is within twice the promise.
        EquivalenceSnapshot tie = eq;
        tie.logit_top2_gap = 1e-5 * eq.logit_scale;
        tie.cells[cell].same_argmax = false;
        REQUIRE(check_equivalence(tie).ok);
    }
    {  // A reference row one bit off.
        EquivalenceSnapshot bad = eq;
        bad.cells[0 * eq.plans.size() + 2].kv_bitwise = false;
        REQUIRE_FALSE(check_equivalence(bad).ok);
    }
    // Issue 48: every cell shows its run's logits digest; a bitwise cell shows
    // cpu-ref's, and a fast row of one difference shows one digest in every plan.
    for (std::size_t i = 0; i < eq.cells.size(); ++i) {
        REQUIRE(eq.digests[i].size() == 8);
        if (eq.cells[i].bitwise()) REQUIRE(eq.digests[i] == eq.reference_digest);
    }
    for (std::size_t c = 1; c < eq.plans.size(); ++c)
        REQUIRE(eq.digests[fast_row * eq.plans.size() + c] ==
                eq.digests[fast_row * eq.plans.size()]);
    {  // A bitwise cell showing another digest (the digest of a wrong row, say).
        EquivalenceSnapshot bad = eq;
        bad.digests[0 * eq.plans.size() + 1] = "00000000";
        const CheckResult b = check_equivalence(bad);
        INFO(b.line);
        REQUIRE_FALSE(b.ok);
        REQUIRE(b.line.find("bitwise but another digest") != std::string::npos);
    }
}

// 4. The snapshot cache (issue 8, item 10) ---------------------------------------------
// Issue 45, point 16: the panel's "why" follows the table. The fast backends'
// kernels are chunk-invariant, so each fast row shows one difference in every
// plan; a planted row whose difference moves with the plan turns the words.
TEST_CASE("equivalence panel's words follow whether fast rows change with the chunk plan",
          "[viewer]") {
    Controller ctrl(tiny_model());
    EquivalenceSnapshot eq;
    ctrl.refresh_equivalence(tiny_state(), eq);
    REQUIRE(eq.plans.size() >= 2);
    REQUIRE(eq.fast_rows_same_in_every_plan());
    std::size_t fast_row = eq.backends.size();
    for (std::size_t r = 0; r < eq.backends.size(); ++r)
        if (!eq.reference[r]) fast_row = r;
    REQUIRE(fast_row < eq.backends.size());
    EquivalenceSnapshot moved = eq;
    moved.cells[fast_row * eq.plans.size() + 1].logits_max_abs *= 2;
    moved.cells[fast_row * eq.plans.size() + 1].logits_max_abs += 1e-7;
    REQUIRE_FALSE(moved.fast_rows_same_in_every_plan());
    // A reference row is not what the words are about.
    EquivalenceSnapshot ref_moved = eq;
    std::size_t ref_row = 0;
    while (!eq.reference[ref_row]) ++ref_row;
    ref_moved.cells[ref_row * eq.plans.size() + 1].kv_max_abs += 1;
    REQUIRE(ref_moved.fast_rows_same_in_every_plan());
}

TEST_CASE("chunk-size slider through more plans than the snapshot cache keeps", "[viewer]") {
    // The equivalence matrix holds cpu-ref's "full" snapshot while it looks up
    // 16 more; a lookup past the cache's limit empties it. The held snapshot must
    // survive that: every cell is checked against the test's own comparison.
    // Against the old cache (a reference into the map) this failed at chunk size
    // 15: the freed snapshot's vectors had a garbage size ("a.size() == b.size()").
    Controller ctrl(tiny_model());
    ViewerState st = tiny_state();
    const Model& model = ctrl.model();
    const std::vector<int32_t> tokens = model.tokenizer->encode(st.prompt, /*add_bos=*/true);
    const int t = static_cast<int>(tokens.size());
    std::map<std::string, std::unique_ptr<Backend>> backends;
    std::map<std::string, std::unique_ptr<DeviceModel>> models;
    for (const std::string& name : backend_names()) {
        backends[name] = make_backend(name);
        models[name] = std::make_unique<DeviceModel>(*backends[name], model.weights);
    }
    const PrefillSnapshot oracle_ref =
        run_prefill_snapshot(*models["cpu-ref"], tokens, ChunkPlan{{t}});
    std::map<std::string, Difference> oracle;  // backend|plan -> difference, never evicted
    auto expected = [&](const std::string& name, const std::string& plan_text) {
        const std::string key = name + "|" + plan_text;
        if (!oracle.count(key))
            oracle[key] = compare_snapshots(
                run_prefill_snapshot(*models[name], tokens, parse_chunk_plan(plan_text, t)),
                oracle_ref);
        return oracle[key];
    };

    Snapshot snap;
    bool failed = false;
    std::size_t cells_checked = 0, most_cached = 0;
    bool emptied = false;
    for (int size = 1; size <= t; ++size) {
        // What the slider does (ui_controls.cpp): new size, new plan text, dirty scenes.
        st.chunk_size = size;
        st.chunks = std::to_string(size);
        Dirty dirty{false, false, false, true, false, false, false, false};  // equivalence alone
        const std::size_t before = ctrl.cached_snapshots();
        ctrl.refresh(st, dirty, snap, /*print_checks=*/false, failed);
        if (ctrl.cached_snapshots() < before) emptied = true;
        most_cached = std::max(most_cached, ctrl.cached_snapshots());
        const EquivalenceSnapshot& eq = snap.equivalence;
        INFO("chunk size " << size << ": " << check_equivalence(eq).line);
        REQUIRE_FALSE(failed);
        REQUIRE(eq.ready);
        REQUIRE(eq.backends.size() == backend_names().size());
        for (std::size_t row = 0; row < eq.backends.size(); ++row)
            for (std::size_t col = 0; col < eq.plans.size(); ++col) {
                const Difference& got = eq.cells[row * eq.plans.size() + col];
                const Difference want = expected(backend_names()[row], eq.plans[col]);
                INFO("row " << eq.backends[row] << ", plan " << eq.plans[col]);
                if (eq.reference[row]) {
                    // Reference rows repeat to the bit: both comparisons say bitwise, 0 apart.
                    REQUIRE(got.bitwise());
                    REQUIRE(want.bitwise());
                    continue;
                }
                // Fast rows: the cpu backend's threads may split sums differently from
                // run to run (measured: 8.9e-7 vs 9.5e-7 for one cell), so the
                // controller's and the test's runs agree within the promise, 1e-5 of
                // max |logit|, not to the bit.
                REQUIRE(std::fabs(got.logits_max_abs - want.logits_max_abs) <=
                        1e-5 * eq.logit_scale);
                REQUIRE(got.same_argmax == want.same_argmax);
            }
        cells_checked += eq.backends.size();
    }
    INFO("snapshots looked up " << cells_checked << ", most cached at once " << most_cached);
    REQUIRE(most_cached <= Controller::kMaxSnapshots + 1);
    REQUIRE(emptied);  // the test really crossed the cache's limit
}

}  // namespace plab::viewer
