// Lesson mode without ImGui: loading the lesson, pressing a Try step, the layout
// self-check (see lesson_pane.h).
#include "app/lesson_pane.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "runtime/scheduler.h"

namespace plab::viewer {
namespace {

template <typename T>
void change(std::string& out, const char* name, const T& a, const T& b) {
    if (a == b) return;
    std::ostringstream s;
    s << std::boolalpha << (out.empty() ? "" : ", ") << name << " " << a << " -> " << b;
    out += s.str();
}

std::string floats(const std::vector<float>& v) {
    std::ostringstream s;
    for (size_t i = 0; i < v.size(); ++i) s << (i ? "," : "") << v[i];
    return s.str();
}

}  // namespace

LessonPane make_lesson_pane(const Options& given) {
    LessonPane pane;
    pane.lesson = given.lesson;
    pane.given = given;
    if (const char* command = lesson_command(given.lesson)) pane.taught_by = command;
    const std::string dir = lessons_dir();
    pane.text = load_lesson(dir, given.lesson);
    std::ifstream in(pane.text.path, std::ios::binary);
    std::ostringstream raw;
    raw << in.rdbuf();
    pane.file_try_lines = count_try_lines(raw.str());
    PLAB_CHECK(given.click_try >= 0 && given.click_try <= pane.text.count(BlockKind::kTry),
               "--click-try " << given.click_try << ": lesson " << given.lesson << " has "
                              << pane.text.count(BlockKind::kTry) << " Try steps (1.."
                              << pane.text.count(BlockKind::kTry) << ")");
    pane.click_index = given.click_try - 1;
    return pane;
}

std::string describe_changes(const ViewerState& a, const ViewerState& b) {
    std::string out;
    change(out, "scene", std::string(scene_name(a.scene)), std::string(scene_name(b.scene)));
    change(out, "chunks", a.chunks, b.chunks);
    change(out, "mask", a.mask, b.mask);
    change(out, "mask tile", a.mask_tile, b.mask_tile);
    change(out, "prompt tokens", a.prompt_tokens, b.prompt_tokens);
    change(out, "prompt", a.prompt, b.prompt);
    change(out, "backend", a.backend, b.backend);
    change(out, "block size", a.block_size, b.block_size);
    change(out, "shared pool", a.serving_view, b.serving_view);
    change(out, "pool blocks", a.serving_kv_blocks, b.serving_kv_blocks);
    change(out, "prefix cache", a.serving_prefix_cache, b.serving_prefix_cache);
    change(out, "policy", policy_name(a.replay.policy), policy_name(b.replay.policy));
    change(out, "rate", a.replay.rate, b.replay.rate);
    change(out, "requests", a.replay.requests, b.replay.requests);
    change(out, "seed", a.replay.seed, b.replay.seed);
    change(out, "token budget", a.replay.token_budget, b.replay.token_budget);
    change(out, "network delay ms", a.replay.network_delay_ms, b.replay.network_delay_ms);
    change(out, "toy values", floats(a.toy.values), floats(b.toy.values));
    change(out, "toy queries", floats(a.toy.queries), floats(b.toy.queries));
    change(out, "toy keys", floats(a.toy.keys), floats(b.toy.keys));
    change(out, "toy chunks", a.toy_chunks, b.toy_chunks);
    change(out, "flash tile", a.flash_tile, b.flash_tile);
    auto step = [](int s) {
        return s == kOpeningStage ? std::string("opening") : std::to_string(s);
    };
    change(out, "step", step(a.stage), step(b.stage));
    change(out, "layer", a.attn_layer, b.attn_layer);
    change(out, "head", a.attn_head, b.attn_head);
    return out;
}

void press_try(LessonPane& pane, int index, const Snapshot& snap, ViewerState& state) {
    int k = 0;
    for (const LessonBlock& b : pane.text.blocks) {
        if (b.kind != BlockKind::kTry) continue;
        if (k++ != index) continue;
        const ViewerState before = state;
        pane.pressed = index;
        ++pane.presses;
        try {
            apply_try(b.args, pane.given, snap, state);
            pane.error.clear();
            pane.changed = describe_changes(before, state);
        } catch (const Error& e) {
            pane.error = e.what();
            pane.changed.clear();
        }
        return;
    }
    PLAB_ASSERT(false);  // the pane only draws buttons for its own Try steps
}

std::string lesson_self_check(const LessonPane& pane, bool& ok) {
    const LessonText& t = pane.text;
    const LessonLayout& l = pane.layout;
    const int n_blocks = static_cast<int>(t.blocks.size());
    const int n_try = t.count(BlockKind::kTry);
    const bool all_laid_out = l.blocks_drawn + l.blocks_hidden == n_blocks && l.blocks_drawn > 0;
    const bool buttons = l.try_buttons == n_try && n_try == pane.file_try_lines;
    const bool alone = !pane.taught_by.empty();
    const bool placed = alone ? l.pane[2] > l.pane[0] && l.text_height > 0 && n_try == 0
                              : l.pane[2] > l.pane[0] && l.panel[2] > l.panel[0] &&
                                    l.pane[2] <= l.panel[0] && l.text_height > 0;
    ok = all_laid_out && buttons && placed;
    std::ostringstream s;
    s << "lesson " << pane.lesson << ": " << t.path << ", " << t.n_lines << " lines -> " << n_blocks
      << " blocks (" << t.count(BlockKind::kHeading) << " headings, " << t.count(BlockKind::kCode)
      << " code blocks, " << t.count(BlockKind::kTable) << " tables, " << n_try
      << " Try steps; the file has " << pane.file_try_lines << " \"Try:\" lines); laid out "
      << l.blocks_drawn << " + " << l.blocks_hidden << " in closed answers, " << l.try_buttons
      << " Try buttons, " << static_cast<int>(l.text_height) << " px of text in a "
      << static_cast<int>(l.pane[2] - l.pane[0]) << " px pane ";
    if (alone)
        s << "alone (no panel: the lesson is taught by `" << pane.taught_by << "`)";
    else
        s << "left of a " << static_cast<int>(l.panel[2] - l.panel[0]) << " px panel";
    s << ": " << (ok ? "yes" : "NO");
    return s.str();
}

}  // namespace plab::viewer
