// plab-viewer's command line: the flags, lesson N's panel and settings, and the
// ViewerState a command line opens.
//
// What it teaches: nothing about prefill; it is the one place that turns flags into
// panel state, shared by the command line and the lesson pane's "Try:" buttons (a
// button opens the panel as its `plab-viewer --lesson N ...` command would), so a
// lesson's command and its button cannot disagree. No ImGui or OpenGL here: the
// tests drive it without a window.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "app/serving_replay.h"
#include "app/snapshot.h"
#include "app/viewer_state.h"

namespace plab::viewer {

struct Options {
    std::string screenshot;  // "" = interactive
    std::string scene = "toy";
    std::string prompt;
    std::string prompt_file;
    std::string chunks;
    std::string model;
    std::string backend = "cpu-ref";
    std::string mask = "causal";  // runtime/mask_grammar.h grammar, as `plab --mask`
    int mask_tile = ViewerState{}.mask_tile;
    std::string toy_values, toy_queries, toy_keys, toy_chunks;
    int flash_tile = ViewerState{}.flash_tile;  // --flash-tile N: the flash scene's keys per tile
    bool flash_tile_given = false;  // --flash-tile was on the command line (a model head's tile)
    int width = 1280, height = 800;
    int frames = 0;
    bool report_frame_time = false;
    int prompt_tokens = 0;
    int lesson = 0;
    int click_try = 0;  // headless tests: click the lesson pane's Try button K (1-based)
    std::string hover;  // "x,y": where the mouse pointer rests in a screenshot
    std::string keys;  // --press "home,right,down": keys pressed one after another (headless tests)
    int step = -1;
    int layer = -1, head = -1;
    int block_size = ViewerState{}.block_size;
    // The KV panel's decode steps as verify steps (plab generate's flags):
    // up to --speculate K guesses of --draft ngram[:N].
    int speculate = 0;
    std::string draft = "ngram:1";
    bool serving = false;  // KV and timeline panels: several requests through one engine
    int kv_blocks = 0;     // their pool; 0 = the scenario's default
    std::string prefix_cache = "on";
    // The Serving panel: the names and meanings of `plab serve`'s flags.
    std::string policy = policy_name(ReplayOptions{}.policy);
    double rate = ReplayOptions{}.rate;
    int requests = ReplayOptions{}.requests;
    std::uint64_t seed = ReplayOptions{}.seed;
    int token_budget = ReplayOptions{}.token_budget;
    double network_delay_ms = ReplayOptions{}.network_delay_ms;
    float font_size = 16.0f;
    // text and scale
    std::string font;            // --font PATH; "" = DejaVu Sans (fonts-dejavu-core)
    std::string fallback_font;   // --fallback-font PATH|none; "" = the first installed one
    std::string scale = "1";     // --scale S, checked by parse_scale (text: "abc" gets one line)
    bool print_command = false;  // --print-command: the shown panel's `plab` command, headless
    // heatmap, layers, side by side
    float zoom = 1;               // --zoom Z: the mask panel's heatmap magnified Z times (1 = fit)
    std::string zoom_centre;      // --zoom-centre Q,K: the cell at the centre of the zoomed view
    int pin_query = -1;           // --pin-query N: pin query row N (its most-read keys listed)
    std::string compare_chunks;   // --compare-chunks PLAN: a second run beside, this plan
    std::string compare_backend;  // --compare-backend NAME: a second run beside, this backend
};

// text and scale
// The UI scale range: 0.5 (a laptop with a small font) to 4 (a 4K projector).
inline constexpr float kScaleMin = 0.5f, kScaleMax = 4.0f;
// "--scale" text -> factor; anything but a number in [kScaleMin, kScaleMax] throws
// plab::Error with one line naming the range.
float parse_scale(const std::string& text);

// Every flag of plab-viewer, bound to `opt`.
void add_options(CLI::App& app, Options& opt);

// The panel of each lesson in lessons/ (one numbering: lesson N, --lesson N). A new
// lesson with a panel is one more line of kLessonPanels (options.cpp).
struct LessonPanel {
    int lesson;
    Scene scene;
    bool serving_view = false;     // the KV panel's shared pool (lesson 7: a reused prefix)
    const char* policy = nullptr;  // the Serving panel's policy, unless --policy is given
    double network_delay_ms = -1;  // and its client delay, unless given
    const char* mask = nullptr;    // the mask scenes' mask, unless --mask is given
    int speculate = 0;             // the KV panel's guesses a verify step, unless given
};
// Lesson n's panel, or nullptr when the lesson has none (taught by a command).
const LessonPanel* lesson_panel(int n);
// The lessons that have a panel, in order.
std::vector<int> lessons_with_panels();

// The command that teaches lesson n when it has no panel ("plab bench"), or
// nullptr (a lesson with a panel, or no such lesson).
const char* lesson_command(int n);

// The options with lesson `o.lesson`'s panel applied (flags the user gave win).
// A lesson taught by a command keeps the options as they are: lesson mode shows
// its text alone, naming the command. A number that is no lesson is refused.
Options with_lesson(Options o);

// "2,4,8" -> {2, 4, 8}; a bad item throws plab::Error naming `what`.
std::vector<float> parse_floats(const std::string& text, const char* what);

// The state `opt` opens: inputs checked (one plab::Error line for a bad one), every
// part of the Snapshot marked dirty. The attention layer and head are left at 0: they
// depend on the model (run() and apply_try set them).
ViewerState state_from_options(const Options& opt);

// What a lesson's "Try:" button does. `args` are the words of its command after
// `plab-viewer` ("--lesson", "3", "--chunks", "4"); the state becomes the one that
// command opens (the launch flags `given` under it, its own flags on top; --scene
// in a Try command wins over the lesson's panel), keeping what is not an input: the
// GL texture, the self-check flags, and the head shown unless --layer/--head are given.
// Only flags that set panel inputs are allowed (no --screenshot, --model, ...).
// A bad command throws plab::Error and leaves `state` as it was.
void apply_try(const std::vector<std::string>& args, const Options& given, const Snapshot& snap,
               ViewerState& state);

}  // namespace plab::viewer
