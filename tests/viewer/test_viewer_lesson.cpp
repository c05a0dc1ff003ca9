// Lesson mode without a window (issue 15, item 4): the Markdown blocks the pane
// draws, the "Try:" convention, and that pressing a Try step changes what the
// panel draws — the engine's snapshot after the press is the one the step's own
// command asks for, read back from the command's words, not written here.
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "app/controller.h"
#include "app/lesson_pane.h"
#include "app/lesson_text.h"
#include "app/options.h"
#include "core/error.h"
#include "runtime/chunk_plan.h"
#include "runtime/scheduler.h"
#include "tiny_model.h"

namespace plab::viewer {
namespace {

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::vector<const LessonBlock*> try_steps(const LessonText& t) {
    std::vector<const LessonBlock*> out;
    for (const LessonBlock& b : t.blocks)
        if (b.kind == BlockKind::kTry) out.push_back(&b);
    return out;
}

// The value after `flag` in a Try command's words ("" when absent).
std::string flag_value(const std::vector<std::string>& args, const std::string& flag) {
    for (size_t i = 0; i + 1 < args.size(); ++i)
        if (args[i] == flag) return args[i + 1];
    return "";
}

// The state `plab-viewer --lesson n` opens.
ViewerState lesson_state(const Options& given) {
    return state_from_options(with_lesson(given));
}

// The flags of `plab-viewer --lesson n --prompt P`; the tiny model's byte tokenizer
// makes the default test prompt 23 tokens (22 bytes and BOS).
Options lesson_options(int n, const std::string& prompt = "the cat sat on the mat") {
    Options o;
    o.lesson = n;
    o.prompt = prompt;
    return o;
}

// tests/viewer/tiny_model.h with room for lesson 13's 96-token prompt and the
// Serving panel's longest prompts.
Model tiny_model() {
    return test::tiny_viewer_model(256, 2027);
}

// A lesson in the shapes the lessons use, for the parser's own tests.
const char* kSample = R"(# Lesson 9 — A **sample**

First paragraph, *two*
lines; 2 * 3 stays, T*T too.

* item one
  continued
* item two

1. Step one [see](02-x.md).

   <!-- expect
   $ plab toy
   out {{o2=4.5}} and {{ttft~}} in [[1e-8..1e-5]] ms
   -->
   ```console
   $ plab toy
   out 4.5 and 0.25 in 3e-06 ms
   ```

   After the code.

| a | b |
|---|---|
| `x|y` | 2 |

<!-- check: a == b
     second line -->
---
![The panel](../assets/p.png)

<details>
<summary>Answers (checked)</summary>

Hidden answer.

</details>

- Try: chunks of 4 — `plab-viewer --lesson 9 --chunks 4`
Try: a window,
  then more: `plab-viewer --lesson 9 --mask window:4`
)";

}  // namespace

TEST_CASE("lesson parser: every Markdown shape the lessons use", "[viewer][lesson]") {
    const LessonText t = parse_lesson(kSample, "sample.md", 9);
    REQUIRE(t.title == "Lesson 9 — A sample");
    std::vector<BlockKind> kinds;
    for (const LessonBlock& b : t.blocks) kinds.push_back(b.kind);
    using K = BlockKind;
    const std::vector<K> want = {K::kHeading,    K::kParagraph, K::kBullet,       K::kBullet,
                                 K::kNumbered,   K::kCode,      K::kParagraph,    K::kTable,
                                 K::kRule,       K::kPicture,   K::kDetailsBegin, K::kParagraph,
                                 K::kDetailsEnd, K::kTry,       K::kTry};
    REQUIRE(kinds == want);
    const auto& b = t.blocks;
    CHECK(b[1].text == "First paragraph, two lines; 2 * 3 stays, T*T too.");
    CHECK(b[2].text == "item one continued");
    CHECK(b[4].marker == "1.");
    CHECK(b[4].text == "Step one see (02-x.md).");
    // Indented code inside an item: the indent is removed, the shown run kept as
    // written, and the template above it (an HTML comment) not shown at all.
    CHECK(b[5].marker == "console");
    CHECK(b[5].level == 1);
    CHECK(b[5].text == "$ plab toy\nout 4.5 and 0.25 in 3e-06 ms");
    CHECK(b[6].level == 1);  // the item's paragraph after its code
    CHECK(b[6].text == "After the code.");
    REQUIRE(b[7].cells.size() == 2);                                 // the separator row dropped
    CHECK(b[7].cells[1] == std::vector<std::string>{"`x|y`", "2"});  // '|' in code kept
    CHECK(b[9].text == "The panel");
    CHECK(b[9].marker == "../assets/p.png");
    CHECK(b[10].text == "Answers (checked)");
    CHECK(b[13].text == "chunks of 4");
    CHECK(b[13].args == std::vector<std::string>{"--lesson", "9", "--chunks", "4"});
    CHECK(b[14].text == "a window, then more");  // a Try line wrapped onto the next line
    CHECK(b[14].command == "plab-viewer --lesson 9 --mask window:4");
    CHECK(count_try_lines(kSample) == 2);
}

TEST_CASE("lesson parser: a malformed Try step is refused with file and line", "[viewer][lesson]") {
    const auto refuses = [](const char* md, const char* why) {
        try {
            parse_lesson(md, "x.md", 3);
            FAIL("accepted: " << md);
        } catch (const Error& e) {
            INFO(e.what());
            CHECK(std::string(e.what()).find(why) != std::string::npos);
            CHECK(std::string(e.what()).find("x.md:2") != std::string::npos);
        }
    };
    refuses("text\n- Try: chunks of 4\n", "must end in a code span");
    refuses("text\n- Try: chunks of 4 `plab --chunks 4`\n", "must start with plab-viewer --lesson");
    refuses("text\n- Try: chunks of 4 `plab-viewer --lesson 4 --chunks 4`\n",
            "opens lesson 4, but this is lesson 3");
    refuses("text\n- Try: `plab-viewer --lesson 3 --chunks 4`\n", "says nothing before");
    refuses("text\n```console\n$ plab toy\n", "never closed");
}

TEST_CASE("inline text: emphasis dropped, links and pictures spelled out", "[viewer][lesson]") {
    CHECK(inline_text("a **bold** and *it*, (*x*)") == "a bold and it, (x)");
    CHECK(inline_text("`a*b*` stays as code") == "`a*b*` stays as code");
    CHECK(inline_text("[Lesson 2](02-kv.md).") == "Lesson 2 (02-kv.md).");
    CHECK(inline_text("![alt](p.png)") == "picture: alt (p.png)");
    CHECK(inline_text("T*T, 2 * 3, x**2 y") == "T*T, 2 * 3, x2 y");
    // A closer after punctuation (lesson 6 opens so): dropped like any other.
    CHECK(inline_text("**Prefill cost.** For T tokens") == "Prefill cost. For T tokens");
    CHECK(inline_text("see *this*.") == "see this.");
    // The lesson runner's inline annotations are comments: invisible.
    CHECK(inline_text("holds 66<!--= pairs + 11 --> pairs") == "holds 66 pairs");
    CHECK(inline_text("3.35 TB/s <!--quoted: a datasheet --> of HBM3") == "3.35 TB/s  of HBM3");
}

TEST_CASE("every lesson with a panel has Try steps that parse, and each one changes the panel",
          "[viewer][lesson]") {
    Controller ctrl(tiny_model());
    Snapshot snap;
    ctrl.fill_model_info(snap);
    const std::string dir = lessons_dir();
    for (int n : lessons_with_panels()) {
        const LessonText t = load_lesson(dir, n);
        const std::vector<const LessonBlock*> steps = try_steps(t);
        INFO("lesson " << n << " (" << t.path << ")");
        CHECK(!t.title.empty());
        CHECK(t.count(BlockKind::kHeading) >= 1);
        // The parser finds exactly the Try lines a plain count finds, and each lesson with
        // a panel has at least one.
        CHECK(static_cast<int>(steps.size()) == count_try_lines(read_all(t.path)));
        CHECK(!steps.empty());
        const Options given = lesson_options(n);
        const ViewerState base = lesson_state(given);
        for (const LessonBlock* step : steps) {
            INFO("Try at line " << step->line << ": " << step->command);
            ViewerState s = base;
            apply_try(step->args, given, snap, s);
            CHECK(!describe_changes(base, s).empty());
            // The press re-asks the engine for every scene.
            CHECK((s.dirty.toy && s.dirty.mask && s.dirty.kv && s.dirty.replay));
            // What the command names is what the state now holds.
            if (const std::string c = flag_value(step->args, "--chunks"); !c.empty())
                CHECK(s.chunks == c);
            if (const std::string m = flag_value(step->args, "--mask"); !m.empty())
                CHECK(s.mask == m);
            if (const std::string p = flag_value(step->args, "--policy"); !p.empty())
                CHECK(policy_name(s.replay.policy) == p);
            if (const std::string sc = flag_value(step->args, "--scene"); !sc.empty())
                CHECK(std::string(scene_name(s.scene)) == sc);
            else
                CHECK(s.scene == base.scene);  // the lesson's panel stays
        }
    }
}

// Issue 43: the lesson pane shows the numbers a real run printed, never the
// runner's markers ({{name}}, [[a..b]], [[gpu-form]]) nor a "…" standing for a
// number: the student is asked to check those numbers by hand.
TEST_CASE("the lesson pane shows every lesson's numbers, no checker markup", "[viewer][lesson]") {
    const std::regex marker(
        "\\{\\{[A-Za-z_]|\\[\\[gpu-form\\]\\]|\\[\\[[-+0-9.eE]+\\.\\.[-+0-9.eE]+\\]\\]");
    const std::string dir = lessons_dir();
    int lessons = 0, code_blocks = 0;
    for (int n = 1; n <= 99; ++n) {
        LessonText t;
        try {
            t = load_lesson(dir, n);
        } catch (const Error&) {
            break;  // the lessons are numbered 1..N without a gap
        }
        ++lessons;
        for (const LessonBlock& b : t.blocks) {
            INFO(t.path << ":" << b.line);
            std::vector<std::string> texts{b.text};
            for (const auto& row : b.cells) texts.insert(texts.end(), row.begin(), row.end());
            for (const std::string& text : texts) {
                CHECK(!std::regex_search(text, marker));
                CHECK(text.find("<!--") == std::string::npos);  // no annotation shown
            }
            // A console block is a run; "…" alone stands for lines left out. (A
            // diagram may say "chunk, chunk, …".)
            if (b.kind != BlockKind::kCode || b.marker != "console") continue;
            ++code_blocks;
            std::istringstream lines(b.text);
            for (std::string l; std::getline(lines, l);) {
                INFO(l);
                CHECK((l.find("\xE2\x80\xA6") == std::string::npos ||
                       l.substr(l.find_first_not_of(' ')) == "\xE2\x80\xA6"));
            }
        }
    }
    CHECK(lessons >= 15);
    CHECK(code_blocks >= 50);
}

TEST_CASE("lessons without a panel open as text alone, naming the command that teaches them",
          "[viewer][lesson]") {
    const auto outcome = [](int n) {
        try {
            with_lesson(lesson_options(n));
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    const std::pair<int, const char*> taught[] = {{6, "plab bench"},
                                                  {8, "plab bench --batch"},
                                                  {12, "plab serve --disaggregate"},
                                                  {16, "plab generate --logits-digest"}};
    for (const auto& [n, command] : taught) {
        INFO("lesson " << n);
        CHECK(lesson_panel(n) == nullptr);
        REQUIRE(lesson_command(n) != nullptr);
        CHECK(std::string(lesson_command(n)) == command);
        CHECK(outcome(n) == "accepted");
        const LessonPane pane = make_lesson_pane(with_lesson(lesson_options(n)));
        CHECK(pane.taught_by == command);
        CHECK(pane.text.blocks.size() > 10);  // the whole lesson, read and parsed
        // Their text has no Try step (there is no panel for one to drive).
        CHECK(count_try_lines(read_all(lesson_file(lessons_dir(), n))) == 0);
    }
    for (int n : lessons_with_panels()) CHECK(lesson_command(n) == nullptr);
    const std::string bad = outcome(99);
    CHECK(bad.find("--lesson 99 is not a lesson with a panel (panels: lessons 1-5, 7, 9-11, "
                   "13-15, 17, 18; taught by a command: 6, 8, 12, 16)") != std::string::npos);
}

TEST_CASE("pressing a Try step changes the snapshot the panel draws", "[viewer][lesson]") {
    Controller ctrl(tiny_model());
    Snapshot snap;
    ctrl.fill_model_info(snap);

    SECTION("lesson 3: the mask panel runs the step's chunk plan over the step's prompt length") {
        LessonPane pane = make_lesson_pane(lesson_options(3));
        ViewerState state = lesson_state(pane.given);
        ctrl.refresh_mask(state, snap.mask);
        const ChunkPlan before = snap.mask.plan;
        const LessonBlock& step = *try_steps(pane.text).at(0);
        const int t = std::stoi(flag_value(step.args, "--prompt-tokens"));
        const ChunkPlan want = parse_chunk_plan(flag_value(step.args, "--chunks"), t);
        press_try(pane, 0, snap, state);
        INFO(pane.error);
        REQUIRE(pane.error.empty());
        REQUIRE(pane.changed.find("chunks 8 -> " + flag_value(step.args, "--chunks")) !=
                std::string::npos);
        ctrl.refresh_mask(state, snap.mask);
        CHECK(snap.mask.n_tokens() == t);
        CHECK(snap.mask.plan.lengths == want.lengths);
        CHECK(snap.mask.plan.lengths != before.lengths);
    }
    SECTION("lesson 13: the last step opens the KV panel under its mask, blocks freed") {
        LessonPane pane = make_lesson_pane(lesson_options(13));
        ViewerState state = lesson_state(pane.given);
        const std::vector<const LessonBlock*> steps = try_steps(pane.text);
        const int last = static_cast<int>(steps.size()) - 1;
        press_try(pane, last, snap, state);
        REQUIRE(pane.error.empty());
        REQUIRE(state.scene == Scene::kKv);
        ctrl.refresh_kv(state, snap.kv);
        CHECK(snap.kv.block_size == std::stoi(flag_value(steps[last]->args, "--block-size")));
        CHECK(snap.kv.mask.spec() == flag_value(steps[last]->args, "--mask"));
    }
    SECTION("lesson 18: the KV panel's decode steps verify guesses, the last step eight") {
        LessonPane pane = make_lesson_pane(lesson_options(18));
        ViewerState state = lesson_state(pane.given);
        REQUIRE(state.scene == Scene::kKv);
        CHECK(state.speculate == 4);  // the lesson's panel setting
        const std::vector<const LessonBlock*> steps = try_steps(pane.text);
        REQUIRE(steps.size() == 2);
        press_try(pane, 1, snap, state);
        INFO(pane.error);
        REQUIRE(pane.error.empty());
        CHECK(state.speculate == std::stoi(flag_value(steps[1]->args, "--speculate")));
        ctrl.refresh_kv(state, snap.kv);
        int verify = 0;
        for (const KvStage& s : snap.kv.stages) verify += s.verify ? 1 : 0;
        CHECK(verify == state.decode_steps);
        CHECK(snap.kv.block_size == std::stoi(flag_value(steps[1]->args, "--block-size")));
    }
    SECTION("lesson 9: the Serving panel replays under the step's policy") {
        LessonPane pane = make_lesson_pane(lesson_options(9));
        ViewerState state = lesson_state(pane.given);
        state.replay.requests = 4;  // a short replay: the policy is what is checked
        ctrl.refresh_replay(state, snap.replay);
        const std::string before = snap.replay.policy;
        press_try(pane, 0, snap, state);
        REQUIRE(pane.error.empty());
        state.replay.requests = 4;
        ctrl.refresh_replay(state, snap.replay);
        CHECK(snap.replay.policy == flag_value(try_steps(pane.text)[0]->args, "--policy"));
        CHECK(snap.replay.policy != before);
    }
}

TEST_CASE("a Try command that is not a panel setting is refused and changes nothing",
          "[viewer][lesson]") {
    Controller ctrl(tiny_model());
    Snapshot snap;
    ctrl.fill_model_info(snap);
    const Options given = lesson_options(3);
    const ViewerState base = lesson_state(given);
    const auto refused = [&](std::vector<std::string> args, const char* why) {
        ViewerState s = base;
        try {
            apply_try(args, given, snap, s);
            FAIL("accepted");
        } catch (const Error& e) {
            INFO(e.what());
            CHECK(std::string(e.what()).find(why) != std::string::npos);
        }
        CHECK(describe_changes(base, s).empty());
        CHECK(s.chunks == base.chunks);
    };
    refused({"--lesson", "3", "--chunks", "4", "--screenshot", "x.png"},
            "--screenshot is not a panel setting");
    refused({"--lesson", "3", "--chunks", "4", "--model", "elsewhere"},
            "--model is not a panel setting");
    refused({"--lesson", "3", "--chunks", "4", "--mask", "window:0"},
            "window W must be at least 1");
    refused({"--lesson", "3", "--layer", "99"}, "--layer/--head out of range");
    refused({"--lesson", "3", "--chunks"}, "--chunks");
}

TEST_CASE("lesson self-check: passes on a full layout, fails on each kind of gap",
          "[viewer][lesson]") {
    LessonPane pane;
    pane.lesson = 9;
    pane.text = parse_lesson(kSample, "sample.md", 9);
    pane.file_try_lines = count_try_lines(kSample);
    const int n = static_cast<int>(pane.text.blocks.size());
    LessonLayout good;
    good.blocks_drawn = n - 2;  // the hidden answer and its </details>
    good.blocks_hidden = 2;
    good.try_buttons = 2;
    good.text_height = 900;
    const float pane_rect[4] = {0, 30, 500, 800}, panel_rect[4] = {506, 30, 1280, 800};
    std::copy(pane_rect, pane_rect + 4, good.pane);
    std::copy(panel_rect, panel_rect + 4, good.panel);
    bool ok = false;
    pane.layout = good;
    const std::string line = lesson_self_check(pane, ok);
    INFO(line);
    CHECK(ok);
    CHECK(line.find(std::to_string(n) + " blocks") != std::string::npos);
    CHECK(line.find("2 Try steps; the file has 2") != std::string::npos);

    const auto fails = [&](LessonLayout bad) {
        pane.layout = bad;
        bool bad_ok = true;
        INFO(lesson_self_check(pane, bad_ok));
        CHECK_FALSE(bad_ok);
    };
    LessonLayout missing_block = good;
    --missing_block.blocks_drawn;
    fails(missing_block);
    LessonLayout missing_button = good;
    missing_button.try_buttons = 1;
    fails(missing_button);
    LessonLayout overlapping = good;
    overlapping.panel[0] = 400;
    fails(overlapping);
    LessonLayout empty = good;
    empty.text_height = 0;
    fails(empty);
    pane.layout = good;
    pane.file_try_lines = 3;  // the file has a Try line the parser missed
    fails(good);

    // A lesson taught by a command: the pane alone fills the window; it passes
    // with no panel, but a Try step (no panel to drive) or no text fails it.
    pane.taught_by = "plab bench";
    pane.file_try_lines = count_try_lines(kSample);
    LessonLayout alone = good;
    for (float& v : alone.panel) v = 0;
    alone.pane[2] = 1280;
    pane.layout = alone;
    bool alone_ok = false;
    const std::string alone_line = lesson_self_check(pane, alone_ok);
    INFO(alone_line);
    CHECK_FALSE(alone_ok);  // kSample has Try steps: they would drive no panel
    CHECK(alone_line.find("alone (no panel: the lesson is taught by `plab bench`)") !=
          std::string::npos);
    pane.text =
        parse_lesson("# Lesson 9\n\nWords.\n\n```console\n$ plab bench\n```\n", "alone.md", 9);
    pane.file_try_lines = 0;
    alone.blocks_drawn = static_cast<int>(pane.text.blocks.size());
    alone.blocks_hidden = 0;
    alone.try_buttons = 0;
    pane.layout = alone;
    CHECK((lesson_self_check(pane, alone_ok), alone_ok));
    LessonLayout no_text = alone;
    no_text.text_height = 0;
    fails(no_text);
}

}  // namespace plab::viewer
