// Lesson mode: the lesson's text in a pane beside its panel, its "Try:" steps as
// buttons that drive the panel (`plab-viewer --lesson N`).
//
// What it teaches: the lesson and the picture side by side — read a paragraph, press
// its Try step, see the panel change. The pane draws lesson_text.h's blocks; a Try
// button applies its command through options.h's apply_try, the same path as the
// command line, so the button does exactly what the command in the text does.
// This header holds no ImGui types: the layout self-check is tested without a window.
#pragma once

#include <string>
#include <vector>

#include "app/lesson_text.h"
#include "app/options.h"
#include "app/snapshot.h"
#include "app/viewer_state.h"

namespace plab::viewer {

// What one frame of the pane laid out (filled by draw_lesson, read by the self-check).
struct LessonLayout {
    // Blocks laid out this frame: drawn, or (far outside the view) stood in for by the
    // height they had when last drawn.
    int blocks_drawn = 0;
    int blocks_hidden = 0;  // blocks inside a closed <details> section (answers)
    int try_buttons = 0;    // Try buttons submitted (drawn or hidden in a closed section)
    float text_height = 0;  // height of the laid-out text, in pixels
    // The pane and the panel beside it, in screen pixels (x0, y0, x1, y1).
    float pane[4] = {0, 0, 0, 0};
    float panel[4] = {0, 0, 0, 0};
};

struct LessonPane {
    int lesson = 0;  // 0: no lesson mode
    // A lesson with no panel: the command that teaches it ("plab bench"); the
    // pane then fills the window alone. Empty: the pane sits beside its panel.
    std::string taught_by;
    LessonText text;
    int file_try_lines = 0;        // "Try:" lines in the file, counted without the parser
    Options given;                 // the launch flags: a Try command applies on top of them
    float width_fraction = 0.42f;  // of the window, dragged with the splitter
    bool jump_to_try = false;      // scroll to the first Try step (the "Try" button above)
    // A pressed Try step: which, what changed in the panel's inputs, or why it was refused.
    int pressed = -1;
    std::string changed;
    std::string error;
    int presses = 0;  // Try buttons pressed so far
    // Headless tests (--click-try K): the button K-1 is scrolled into view, then clicked
    // by injected mouse events; its rectangle (x0, y0, x1, y1) once fully visible.
    int click_index = -1;
    bool click_rect_ready = false;
    int click_stable_frames = 0;  // frames the button has stayed at click_rect
    float click_rect[4] = {0, 0, 0, 0};
    LessonLayout layout;
    // Headless runs lay out every block each frame (none stood in for by its height), so
    // the layout self-check reads the whole lesson, not the screenful in view.
    bool draw_all = false;
    std::vector<float> block_heights;       // each block's height when last drawn (-1: not yet)
    float heights_width = 0;                // the text width they were measured at
    int mono_font = -1, heading_font = -1;  // indices into the font atlas; -1: the default
};

// A code line wider than the pane goes on under this marker (panel_lesson.cpp): ↪.
inline constexpr const char* kCodeWrapMarker = "\xe2\x86\xaa";

// Builds the pane for lesson `given.lesson` (reads lessons/NN-*.md; plab::Error when
// the folder or file is missing or a Try step is malformed).
LessonPane make_lesson_pane(const Options& given);

// The lesson pane's self-check: every parsed block was laid out (drawn, or inside a
// closed answers section), there is one Try button per "Try:" line of the file, the
// text has height, and the pane lies beside the panel without overlapping it (a
// lesson taught by a command: the pane fills the window, and the lesson has no Try
// step, since there is no panel for one to drive). One line, "...: yes" or
// "...: NO"; `ok` says which.
std::string lesson_self_check(const LessonPane& pane, bool& ok);

// What changed between two states, in the panel's own words ("chunks 8 -> 4,
// mask causal -> window:4"); "" when no input changed.
std::string describe_changes(const ViewerState& before, const ViewerState& after);

// Presses Try step `index` (of the pane's kTry blocks): applies its command to `state`
// and records what changed, or the refusal, in the pane.
void press_try(LessonPane& pane, int index, const Snapshot& snap, ViewerState& state);

// Draws the pane into the current ImGui window region (panel_lesson.cpp).
void draw_lesson(const Snapshot& snap, ViewerState& state, LessonPane& pane);

}  // namespace plab::viewer
