// plab-viewer's flags -> ViewerState (see options.h).
#include "app/options.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "app/controller.h"
#include "app/scenes.h"
#include "core/error.h"
#include "runtime/generate.h"
#include "runtime/mask_grammar.h"
#include "runtime/speculative.h"

namespace plab::viewer {
namespace {

// A lesson's panel and settings, one line each; a lesson added with a panel is one
// more line here (and its "Try:" steps in its text), one without a panel a line of
// kLessonCommands.
constexpr LessonPanel kLessonPanels[] = {
    {1, Scene::kToy},
    {2, Scene::kKv},
    {3, Scene::kMask},
    {4, Scene::kEquivalence},
    {5, Scene::kTimeline},
    {7, Scene::kKv, true},
    {9, Scene::kServing, false, "continuous"},
    {10, Scene::kServing, false, "chunked"},
    {11, Scene::kServing, false, "chunked", 2.0},
    {13, Scene::kMask, false, nullptr, -1, "window:8"},
    {14, Scene::kKv},
    {15, Scene::kEquivalence},  // the fast rows: one difference in every plan
    {17, Scene::kFlash},        // the toy's walk; a model head with --layer/--head
    {18, Scene::kKv, false, nullptr, -1, nullptr, 4},  // verify steps: rows, then a roll-back
};

// The lessons a command teaches instead of a panel (what --lesson N points to).
struct LessonCommand {
    int lesson;
    const char* command;
};
constexpr LessonCommand kLessonCommands[] = {
    {6, "plab bench"},  // compute vs memory
    {8, "plab bench --batch"},
    {12, "plab serve --disaggregate"},
    {16, "plab generate --logits-digest"},  // same request, same bits
};

// "1-5, 7, 9-11, 13-15": the lessons with a panel, runs of consecutive numbers joined.
std::string panel_ranges() {
    const std::vector<int> n = lessons_with_panels();
    std::ostringstream s;
    for (size_t i = 0; i < n.size();) {
        size_t j = i;
        while (j + 1 < n.size() && n[j + 1] == n[j] + 1) ++j;
        s << (i ? ", " : "") << n[i];
        if (j > i) s << (j > i + 1 ? "-" : ", ") << n[j];
        i = j + 1;
    }
    return s.str();
}

// "6, 8, 12": the lessons a command teaches.
std::string command_lessons() {
    std::ostringstream s;
    for (const LessonCommand& c : kLessonCommands) s << (s.tellp() > 0 ? ", " : "") << c.lesson;
    return s.str();
}

// The flags a "Try:" command may give: the panel's inputs, nothing about the window,
// the model or the run (a lesson's button must not write files or reload a model).
constexpr const char* kTryFlags[] = {
    "--lesson",     "--scene",      "--prompt",    "--prompt-tokens", "--chunks",
    "--backend",    "--mask",       "--mask-tile", "--values",        "--queries",
    "--keys",       "--toy-chunks", "--step",      "--layer",         "--head",
    "--block-size", "--serving",    "--kv-blocks", "--prefix-cache",  "--policy",
    "--rate",       "--requests",   "--seed",      "--token-budget",  "--network-delay-ms",
    "--flash-tile", "--speculate",  "--draft"};

}  // namespace

const char* lesson_command(int n) {
    for (const LessonCommand& c : kLessonCommands)
        if (c.lesson == n) return c.command;
    return nullptr;
}

const LessonPanel* lesson_panel(int n) {
    for (const LessonPanel& p : kLessonPanels)
        if (p.lesson == n) return &p;
    return nullptr;
}

std::vector<int> lessons_with_panels() {
    std::vector<int> out;
    for (const LessonPanel& p : kLessonPanels) out.push_back(p.lesson);
    return out;
}

std::vector<float> parse_floats(const std::string& text, const char* what) {
    std::vector<float> out;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        try {
            size_t used = 0;
            out.push_back(std::stof(item, &used));
            PLAB_CHECK(used == item.size(), "");
        } catch (const std::exception&) {
            PLAB_CHECK(false,
                       what << ": '" << item << "' is not a number (expected e.g. 2,4,8,10)");
        }
    }
    return out;
}

// text and scale
float parse_scale(const std::string& text) {
    float s = 0;
    std::size_t used = 0;
    try {
        s = std::stof(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    // Not NaN, not "2x", and within the range the layout is made for.
    PLAB_CHECK(used == text.size() && used > 0 && s >= kScaleMin && s <= kScaleMax,
               "--scale '" << text << "': give a factor between " << kScaleMin << " and "
                           << kScaleMax << " (1 = 100%, 2 = twice the size for a projector)");
    return s;
}

Options with_lesson(Options o) {
    if (o.lesson == 0) return o;
    const LessonPanel* found = lesson_panel(o.lesson);
    if (found == nullptr) {
        PLAB_CHECK(lesson_command(o.lesson) != nullptr,
                   "--lesson " << o.lesson << " is not a lesson with a panel (panels: lessons "
                               << panel_ranges() << "; taught by a command: " << command_lessons()
                               << ")");
        return o;  // its text alone, naming the command (lesson_pane.h)
    }
    o.scene = scene_name(found->scene);
    o.serving = o.serving || found->serving_view;
    const Options defaults;
    if (found->policy != nullptr && o.policy == defaults.policy) o.policy = found->policy;
    if (found->network_delay_ms >= 0 && o.network_delay_ms == defaults.network_delay_ms)
        o.network_delay_ms = found->network_delay_ms;
    if (found->mask != nullptr && o.mask == defaults.mask) o.mask = found->mask;
    if (found->speculate > 0 && o.speculate == defaults.speculate) o.speculate = found->speculate;
    return o;
}

ViewerState state_from_options(const Options& opt) {
    const std::optional<Scene> scene = parse_scene(opt.scene);
    PLAB_CHECK(scene, "unknown scene '" << opt.scene << "' (valid: " << scene_names() << ")");
    ViewerState state;
    state.scene = *scene;
    state.prompt = !opt.prompt_file.empty() ? read_prompt_file(opt.prompt_file)
                   : !opt.prompt.empty()    ? opt.prompt
                                            : plab::kDefaultPrompt;
    PLAB_CHECK(opt.prompt_tokens >= 0, "--prompt-tokens must be >= 0");
    state.prompt_tokens = opt.prompt_tokens;
    if (!opt.chunks.empty()) {
        state.chunks = opt.chunks;
        state.chunk_size = std::atoi(opt.chunks.c_str());
    }
    state.backend = opt.backend;
    // The spec is checked here, before any window opens: the CLI's one line.
    parse_mask_spec(opt.mask);
    state.mask = opt.mask;
    PLAB_CHECK(opt.mask_tile >= 1 && opt.mask_tile <= 256,
               "--mask-tile " << opt.mask_tile << " must be between 1 and 256 positions");
    state.mask_tile = opt.mask_tile;
    state.block_size = opt.block_size;
    PLAB_CHECK(opt.speculate >= 0 && opt.speculate <= kMaxSpeculate,
               "--speculate " << opt.speculate << ": guesses per verify step, from 1 to "
                              << kMaxSpeculate << " (0: plain decode steps)");
    state.speculate = opt.speculate;
    const DraftSource draft = parse_draft_source(opt.draft);
    PLAB_CHECK(draft.ngram > 0, "--draft " << opt.draft
                                           << ": the viewer drafts by prompt lookup; give "
                                              "ngram[:N] (plab generate takes a draft model)");
    state.draft_ngram = draft.ngram;
    state.serving_view = opt.serving;
    PLAB_CHECK(opt.kv_blocks >= 0,
               "--kv-blocks " << opt.kv_blocks << " must be at least 1 (0: the default pool)");
    state.serving_kv_blocks = opt.kv_blocks;
    PLAB_CHECK(opt.prefix_cache == "on" || opt.prefix_cache == "off",
               "--prefix-cache '" << opt.prefix_cache << "' (valid: on, off)");
    state.serving_prefix_cache = opt.prefix_cache == "on";
    state.replay.policy = parse_policy(opt.policy);
    state.replay.rate = opt.rate;
    state.replay.requests = opt.requests;
    state.replay.seed = opt.seed;
    state.replay.token_budget = opt.token_budget;
    state.replay.network_delay_ms = opt.network_delay_ms;
    state.replay.validate();
    if (!opt.toy_values.empty()) state.toy.values = parse_floats(opt.toy_values, "--values");
    if (!opt.toy_queries.empty()) state.toy.queries = parse_floats(opt.toy_queries, "--queries");
    if (!opt.toy_keys.empty()) state.toy.keys = parse_floats(opt.toy_keys, "--keys");
    const int toy_t = state.toy.n_tokens();
    if (opt.toy_queries.empty()) state.toy.queries.assign(toy_t, 1.0f);
    if (opt.toy_keys.empty()) state.toy.keys.assign(toy_t, 1.0f);
    if (!opt.toy_chunks.empty()) state.toy_chunks = opt.toy_chunks;
    state.toy.validate();
    PLAB_CHECK(opt.flash_tile >= 1,
               "--flash-tile " << opt.flash_tile
                               << " must be at least 1 (keys per tile of the flash scene; e.g. "
                                  "--flash-tile 2)");
    state.flash_tile = opt.flash_tile;
    // --layer or --head names a model head: the flash scene walks it, at --flash-tile when
    // given, else at the gpu kernel's own tile (the toy's default 2 means nothing there).
    state.flash_model_head = opt.layer >= 0 || opt.head >= 0;
    state.flash_head_tile = opt.flash_tile_given ? opt.flash_tile : 0;
    if (opt.step >= 0) state.stage = opt.step;
    // heatmap, layers, side by side (the row and cell are checked against the
    // prompt's length when the engine has tokenized it: Controller::refresh_mask_view)
    PLAB_CHECK(opt.zoom >= 1 && opt.zoom <= 1000,
               "--zoom " << opt.zoom << " must be between 1 (the whole prompt) and 1000");
    state.zoom = opt.zoom;
    if (!opt.zoom_centre.empty()) {
        const std::vector<float> qk = parse_floats(opt.zoom_centre, "--zoom-centre");
        PLAB_CHECK(qk.size() == 2 && qk[0] >= 0 && qk[1] >= 0,
                   "--zoom-centre takes a query row and a key column, e.g. 300,280");
        state.zoom_q = qk[0];
        state.zoom_k = qk[1];
    }
    PLAB_CHECK(opt.pin_query >= -1, "--pin-query " << opt.pin_query << " must be a row >= 0");
    state.pinned_query = opt.pin_query;
    PLAB_CHECK(opt.compare_chunks.empty() || opt.compare_backend.empty(),
               "--compare-chunks and --compare-backend: give one (the second run differs from "
               "the first in one thing)");
    state.compare_chunks = opt.compare_chunks;
    state.compare_backend = opt.compare_backend;
    return state;
}

void apply_try(const std::vector<std::string>& args, const Options& given, const Snapshot& snap,
               ViewerState& state) {
    std::string command = "plab-viewer";
    for (const std::string& a : args) command += " " + a;
    for (const std::string& a : args) {
        if (a.rfind("--", 0) != 0) continue;
        const std::string flag = a.substr(0, a.find('='));
        PLAB_CHECK(
            std::find(std::begin(kTryFlags), std::end(kTryFlags), flag) != std::end(kTryFlags),
            "Try command `" << command << "`: " << flag
                            << " is not a panel setting (a Try step may set --chunks, "
                               "--mask, --step, --policy, ... but not the window or model)");
    }
    // 1. The command's flags over the launch flags, parsed by the command line's own parser.
    Options o = given;
    CLI::App app;
    add_options(app, o);
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them reversed
    try {
        app.parse(reversed);
    } catch (const CLI::ParseError& e) {
        PLAB_CHECK(false, "Try command `" << command << "`: " << e.what());
    }
    const bool scene_given = app.count("--scene") > 0;
    const std::string scene = o.scene;
    o = with_lesson(o);
    if (scene_given) o.scene = scene;
    // 2. The state that command opens (checked: a bad value throws before `state` changes).
    ViewerState next = state_from_options(o);
    next.attn_layer = o.layer >= 0 ? o.layer : state.attn_layer;
    next.attn_head = o.head >= 0 ? o.head : state.attn_head;
    PLAB_CHECK(next.attn_layer < snap.n_layers && next.attn_head < snap.n_heads,
               "Try command `" << command << "`: --layer/--head out of range (the model has "
                               << snap.n_layers << " layers and " << snap.n_heads << " heads)");
    // 3. What is not an input stays: the texture (its key makes it re-upload), the checks.
    next.heatmap = state.heatmap;
    next.heatmap_compare = state.heatmap_compare;
    next.flash_heatmap = state.flash_heatmap;
    next.print_checks = state.print_checks;
    next.checks_failed = state.checks_failed;
    next.seconds_per_step = state.seconds_per_step;
    next.sqrt_colours = state.sqrt_colours;
    state = std::move(next);
}

namespace {

// What opens: the panel, lesson mode, and a headless run's picture.
void add_scene_options(CLI::App& app, Options& opt) {
    app.add_option("--scene", opt.scene, "Panel to open: " + scene_names());
    app.add_option("--lesson", opt.lesson,
                   "Lesson mode: lesson N's text (lessons/NN-*.md, its Try: steps as buttons) "
                   "beside its panel (lessons " +
                       panel_ranges() + "), or alone, naming its command (lessons " +
                       command_lessons() + ")");
    app.add_option("--click-try", opt.click_try,
                   "Lesson mode, headless tests: click the lesson's Try button K (1 = first)");
    app.add_option("--screenshot", opt.screenshot,
                   "Render headless (no window shown) and write this PNG, then exit");
}

// The engine's inputs: the prompt, the chunk plan, the model, the backend and the mask.
void add_prompt_options(CLI::App& app, Options& opt) {
    app.add_option("--prompt", opt.prompt, "Prompt text for the model panels");
    app.add_option("--prompt-file", opt.prompt_file, "Read the prompt from this file");
    app.add_option("--prompt-tokens", opt.prompt_tokens,
                   "Cut (or repeat) the tokenized prompt to exactly this many tokens");
    app.add_option("--chunks", opt.chunks, "Chunk plan: full, a size (8) or lengths (3,1,4)");
    app.add_option("--model", opt.model, "Model directory (default: $PLAB_MODEL or assets/model)");
    app.add_option("--backend", opt.backend, "Backend: cpu-ref, cpu, gpu-ref, gpu");
    app.add_option("--mask", opt.mask,
                   "Attention mask of the mask, kv and timeline panels, as plab --mask: causal, "
                   "window:8, window:8+sink:2, chunked:16, dilated:4,2, prefix:6, docs:5,7, "
                   "file:m.txt, +alibi, +softcap:30 (grammar: plab mask --help)")
        ->capture_default_str();
    app.add_option("--mask-tile", opt.mask_tile,
                   "Mask panel: tile size of the tile map (the fast kernels use 32)")
        ->capture_default_str();
}

// The toy example's inputs, and the step cursor, layer and head the panels open on.
void add_toy_and_cursor_options(CLI::App& app, Options& opt) {
    app.add_option("--values", opt.toy_values, "Toy example values V (default 2,4,8,10)");
    app.add_option("--queries", opt.toy_queries, "Toy example queries Q (default all 1)");
    app.add_option("--keys", opt.toy_keys, "Toy example keys K (default all 1)");
    app.add_option("--toy-chunks", opt.toy_chunks, "Toy example chunk plan (default 2)");
    app.add_option("--flash-tile", opt.flash_tile,
                   "FlashAttention scene: keys per tile of the walk, as plab flash --tile (the "
                   "toy's default; a model head's default: the gpu kernel's own)")
        ->capture_default_str()
        ->each([&opt](const std::string&) { opt.flash_tile_given = true; });
    app.add_option("--step", opt.step,
                   "Engine calls to show as done (default: all; the KV panel's shared pool: the "
                   "first step that shares the most blocks)");
    app.add_option("--layer", opt.layer,
                   "Attention panel: layer (default: the model's viewer.json hint, e.g. the "
                   "shipped model's induction head, else the last layer); the FlashAttention "
                   "scene walks this model head instead of the toy");
    app.add_option("--head", opt.head,
                   "Attention panel: head (default: the viewer.json hint, else 0); the "
                   "FlashAttention scene walks this model head instead of the toy");
}

// The KV panel's blocks, its shared pool, and the Serving panel's workload (plab serve's flags).
void add_kv_and_serving_options(CLI::App& app, Options& opt) {
    app.add_option("--block-size", opt.block_size, "KV panel: positions per cache block");
    app.add_option("--speculate", opt.speculate,
                   "KV panel: decode steps verify up to K (1-8) guesses each, in one chunk, and "
                   "roll the rejected ones back (lesson 18)");
    app.add_option("--draft", opt.draft,
                   "With --speculate: ngram[:N], prompt lookup of the last N tokens (default "
                   "ngram:1)")
        ->capture_default_str();
    app.add_flag("--serving", opt.serving,
                 "KV and timeline panels: four requests through one engine and one shared "
                 "KV pool (prefix sharing, preemption, eviction)");
    app.add_option("--kv-blocks", opt.kv_blocks,
                   "With --serving: blocks in the shared pool (default: just too few)");
    app.add_option("--prefix-cache", opt.prefix_cache, "With --serving: on or off (default on)");
    app.add_option("--policy", opt.policy,
                   "Serving panel: one-at-a-time, static, continuous, chunked (default chunked)");
    app.add_option("--rate", opt.rate, "Serving panel: Poisson arrivals per second")
        ->capture_default_str();
    app.add_option("--requests", opt.requests, "Serving panel: requests in the workload")
        ->capture_default_str();
    app.add_option("--seed", opt.seed, "Serving panel: arrivals, lengths and prompt ids")
        ->capture_default_str();
    app.add_option("--token-budget", opt.token_budget,
                   "Serving panel: tokens per step (chunked policy; the others prefill whole "
                   "prompts)")
        ->capture_default_str();
    app.add_option("--network-delay-ms", opt.network_delay_ms,
                   "Serving panel: one-way delay to the client (each token's delivery)")
        ->capture_default_str();
}

// The window, its frames and input in tests, and text and scale.
void add_window_options(CLI::App& app, Options& opt) {
    app.add_option("--width", opt.width, "Window width in pixels");
    app.add_option("--height", opt.height, "Window height in pixels");
    app.add_option("--font-size", opt.font_size, "Font size in pixels (projectors: 20+)");
    app.add_option("--frames", opt.frames, "Render this many frames, then exit (0: until closed)");
    app.add_option("--hover", opt.hover,
                   "Screenshots: put the mouse pointer at x,y (pixels) to show a tooltip");
    app.add_option("--press", opt.keys,
                   "Press these keys one by one, e.g. home,right,down (space, left, end, r, 1-7)");
    app.add_flag("--report-frame-time", opt.report_frame_time,
                 "Print the median frame time of the run");
    // text and scale
    app.add_option("--font", opt.font,
                   "Font file (.ttf/.otf) for all text; default: DejaVu Sans "
                   "(fonts-dejavu-core), with Latin, Greek and Cyrillic glyphs");
    app.add_option("--fallback-font", opt.fallback_font,
                   "Font merged in for characters the main font lacks (CJK, Thai, ...), or "
                   "'none'; default: the first of Droid Sans Fallback, Noto Sans CJK, Noto "
                   "Sans that is installed");
    app.add_option("--scale", opt.scale,
                   "UI scale, 0.5 to 4 (fonts, cells, spacing), times the monitor's content "
                   "scale; Ctrl +, Ctrl - and Ctrl 0 change it while running");
    app.add_flag("--print-command", opt.print_command,
                 "Headless: print the plab command that reproduces the shown panel's numbers");
}

// The mask panel's heatmap (heatmap, layers, side by side): zoomed, a row pinned, a
// second run beside the first.
void add_heatmap_options(CLI::App& app, Options& opt) {
    app.add_option("--zoom", opt.zoom,
                   "Mask panel: heatmap magnified Z times (1 = the whole prompt; wheel, drag, F)");
    app.add_option("--zoom-centre", opt.zoom_centre,
                   "Mask panel: with --zoom, the cell Q,K at the centre (default: the pinned "
                   "row, else the middle)");
    app.add_option("--pin-query", opt.pin_query,
                   "Mask panel: pin query row N and list the keys it attends to most");
    app.add_option("--compare-chunks", opt.compare_chunks,
                   "Mask panel: a second run with this chunk plan beside the first, cells whose "
                   "bits differ highlighted");
    app.add_option("--compare-backend", opt.compare_backend,
                   "Mask panel: a second run on this backend beside the first (cpu, gpu, ...)");
}

}  // namespace

// The groups in --help's order.
void add_options(CLI::App& app, Options& opt) {
    add_scene_options(app, opt);
    add_prompt_options(app, opt);
    add_toy_and_cursor_options(app, opt);
    add_kv_and_serving_options(app, opt);
    add_window_options(app, opt);
    add_heatmap_options(app, opt);
}

}  // namespace plab::viewer
