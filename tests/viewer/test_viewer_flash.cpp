// The FlashAttention scene without a window (lesson 17): the walk the controller asks of
// the engine, the self-check on it and on corrupted copies of it, what the panel's table
// reads after each step, --flash-tile, and the command and numbers `plab flash` must
// reproduce; the same for a model head (--layer/--head: the prompt's head walked in the
// gpu kernel's order).
#include <CLI/CLI.hpp>
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "app/controller.h"
#include "app/flash_view.h"
#include "app/options.h"
#include "app/scene_commands.h"
#include "app/view_command.h"
#include "checks/self_check.h"
#include "core/error.h"
#include "tiny_model.h"

namespace plab::viewer {
namespace {

FlashSnapshot flash_of(Controller& ctrl, const ViewerState& st) {
    FlashSnapshot f;
    ctrl.refresh_flash(st, f);
    f.ready = true;
    return f;
}

// The self-check must say no, naming `why`.
void require_flash_fails(const FlashSnapshot& bad, const std::string& why) {
    const CheckResult r = check_flash(bad);
    INFO(r.line);
    REQUIRE_FALSE(r.ok);
    REQUIRE(r.line.find(why) != std::string::npos);
}

// The first row a rescale re-measured (the walk must have one).
FlashWalkRow* first_rescaled(FlashWalk& w) {
    for (FlashWalkStep& s : w.steps)
        for (FlashWalkRow& r : s.rows)
            if (r.rescaled) return &r;
    return nullptr;
}

// The engine's flash-head tests' shape (tests/engine/test_flash_head.cpp: 2 layers, 4
// query heads over 2 KV heads, Dh 16, 320 positions) with the byte tokenizer.
Model flash_head_model() {
    Model m;
    m.weights = make_random_weights(plab::test::small_config(64, 2, 4, 2, 16, 96, 258, 320), 63);
    m.tokenizer = std::make_unique<ByteTokenizer>();
    m.source = "random model for the flash head, seed 63";
    return m;
}

// Head 2 of layer 1 on 300 tokens: past 256 keys (two segments), query tiles of 64, both
// warp groups, and a chunk of 7 (query tiles of 16).
ViewerState model_head_state() {
    ViewerState st;
    st.flash_model_head = true;
    st.attn_layer = 1;
    st.attn_head = 2;
    st.prompt = "the cat sat on the mat. ";
    st.prompt_tokens = 300;
    st.chunks = "100,7,193";
    return st;
}

// The first row of a later state of the same warp group and segment (its m_old is the m
// the state before left), or nullptr.
FlashWalkRow* second_in_group(FlashWalk& w) {
    const int segment_keys = flash_segment_keys(w.key_tile);
    for (std::size_t i = 0; i < w.steps.size(); ++i)
        for (std::size_t j = 0; j < i; ++j) {
            FlashWalkStep& a = w.steps[j];
            FlashWalkStep& b = w.steps[i];
            if (a.group != b.group || a.key_lo / segment_keys != b.key_lo / segment_keys ||
                a.rows.empty() || b.rows.empty() || a.query_lo != b.query_lo)
                continue;
            for (FlashWalkRow& r : b.rows)
                if (!std::isinf(r.m_old)) return &r;
        }
    return nullptr;
}

}  // namespace

TEST_CASE("flash scene: the toy walked with tiles of 2 passes its self-check", "[viewer]") {
    Controller ctrl(plab::test::tiny_viewer_model());
    ViewerState st;
    const FlashSnapshot f = flash_of(ctrl, st);
    CHECK(f.error.empty());
    CHECK(f.tile == 2);
    CHECK(f.mask == "causal");
    CHECK(f.key == flash_inputs_key(st));
    CHECK(f.walk.chunk_starts == std::vector<int>{0, 2});  // the Toy panel's plan "2"
    const CheckResult r = check_flash(f);
    INFO(r.line);
    REQUIRE(r.ok);
    CHECK(r.line.find("known by hand (2, 3, 14/3, 6)") != std::string::npos);
    CHECK(r.line.find(": yes (toy, tile 2, mask causal, 6 steps, 0 rescales, 0 skipped, 4 of 4 "
                      "outputs bitwise equal)") != std::string::npos);
}

TEST_CASE("flash scene: rising keys rescale and the check still holds", "[viewer]") {
    Controller ctrl(plab::test::tiny_viewer_model());
    ViewerState st;
    st.toy.keys = {1, 2, 3, 4};
    const FlashSnapshot f = flash_of(ctrl, st);
    const CheckResult r = check_flash(f);
    INFO(r.line);
    REQUIRE(r.ok);
    CHECK(f.walk.rescales == 2);
    CHECK(r.line.find("2 rescales") != std::string::npos);
    // Query 0 sees one key: its mean is still known (2); the others' scores differ.
    CHECK(r.line.find("known by hand (2)") != std::string::npos);
}

TEST_CASE("flash scene: a tile the mask leaves empty is skipped and the check holds", "[viewer]") {
    Controller ctrl(plab::test::tiny_viewer_model());
    ViewerState st;
    st.mask = "dilated:2,2";
    st.flash_tile = 1;
    const FlashSnapshot f = flash_of(ctrl, st);
    const CheckResult r = check_flash(f);
    INFO(r.line);
    REQUIRE(r.ok);
    CHECK(f.walk.skipped > 0);
    CHECK(r.line.find("mask dilated:2,2") != std::string::npos);
}

TEST_CASE("flash self-check fails on a broken chain or count or output", "[viewer]") {
    Controller ctrl(plab::test::tiny_viewer_model());
    ViewerState st;
    st.toy.keys = {1, 2, 3, 4};
    const FlashSnapshot f = flash_of(ctrl, st);
    REQUIRE(check_flash(f).ok);
    {
        FlashSnapshot bad = f;
        first_rescaled(bad.walk)->m_old += 0.5f;  // not the m its previous step left
        require_flash_fails(bad, "m_old is not the m the step before left");
    }
    {
        FlashSnapshot bad = f;
        FlashWalkRow* r = first_rescaled(bad.walk);
        r->rescale = std::nextafter(r->rescale, 1.0f);  // one ulp off exp(m_old - m)
        require_flash_fails(bad, "is not exp(m_old - m)");
    }
    {
        FlashSnapshot bad = f;
        first_rescaled(bad.walk)->rescaled = false;  // a rescale the table would not highlight
        require_flash_fails(bad, "'rescaled' does not say");
    }
    {
        FlashSnapshot bad = f;
        bad.walk.rescales += 1;
        require_flash_fails(bad, "the walk counts 3 rescales");
    }
    {
        FlashSnapshot bad = f;
        bad.walk.output[3] = std::nextafter(bad.walk.output[3], 100.0f);
        require_flash_fails(bad, "query 3: the table's last output is not the walk's output");
    }
    {
        FlashSnapshot bad = f;
        bad.walk.steps[0].kind = TileClass::full;  // query 0's tile 0 hides key 1: partial
        require_flash_fails(bad, "step 1: a tile classed full holds 1 of 2 visible cells");
    }
}

TEST_CASE("flash self-check holds the whole softmax to the means known by hand", "[viewer]") {
    Controller ctrl(plab::test::tiny_viewer_model());
    FlashSnapshot bad = flash_of(ctrl, ViewerState{});
    // One ulp off 14/3 in both the whole softmax and the output (so the ulps still agree).
    bad.walk.full[2] = std::nextafter(bad.walk.full[2], 10.0f);
    bad.walk.output[2] = bad.walk.full[2];
    bad.walk.steps[3].rows[0].out = bad.walk.full[2];
    require_flash_fails(bad, "query 2: the whole softmax gives");
}

TEST_CASE("flash panel's table: each query's row after each step", "[viewer]") {
    Controller ctrl(plab::test::tiny_viewer_model());
    const FlashWalk w = flash_of(ctrl, ViewerState{}).walk;
    REQUIRE(w.steps.size() == 6);
    const std::vector<FlashRowState> none = flash_rows_after(w, 0);
    REQUIRE(none.size() == 4);
    for (const FlashRowState& r : none) CHECK_FALSE(r.reached);
    const std::vector<FlashRowState> one = flash_rows_after(w, 1);
    CHECK(one[0].reached);
    CHECK(one[0].step == 0);
    CHECK_FALSE(one[1].reached);
    // After step 3 query 2 has its first tile (keys 0..1): l = 2 keys of weight exp(0).
    const std::vector<FlashRowState> three = flash_rows_after(w, 3);
    CHECK(three[2].reached);
    CHECK(three[2].row.l == 2.0f);
    CHECK(three[2].row.out == 3.0f);  // (2 + 4) / 2 so far
    const std::vector<FlashRowState> all = flash_rows_after(w, 6);
    for (int q = 0; q < 4; ++q) CHECK(all[std::size_t(q)].row.out == w.output[std::size_t(q)]);
    // The grid's cells: query 0's tile 0 covers keys 0..1; key 2 is beyond its reach.
    const std::vector<int> cells = flash_cell_steps(w);
    REQUIRE(cells.size() == 16);
    CHECK(cells[0 * 4 + 1] == 0);
    CHECK(cells[0 * 4 + 2] == -1);
    CHECK(cells[3 * 4 + 3] == 5);
}

TEST_CASE("flash-tile below 1 is refused with one line", "[viewer]") {
    Options o;
    o.flash_tile = 0;
    try {
        state_from_options(o);
        FAIL("--flash-tile 0 was accepted");
    } catch (const Error& e) {
        CHECK(std::string(e.what()).find("--flash-tile 0 must be at least 1") != std::string::npos);
    }
    o.flash_tile = 3;
    CHECK(state_from_options(o).flash_tile == 3);
}

TEST_CASE("flash scene: the plab flash command and the numbers it must reproduce", "[viewer]") {
    Controller ctrl(plab::test::tiny_viewer_model());
    Snapshot snap;
    ViewerState st;
    st.scene = Scene::kFlash;
    st.mask = "window:2";
    snap.flash = flash_of(ctrl, st);
    std::string why_not;
    const std::vector<std::string> words = view_command(st, snap, "assets/model", why_not);
    CHECK(shell_join(words) ==
          "plab flash --tile 2 --q 1,1,1,1 --k 1,1,1,1 --v 2,4,8,10 --mask window:2 --json");
    const std::string numbers = view_numbers(st, snap);
    CHECK(numbers.rfind("flash: " + std::to_string(snap.flash.walk.steps.size()) + " steps, ", 0) ==
          0);
    CHECK(numbers.find("; output 0x1p+1,") != std::string::npos);  // query 0: exactly 2
    CHECK(numbers.find("; full 0x1p+1,") != std::string::npos);
}

TEST_CASE("flash scene: a model head walked in the gpu kernel's order passes its self-check",
          "[viewer]") {
    Controller ctrl(flash_head_model());
    const ViewerState st = model_head_state();
    const FlashSnapshot f = flash_of(ctrl, st);
    REQUIRE(f.error.empty());
    CHECK(f.model_head);
    CHECK(f.key == flash_inputs_key(st));
    CHECK(f.walk.source == "layer 1, head 2");
    CHECK(f.walk.n_queries == 300);
    CHECK(f.plan.to_string() == "100,7,193");
    CHECK(f.walk.chunk_starts == std::vector<int>{0, 100, 107});
    CHECK(f.walk.key_tile == f.head.kernel_key_tile);  // tile 0: the kernel's own
    REQUIRE(f.head.recorded);
    CHECK(f.head.port_matches_kernel);
    CHECK(f.head.vs_gpu.max_ulps == 0);
    bool group_1 = false, segment_1 = false;
    for (const FlashWalkStep& s : f.walk.steps) {
        CHECK(s.query_hi - s.query_lo + 1 <= 64);
        group_1 = group_1 || (s.group == 1 && !s.rows.empty());
        segment_1 = segment_1 || (s.key_lo >= 256 && !s.rows.empty());
    }
    CHECK(group_1);
    CHECK(segment_1);
    const CheckResult r = check_flash(f);
    INFO(r.line);
    REQUIRE(r.ok);
    CHECK(r.line.find("the CPU port equals the emulated kernel bit for bit") != std::string::npos);
    CHECK(r.line.find(": yes (layer 1, head 2, tile ") != std::string::npos);
    CHECK(r.line.find("states read from the emulated kernel, output vs the gpu backend bitwise "
                      "equal: yes") != std::string::npos);
}

TEST_CASE("flash self-check on a model head fails on a broken chain or row or summary",
          "[viewer]") {
    Controller ctrl(flash_head_model());
    const FlashSnapshot f = flash_of(ctrl, model_head_state());
    REQUIRE(check_flash(f).ok);
    {
        FlashSnapshot bad = f;
        FlashWalkRow* r = second_in_group(bad.walk);
        REQUIRE(r != nullptr);
        r->m_old -= 0.5f;  // not the m its warp group left
        require_flash_fails(bad, "m_old is not the m its warp group left in this segment");
    }
    {
        FlashSnapshot bad = f;
        FlashWalkRow* r = second_in_group(bad.walk);
        REQUIRE(r != nullptr);
        r->rescale *= 1.001f;  // a thousandth off exp(m_old - m)
        require_flash_fails(bad, "is not exp(m_old - m) within 1e-6");
    }
    {
        FlashSnapshot bad = f;
        for (FlashWalkStep& s : bad.walk.steps)
            if (!s.rows.empty() && s.query_hi + 1 < bad.walk.n_queries) {
                s.rows[0].query = s.query_hi + 1;  // a row outside its query tile
                break;
            }
        require_flash_fails(bad, "a row outside its query tile");
    }
    {
        FlashSnapshot bad = f;
        bad.head.port_matches_kernel = false;
        require_flash_fails(bad, "the CPU port's states are not the emulated kernel's");
    }
    {
        FlashSnapshot bad = f;
        bad.head.skipped += 1;
        require_flash_fails(bad, "not the run's counts of full, partial and skipped");
    }
}

TEST_CASE("flash scene: a model head at another tile is not recorded and within the tolerance",
          "[viewer]") {
    Controller ctrl(flash_head_model());
    ViewerState st = model_head_state();
    st.flash_head_tile = 16;
    const FlashSnapshot f = flash_of(ctrl, st);
    REQUIRE(f.error.empty());
    CHECK(f.walk.key_tile == 16);
    CHECK_FALSE(f.head.recorded);
    CHECK(f.head.vs_reference.within());
    const CheckResult r = check_flash(f);
    INFO(r.line);
    REQUIRE(r.ok);
    CHECK(r.line.find("tile 16 (the kernel's is ") != std::string::npos);
    CHECK(r.line.find("states from the CPU port of its order (not recorded)") != std::string::npos);
    // Another head, another tile or the toy: other inputs, so the walk is asked again.
    ViewerState other = st;
    other.attn_head = 1;
    CHECK(flash_inputs_key(other) != flash_inputs_key(st));
    other = st;
    other.flash_head_tile = 0;
    CHECK(flash_inputs_key(other) != flash_inputs_key(st));
    other.flash_model_head = false;
    CHECK(flash_inputs_key(other) == flash_inputs_key(ViewerState{}));
}

TEST_CASE("flash scene: --layer or --head opens a model head at the kernel's tile", "[viewer]") {
    auto parse = [](const std::string& args) {
        Options o;
        CLI::App app;
        add_options(app, o);
        app.parse(args, false);
        return state_from_options(o);
    };
    const ViewerState toy = parse("--scene flash");
    CHECK_FALSE(toy.flash_model_head);
    CHECK(toy.flash_tile == 2);
    const ViewerState head = parse("--scene flash --layer 1 --head 2");
    CHECK(head.flash_model_head);
    CHECK(head.flash_head_tile == 0);  // the gpu kernel's own
    CHECK(parse("--scene flash --head 3").flash_model_head);
    const ViewerState tiled = parse("--scene flash --layer 1 --flash-tile 16");
    CHECK(tiled.flash_head_tile == 16);
    CHECK(tiled.flash_tile == 16);
}

TEST_CASE("flash scene: a model head's plab flash command", "[viewer]") {
    Controller ctrl(plab::test::tiny_viewer_model());
    Snapshot snap;
    ViewerState st;
    st.scene = Scene::kFlash;
    st.flash_model_head = true;
    st.attn_layer = 1;
    st.attn_head = 2;
    st.prompt = "abc";
    st.chunks = "2";
    snap.flash = flash_of(ctrl, st);
    REQUIRE(snap.flash.error.empty());
    std::string why_not;
    CHECK(shell_join(view_command(st, snap, "assets/model", why_not)) ==
          "plab flash --model assets/model --prompt abc --layer 1 --head 2 --chunks 2,2 --json");
    st.flash_head_tile = 16;
    st.mask = "window:2";
    snap.flash = flash_of(ctrl, st);
    REQUIRE(snap.flash.error.empty());
    CHECK(shell_join(view_command(st, snap, "assets/model", why_not)) ==
          "plab flash --model assets/model --prompt abc --layer 1 --head 2 --chunks 2,2 --tile "
          "16 --mask window:2 --json");
    CHECK(view_numbers(st, snap).rfind(
              "flash: " + std::to_string(snap.flash.walk.steps.size()) + " steps, ", 0) == 0);
}

}  // namespace plab::viewer
