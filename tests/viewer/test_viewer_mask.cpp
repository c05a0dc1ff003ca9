// The viewer's mask explorer without a window (issue 9, items 3 and 7).
//
// The mask scene runs the engine under any mask: its self-check must pass on
// the engine's answer for every mask kind and fail on a corrupted copy (a
// visible cell made 0, a hidden cell made non-zero, a tile miscounted). The
// oracles are independent of the check: a window at least as long as the
// prompt is causal (the maps must be bitwise causal's), a refused plan is
// replaced by exactly nearest_valid_plan's, and under window:W the KV blocks
// held after each chunk stay within ceil(W/B)+1, counted from the pool.
#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "app/controller.h"
#include "checks/self_check.h"
#include "core/error.h"
#include "core/kv_layout.h"
#include "model/tokenizers/tokenizer.h"
#include "model/weights.h"
#include "runtime/mask_grammar.h"
#include "runtime/registry.h"
#include "test_util.h"
#include "tiny_model.h"

namespace plab::viewer {
using plab::test::same_bits;
namespace {

// tests/viewer/tiny_model.h
Model tiny_model() {
    return plab::test::tiny_viewer_model();
}

ViewerState tiny_state(const std::string& mask) {
    ViewerState s;
    s.prompt = "the cat sat on the mat";  // 22 bytes + BOS = 23 tokens
    s.mask = mask;
    s.mask_tile = 4;
    return s;
}

MaskSnapshot mask_of(Controller& ctrl, const std::string& spec, const std::string& chunks = "8",
                     const std::string& backend = "cpu-ref") {
    ViewerState st = tiny_state(spec);
    st.chunks = chunks;
    st.backend = backend;
    MaskSnapshot m;
    ctrl.refresh_mask(st, m);
    return m;
}

void require_fails(const MaskSnapshot& bad, const char* why) {
    const CheckResult r = check_mask(bad);
    INFO(r.line);
    REQUIRE_FALSE(r.ok);
    REQUIRE(r.line.find(why) != std::string::npos);
}

}  // namespace

TEST_CASE("mask self-check passes under every mask kind on every backend", "[viewer][mask]") {
    Controller ctrl(tiny_model());
    const char* specs[] = {
        "causal",   "window:5",   "window:4+sink:2",   "chunked:6",    "dilated:3,2",
        "prefix:7", "docs:8,7,8", "window:3|prefix:5", "causal+alibi", "window:6+softcap:5"};
    for (const std::string& backend : backend_names()) {
        for (const char* spec : specs) {
            const MaskSnapshot m = mask_of(ctrl, spec, "8", backend);
            const CheckResult r = check_mask(m);
            INFO(backend << " " << spec << ": " << r.line);
            REQUIRE(r.ok);
            REQUIRE(m.refusal.empty());
            REQUIRE(m.mask.spec() == spec);
            REQUIRE(m.tile == 4);
            REQUIRE(m.tiles.size() == 6u * 6u);  // ceil(23/4)^2
            REQUIRE(m.causal_pairs == 23 * 24 / 2);
        }
    }
}

TEST_CASE("a window as long as the prompt gives causal's maps and token, bitwise",
          "[viewer][mask]") {
    Controller ctrl(tiny_model());
    const MaskSnapshot causal = mask_of(ctrl, "causal");
    const MaskSnapshot wide = mask_of(ctrl, "window:23");
    const MaskSnapshot narrow = mask_of(ctrl, "window:3");
    REQUIRE(wide.maps.size() == causal.maps.size());
    for (std::size_t i = 0; i < causal.maps.size(); ++i)
        REQUIRE(same_bits(wide.maps[i].probs, causal.maps[i].probs));
    REQUIRE(wide.first_token == causal.first_token);
    REQUIRE(wide.visible_pairs == causal.visible_pairs);
    // A short window really changes the engine's answer (the mask reached it).
    REQUIRE_FALSE(same_bits(narrow.maps.back().probs, causal.maps.back().probs));
    REQUIRE(narrow.visible_pairs == 3 * 23 - 3);  // rows 0, 1 see 1, 2 keys; the rest 3
}

TEST_CASE("mask self-check fails on a corrupted snapshot", "[viewer][mask]") {
    Controller ctrl(tiny_model());
    const MaskSnapshot m = mask_of(ctrl, "window:5");
    REQUIRE(check_mask(m).ok);
    const int t = m.n_tokens();
    const Mask mask = m.mask.view();
    {  // A visible cell made 0 (its probability moved onto a neighbour: the row still sums to 1).
        MaskSnapshot bad = m;
        std::vector<float>& p = bad.maps[1].probs;
        const int q = 10;  // sees keys 6..10
        REQUIRE(mask.visible(q, 8));
        p[std::size_t(q) * t + 9] += p[std::size_t(q) * t + 8];
        p[std::size_t(q) * t + 8] = 0.0f;
        require_fails(bad, "query 10 key 8: visible but probability 0");
    }
    {  // A hidden cell made non-zero (taken from a visible one: the row still sums to 1).
        MaskSnapshot bad = m;
        std::vector<float>& p = bad.maps[0].probs;
        const int q = 12;
        REQUIRE_FALSE(mask.visible(q, 2));
        p[std::size_t(q) * t + 2] = 0.25f * p[std::size_t(q) * t + 12];
        p[std::size_t(q) * t + 12] *= 0.75f;
        require_fails(bad, "query 12 key 2: hidden by the mask but probability");
    }
    {  // A tile miscounted: an empty tile (queries 16..19 x keys 0..3) called partial.
        MaskSnapshot bad = m;
        const int n = 6;
        REQUIRE(bad.tiles[4 * n + 0] == TileClass::empty);
        bad.tiles[4 * n + 0] = TileClass::partial;
        require_fails(bad, "tile (4, 0) holds 0 visible of 16 cells");
    }
    {  // A full tile called partial: a kernel would test cells it need not. Under
        // prefix:8, queries 0..3 see keys 4..7 (both inside the prefix): tile (0, 1) is full.
        MaskSnapshot bad = mask_of(ctrl, "prefix:8");
        REQUIRE(check_mask(bad).ok);
        const int n = 6;
        REQUIRE(bad.tiles[0 * n + 1] == TileClass::full);
        bad.tiles[0 * n + 1] = TileClass::partial;
        require_fails(bad, "tile (0, 1) holds 16 visible of 16 cells");
    }
    {  // The pair count off by one.
        MaskSnapshot bad = m;
        bad.visible_pairs += 1;
        require_fails(bad, "visible pairs");
    }
    {  // Chunked differed from full on the reference backend.
        MaskSnapshot bad = m;
        bad.chunked_equals_full = false;
        require_fails(bad, "chunked differs from full on cpu-ref");
    }
}

TEST_CASE("a plan that splits a prefix-LM prefix is refused and the nearest valid plan is run",
          "[viewer][mask]") {
    Controller ctrl(tiny_model());
    const MaskSnapshot m = mask_of(ctrl, "prefix:12", "8");
    const CheckResult r = check_mask(m);
    INFO(r.line);
    REQUIRE(r.ok);
    REQUIRE(m.asked_plan.to_string() == "8,8,7");
    REQUIRE(m.refusal.find("splits the bidirectional prefix (positions 0..11) at position 8") !=
            std::string::npos);
    REQUIRE(m.plan.to_string() == nearest_valid_plan(m.mask.view(), m.asked_plan).to_string());
    REQUIRE(m.plan.to_string() == "12,4,7");
    REQUIRE_NOTHROW(check_plan_for_mask(m.mask.view(), m.plan));
    REQUIRE(m.chunked_equals_full);
    REQUIRE(r.line.find("plan 8,8,7 refused: chunk plan 8,8,7 splits") != std::string::npos);
    REQUIRE(r.line.find("ran plan 12,4,7 instead") != std::string::npos);
    // A plan that keeps the prefix in one chunk runs as asked.
    REQUIRE(mask_of(ctrl, "prefix:8", "8").refusal.empty());
    // The KV and timeline scenes refuse it the same way.
    ViewerState st = tiny_state("prefix:12");
    KvSnapshot kv;
    ctrl.refresh_kv(st, kv);
    REQUIRE(kv.refusal == m.refusal);
    REQUIRE(kv.plan.to_string() == "12,4,7");
    REQUIRE(check_kv(kv).ok);
    TimelineSnapshot tl;
    ctrl.refresh_timeline(st, tl);
    REQUIRE(tl.refusal == m.refusal);
    REQUIRE(tl.plan == "12,4,7");
}

TEST_CASE("a bad mask spec gives the CLI's one line", "[viewer][mask]") {
    Controller ctrl(tiny_model());
    REQUIRE_THROWS_WITH(mask_of(ctrl, "docs:5,7"),
                        Catch::Contains("the document lengths sum to 12 but the prompt has 23"));
    REQUIRE_THROWS_WITH(mask_of(ctrl, "window:0"),
                        Catch::Contains("the window W must be at least 1"));
}

TEST_CASE("under window:W the KV scene frees blocks and holds at most ceil(W/B)+1 per chunk",
          "[viewer][mask]") {
    Controller ctrl(tiny_model());
    const int w = 8, b = 4, c = 8;
    ViewerState st = tiny_state("window:8");
    st.prompt_tokens = 8 * w - 8;  // 56 positions, plus 4 decode steps (max_seq_len 64)
    st.block_size = b;
    st.chunks = std::to_string(c);
    st.decode_steps = 4;
    KvSnapshot kv;
    ctrl.refresh_kv(st, kv);
    const CheckResult r = check_kv(kv);
    INFO(r.line);
    REQUIRE(r.ok);
    const int after_bound = (w + b - 1) / b + 1;           // ceil(W/B)+1
    const int during_bound = (w + c - 1 + b - 1) / b + 1;  // ceil((W+C-1)/B)+1
    for (const KvStage& s : kv.stages) {
        REQUIRE(s.blocks_in_use <= after_bound);
        REQUIRE(s.peak_blocks <= during_bound);
    }
    REQUIRE(kv.stages.back().freed_blocks >= 12);  // 60 positions, the last 8 kept
    // Corrupted: a block a decode step freed reported kept (it keeps its old id),
    // and a block still needed reported freed.
    {
        KvSnapshot bad = kv;
        std::size_t i = bad.stages.size() - 1, lb = 0;
        auto newly_freed = [&](std::size_t st, std::size_t l) {
            return l < bad.stages[st - 1].block_table.size() &&
                   bad.stages[st - 1].block_table[l] != kFreedBlock &&
                   bad.stages[st].block_table[l] == kFreedBlock;
        };
        while (i > 0 && !newly_freed(i, lb))
            if (++lb >= bad.stages[i].block_table.size()) lb = 0, --i;
        REQUIRE(i > 0);
        REQUIRE(bad.stages[i].decode);  // window 8, B 4: each decode step or two frees a block
        KvStage& s = bad.stages[i];
        s.block_table[lb] = bad.stages[i - 1].block_table[lb];
        s.freed_blocks -= 1;
        s.blocks_in_use += 1;
        s.bytes_in_use += static_cast<std::size_t>(b) * bad.bytes_per_token;
        const CheckResult rb = check_kv(bad);
        INFO(rb.line);
        REQUIRE_FALSE(rb.ok);
        REQUIRE(rb.line.find("is kept but no later query can see it") != std::string::npos);
    }
    {
        KvSnapshot bad = kv;
        KvStage& s = bad.stages.back();
        s.block_table.back() = kFreedBlock;
        s.freed_blocks += 1;
        s.blocks_in_use -= 1;
        s.bytes_in_use -= static_cast<std::size_t>(b) * bad.bytes_per_token;
        const CheckResult rb = check_kv(bad);
        INFO(rb.line);
        REQUIRE_FALSE(rb.ok);
        REQUIRE(rb.line.find("was given back but a later query may see it") != std::string::npos);
    }
}

}  // namespace plab::viewer
