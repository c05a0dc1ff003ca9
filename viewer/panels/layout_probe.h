// Recording what a frame lays out, for the layout self-check.
//
// What it teaches: nothing about prefill; it lets the viewer say "nothing cut off" only
// when a reader would agree. Panels draw texts, controls, tables and charts through
// these helpers (or call a probe right after an ImGui item); each records the item's
// rectangle, the room it had and the part of the screen it was drawn into into the
// frame's LayoutRecord (checks/layout_record.h), which check_layout reads after the
// last frame. The record hangs on ImGui's own context (ui_context.h), set by main() for
// headless runs; with none set every probe does nothing.
#pragma once

#include <imgui.h>

#include <string>
#include <utility>
#include <vector>

#include "checks/layout_record.h"

namespace plab::viewer {

// The frame's record (nullptr: not recording) and setting it (main only).
LayoutRecord* layout_record();
void set_layout_record(LayoutRecord* record);

// Names the part of the panel drawn while it lives ("toy outputs"): a probed item's
// `where`. Restores the previous name when it goes.
class ProbeScope {
public:
    explicit ProbeScope(const std::string& where);
    ~ProbeScope();
    ProbeScope(const ProbeScope&) = delete;
    ProbeScope& operator=(const ProbeScope&) = delete;

private:
    std::string previous_;
};

// `text` cut into lines at most `width` pixels wide (the current font): [begin, end)
// of each, broken where break_allowed allows (the blanks at a break dropped, a newline
// ends a line); a part wider than a whole line is cut where it must be.
std::vector<std::pair<std::size_t, std::size_t>> wrap_lines(const std::string& text, float width);

// The last item as a text: one line (wrap_width 0), or wrapped at wrap_width pixels into
// `lines` (wrap_lines).
void probe_text(const std::string& text, float wrap_width = 0,
                const std::vector<std::pair<std::size_t, std::size_t>>& lines = {});
// The last item as a control (a button, slider, field) labelled `label`.
void probe_control(const std::string& label);
// The current table's columns (call before ImGui::EndTable).
void probe_table(const std::string& where);
// A number shown for the step in view, and the text that shows it.
void probe_step(const std::string& where, int step, const std::string& text);
// A legend entry: a swatch of `colour` labelled `text`.
void probe_legend(ImU32 colour, const std::string& text);

// A chart drawn with the draw list between a and b, recorded as it is drawn: its labels
// (their rectangles), the lines across it, the colours of its marks. The record is kept
// when it goes.
class ChartProbe {
public:
    ChartProbe(const std::string& where, ImVec2 a, ImVec2 b, bool needs_legend);
    ~ChartProbe();
    ChartProbe(const ChartProbe&) = delete;
    ChartProbe& operator=(const ChartProbe&) = delete;
    // Draws `text` at `pos` and records its rectangle.
    void label(ImDrawList* dl, ImVec2 pos, ImU32 colour, const std::string& text);
    // Draws a line and records it as crossing the chart (`what`: "p50 mark").
    void line(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 colour, float thickness,
              const std::string& what);
    // Records a line drawn by other means (a polyline's segment).
    void record_line(ImVec2 a, ImVec2 b, const std::string& what);
    // A mark of this colour was drawn (a legend must name it when the chart asks).
    void mark(ImU32 colour);

private:
    LayoutChart chart_;
    bool on_ = false;
};

}  // namespace plab::viewer
