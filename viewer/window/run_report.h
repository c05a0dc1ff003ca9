// What a viewer run prints after its last frame: the self-check lines of a
// headless or scripted run (lesson, text, scale, layout, readability, the
// command for the view, the cursor), the screenshot's line, the frame times.
//
// What it teaches: a GUI checked like a program. Each line is a claim a
// reader of the screenshot would make ("every window inside the window,
// nothing cut off"), measured from ImGui's own record of the last frame, with
// YES or NO; a NO makes the run exit non-zero (tests/viewer reads the lines).
#pragma once

#include <imgui.h>

#include <vector>

#include "app/capture.h"
#include "app/fonts.h"
#include "app/lesson_pane.h"
#include "app/options.h"
#include "app/viewer_state.h"
#include "panels/layout_probe.h"

namespace plab::viewer {

// What the --scale self-check compares: sizes measured from ImGui after a frame.
struct ScaleProbe {
    float font = 0, frame_h = 0, text_w = 0, button_w = 0, button_h = 0;
};
// The sizes of the current frame (after a NewFrame at the scale to measure).
ScaleProbe probe_sizes(const ViewerState& state);

// Everything of a run the report reads.
struct RunReport {
    const Options& opt;
    ViewerState& state;  // checks_failed is set here
    const Snapshot& snap;
    const LessonPane* lesson;  // null outside lesson mode
    bool clicking;             // --click-try
    const ImFont& font;        // the main font, asked for the prompt's characters
    const FontSet& fonts;
    bool headless;       // --screenshot
    bool measure_scale;  // the scale self-check ran (at_one is its scale-1 probe)
    float scale;         // the scale of the last frame
    float content_scale;
    ScaleProbe at_one;
    LayoutRecord& layout;     // the last frame's record
    bool scripted_keys;       // --press
    OffscreenTarget* target;  // headless: the frame to save; else null
    const std::vector<double>& frame_ms;
    const std::vector<double>& frame_cpu_ms;
};

// Prints the run's lines (stdout), saves the screenshot; a failed check sets
// r.state.checks_failed.
void print_run_report(const RunReport& r);

}  // namespace plab::viewer
