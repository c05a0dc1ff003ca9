// The layout self-check (issue 45, point 6), without a window: each defect a new user
// found on the classroom screen is planted in a LayoutRecord by hand, and check_layout
// must fail on it with a line that names it; the same record without the defect passes.
// The headless runs (tests/viewer/CMakeLists.txt, viewer.readable.*) check the records
// the viewer really lays out. Also here: where wrapped text may break a line, and the
// shared pool's opening step (issue 45, point 7).
#include <catch2/catch.hpp>
#include <string>

#include "app/controller.h"
#include "app/serving_scenario.h"
#include "checks/layout_record.h"
#include "checks/self_check.h"
#include "model/tokenizers/tokenizer.h"
#include "model/weights.h"
#include "runtime/generate.h"
#include "test_util.h"

namespace plab::viewer {
namespace {

constexpr float kChar = 8;  // pixels per character in the planted records

// A one-line text at x0..x1 drawn into the visible span v0..v1.
LayoutText line(const std::string& where, const std::string& text, float x0, float x1, float v0,
                float v1) {
    LayoutText t;
    t.where = where;
    t.text = text;
    t.rect = LayoutBox{x0, 100, x1, 116};
    t.visible_x0 = v0;
    t.visible_x1 = v1;
    t.widest_word = x1 - x0;
    t.widest_word_text = text;
    return t;
}

// A paragraph wrapped at `wrap` pixels, its lines ending at `ends`.
LayoutText wrapped(const std::string& where, const std::string& text, float wrap,
                   std::vector<std::size_t> ends) {
    LayoutText t = line(where, text, 10, 10 + wrap, 0, 1000);
    t.wrap_width = wrap;
    t.line_ends = std::move(ends);
    t.widest_word = 0;
    return t;
}

LayoutRecord record() {
    LayoutRecord r;
    r.char_width = kChar;
    return r;
}

std::string checked(const LayoutRecord& r, bool want_ok) {
    const CheckResult c = check_layout(r);
    INFO(c.line);
    CHECK(c.ok == want_ok);
    CHECK(c.line.rfind("readable: ", 0) == 0);
    CHECK(c.line.find(want_ok ? ": yes (" : ": NO (") != std::string::npos);
    return c.line;
}

bool has(const std::string& line, const std::string& part) {
    return line.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("layout check: a clean frame passes and counts what it read", "[viewer][layout]") {
    LayoutRecord r = record();
    r.texts.push_back(line("toy panel", "Toy example", 10, 98, 0, 700));
    r.texts.push_back(wrapped("lesson 1", "a query, a key", 80, {8, 14}));
    r.windows.push_back(LayoutWindow{"Prefill Lab"});
    const std::string l = checked(r, true);
    CHECK(has(l, "2 texts, 0 controls"));
    CHECK(has(l, "1 windows"));
}

TEST_CASE("layout check fails on a table squeezed to one character a column", "[viewer][layout]") {
    // Lesson 1's output table at 1280x800: ImGui gave each column 9 pixels.
    LayoutRecord r = record();
    LayoutTable tb;
    tb.where = "toy outputs";
    tb.id = 7;
    tb.headers = {"position", "full prefill"};
    tb.header_widths = {8 * kChar, 12 * kChar};
    tb.widths = {9, 9};
    r.tables.push_back(tb);
    const std::string l = checked(r, false);
    CHECK(has(l,
              "table 'toy outputs': column 'position' has room for 1 character (9 px), its "
              "word 'position' needs 64 px"));
    // A cell's text counts too: the column must hold its widest word.
    r.tables[0].widths = {8 * kChar, 12 * kChar};
    checked(r, true);
    LayoutText cell = line("toy panel", "14/3 = mean of v0..v2", 0, 21 * kChar, 0, 1000);
    cell.table = 7;
    cell.column = 1;
    r.texts.push_back(cell);
    CHECK(has(checked(r, false),
              "column 'full prefill' has room for 12 characters (96 px), its "
              "word '14/3 = mean of v0..v2' needs 168 px"));
}

TEST_CASE("layout check fails on text cut at a window's edge, naming what a reader sees",
          "[viewer][layout]") {
    // Lessons 3 and 13: the mask panel's Try line ran past the panel's right edge.
    LayoutRecord r = record();
    LayoutText t = line("mask panel",
                        "Try: press Home, then the right arrow: each chunk adds its rows. Slide "
                        "chunk size: the colours stay the same.",
                        544, 1320, 544, 1272);
    t.visible_text =
        "Try: press Home, then the right arrow: each chunk adds its rows. Slide chunk size: the "
        "colours stay the sa";
    r.texts.push_back(t);
    const std::string l = checked(r, false);
    CHECK(has(l,
              "text in mask panel is cut off at the right edge: a reader sees '...lide chunk "
              "size: the colours stay the sa'"));
    // Inside the window: no failure.
    r.texts[0].rect.x1 = 1272;
    checked(r, true);
}

TEST_CASE("layout check fails on a word broken mid-word by the wrap", "[viewer][layout]") {
    // ImGui's own wrap breaks after '.': "24." / ".28" at --font-size 24.
    LayoutRecord r = record();
    const std::string text = "chunk 4 of 4: queries 24..28 see cached keys";
    r.texts.push_back(wrapped("mask panel", text, 200, {text.find("..") + 1, text.size()}));
    CHECK(has(checked(r, false),
              "text in mask panel broken mid-word: '24./.28' (200 px of room, about 25 "
              "characters)"));
    // Broken at the blank before "24..28": fine.
    r.texts[0].line_ends = {text.find("24..28") - 1, text.size()};
    checked(r, true);
}

TEST_CASE("layout check fails on a table header broken mid-word", "[viewer][layout]") {
    // Lesson 1's table in the lesson pane: "positi/on".
    LayoutRecord r = record();
    LayoutText h = wrapped("lesson 1", "position", 6 * kChar, {6, 8});
    h.header = true;
    h.table = 3;
    h.column = 0;
    r.texts.push_back(h);
    CHECK(has(checked(r, false),
              "table header in lesson 1 broken mid-word: 'positi/on' (48 px of room, about 6 "
              "characters)"));
    r.texts[0].line_ends = {8};  // on one line
    checked(r, true);
}

TEST_CASE("layout check fails on a control pushed past the edge of the controls row",
          "[viewer][layout]") {
    // --font-size 24: the serving inputs' last slider ran 38 px past the panel.
    LayoutRecord r = record();
    LayoutText c = line("controls", "network ms", 1100, 1310, 544, 1272);
    c.control = true;
    r.texts.push_back(c);
    CHECK(has(checked(r, false),
              "control 'network ms' in controls is cut off at the right edge (38 px out of "
              "view)"));
    r.texts[0].rect = LayoutBox{544, 130, 754, 152};  // flowed onto the next line
    checked(r, true);
}

TEST_CASE("layout check fails on a chart label crossed by a line or clipped by the frame",
          "[viewer][layout]") {
    LayoutChart ch;
    ch.where = "TTFT (ms), sorted";
    ch.rect = LayoutBox{1000, 100, 1220, 400};
    ch.lines.push_back(LayoutLine{"p50 mark", 1150, 130, 1150, 380});
    SECTION("crossed by another mark's line") {
        // The p90 label pushed left by the frame's edge, over the p50 line.
        ch.labels.push_back(LayoutLabel{"p90 29.98", LayoutBox{1120, 140, 1190, 156}});
        LayoutRecord r = record();
        r.charts.push_back(ch);
        CHECK(has(checked(r, false),
                  "chart 'TTFT (ms), sorted': label 'p90 29.98' is crossed by the p50 mark"));
    }
    SECTION("clipped by the chart's frame") {
        ch.labels.push_back(LayoutLabel{"p99 32.41", LayoutBox{1170, 160, 1240, 176}});
        LayoutRecord r = record();
        r.charts.push_back(ch);
        CHECK(has(checked(r, false),
                  "chart 'TTFT (ms), sorted': label 'p99 32.41' is clipped by the chart's "
                  "edge"));
    }
    SECTION("two labels on top of each other") {
        ch.labels.push_back(LayoutLabel{"68.07 ms", LayoutBox{1010, 382, 1070, 398}});
        ch.labels.push_back(LayoutLabel{"85.08 ms", LayoutBox{1050, 382, 1110, 398}});
        LayoutRecord r = record();
        r.charts.push_back(ch);
        CHECK(has(checked(r, false), "labels '68.07 ms' and '85.08 ms' overlap"));
    }
    SECTION("in a band above the plot, clear of every line") {
        ch.labels.push_back(LayoutLabel{"p50 16.48", LayoutBox{1152, 104, 1220, 120}});
        LayoutRecord r = record();
        r.charts.push_back(ch);
        checked(r, true);
    }
}

TEST_CASE("layout check fails on a chart colour without a legend entry", "[viewer][layout]") {
    LayoutRecord r = record();
    LayoutChart ch;
    ch.where = "requests x time";
    ch.rect = LayoutBox{0, 0, 500, 300};
    ch.needs_legend = true;
    ch.mark_colours = {0xFF3CBEFFu, 0xFF5F5FD7u};  // ImU32 of #ffbe3c and #d75f5f
    r.charts.push_back(ch);
    r.legend.push_back(LayoutLegendEntry{"serving panel", 0xFF3CBEFFu, "prompt chunk"});
    CHECK(has(checked(r, false), "chart 'requests x time': colour #d75f5f has no legend entry"));
    r.legend.push_back(LayoutLegendEntry{"serving panel", 0xFF5F5FD7u, "recomputed chunk"});
    checked(r, true);
}

TEST_CASE("layout check fails when the step counter and the caption show different steps",
          "[viewer][layout]") {
    // `--scene kv --serving`: the counter said 11 steps done, the slider "after step 10".
    LayoutRecord r = record();
    r.steps.push_back(LayoutStep{"step counter", 11, "step 11/29"});
    r.steps.push_back(LayoutStep{"engine step slider", 10, "after step 10 of 29"});
    CHECK(has(checked(r, false),
              "the step counter says 'step 11/29' but the engine step slider "
              "says 'after step 10 of 29': not the same step"));
    r.steps[1] = LayoutStep{"engine step slider", 11, "after step 11 of 29"};
    checked(r, true);
}

TEST_CASE("layout check fails on lesson text that scrolls sideways, but a wide diagram may",
          "[viewer][layout]") {
    LayoutRecord r = record();
    LayoutWindow w;
    w.name = "Prefill Lab/lesson_1E4D8A03/lesson_text_0C2B1A9E";
    w.scrolls_sideways = true;
    r.windows.push_back(w);
    CHECK(has(checked(r, false),
              "lesson_text_0C2B1A9E' scrolls sideways: part of it is out of "
              "view"));
    CHECK(has(window_failures(r), "scrolls sideways"));
    r.windows[0].name += "/diagram_00000011";
    r.windows[0].sideways_allowed = true;
    checked(r, true);
    CHECK(window_failures(r).empty());
    r.windows.push_back(LayoutWindow{"Prefill Lab/panel_side_FB5578DA", false, false, 28, 0});
    CHECK(has(checked(r, false),
              "'Prefill Lab/panel_side_FB5578DA' is cut off 28 px at its "
              "right edge"));
}

TEST_CASE("layout check: wrapped text may break at blanks, after a hyphen or a slash only",
          "[viewer][layout]") {
    const std::string s = "the prefill-and-decode path src/runtime/forward.cpp is 4e-7 or 2.4";
    auto at = [&](const std::string& before) { return s.find(before) + before.size(); };
    CHECK(break_allowed(s, at("the")));         // before a blank
    CHECK(break_allowed(s, at("the ")));        // after it
    CHECK(break_allowed(s, at("prefill-")));    // between two letters after a hyphen
    CHECK(break_allowed(s, at("src/")));        // after a slash
    CHECK_FALSE(break_allowed(s, at("pref")));  // inside a word
    CHECK_FALSE(break_allowed(s, at("4e-")));   // inside a number
    CHECK_FALSE(break_allowed(s, at("2.")));    // ImGui would break here
    CHECK_FALSE(break_allowed(s, at("forward.")));
    const std::string url = "https://arxiv.org/abs/2308.16369";
    CHECK_FALSE(break_allowed(url, 7));  // between the two slashes of "https://"
    CHECK_FALSE(break_allowed(url, 6));
    CHECK(break_allowed(url, url.find("abs/") + 4));
}

TEST_CASE("viewer serving: the shared pool opens at the first step with the most shared blocks",
          "[viewer][serving][layout]") {
    // issue 45, point 7: `--scene kv --serving` used to open at the last step, where every
    // request has finished and every block is free. The opening step is computed from the
    // run: it shares blocks, no step shares more, and no earlier step shares as many.
    Model m;
    m.weights = make_random_weights(test::small_config(32, 2, 4, 2, 8, 48, 258, 192), 2026);
    m.tokenizer = std::make_unique<ByteTokenizer>();
    Controller ctrl(std::move(m));
    ViewerState st;
    st.prompt = kDefaultPrompt;
    ServingSnapshot sv;
    ctrl.refresh_serving(st, sv);
    REQUIRE(sv.stages.size() > 2);
    const int k = opening_stage(sv);
    INFO("opening step " << k << " of " << sv.n_steps());
    REQUIRE(k > 0);
    REQUIRE(k < sv.n_steps());  // not the last, all-free step
    const int shared = shared_blocks(sv.stages[static_cast<std::size_t>(k)]);
    REQUIRE(shared > 0);
    for (std::size_t i = 0; i < sv.stages.size(); ++i) {
        const int n = shared_blocks(sv.stages[i]);
        CHECK(n <= shared);
        if (static_cast<int>(i) < k) CHECK(n < shared);
    }
    REQUIRE(shared_blocks(sv.stages.back()) == 0);
    // With the prefix cache off nothing is shared: the pool opens before the first step.
    st.serving_prefix_cache = false;
    ServingSnapshot off;
    ctrl.refresh_serving(st, off);
    CHECK(opening_stage(off) == 0);
}

}  // namespace plab::viewer
