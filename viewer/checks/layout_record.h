// What one frame laid out, as a reader would see it: the texts, controls, tables and
// charts a panel drew, each with the room it had ("nothing cut off").
//
// What it teaches: a screenshot can hide a defect a student sees at once (a word cut
// at a window's edge, a table squeezed to one character a column, a chart label under
// a line). The panels record what they lay out (panels/layout_probe.h fills this from
// ImGui's own rectangles); check_layout (self_check.h) reads only these numbers, so it
// runs without a window and its unit tests plant each defect by hand.
// Left out on purpose: glyph-level rendering (the text is measured with ImGui's font
// metrics when recorded) and vertical placement (a panel may scroll down; it may not
// scroll sideways or cut text).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace plab::viewer {

// Where wrapped text may end a line (the viewer's own wrap, ui_widgets' wrapped_text,
// and the check that holds every wrap to it): at a blank, after a hyphen between two
// letters ("prefill-/and"), or after a single slash ("src//runtime"). Never inside a
// word or a number: ImGui's own wrap also breaks after '.', ',', '"' ("2./4e-7",
// "cache./md"), which a reader sees as a word cut in two.
inline bool break_allowed(const std::string& text, std::size_t at) {
    auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
    if (at == 0 || at >= text.size() || blank(text[at - 1]) || blank(text[at])) return true;
    const char before = text[at - 1], after = text[at];
    if (before == '-') return at >= 2 && letter(text[at - 2]) && letter(after);
    if (before == '/') return at >= 2 && text[at - 2] != '/' && after != '/';
    return false;
}

// A rectangle in screen pixels: x0 <= x1, y0 <= y1.
struct LayoutBox {
    float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    float width() const { return x1 - x0; }
    float height() const { return y1 - y0; }
    // Whether the two overlap by more than `slack` pixels in both directions.
    bool overlaps(const LayoutBox& o, float slack = 0.5f) const {
        return x0 + slack < o.x1 && o.x0 + slack < x1 && y0 + slack < o.y1 && o.y0 + slack < y1;
    }
    bool contains(const LayoutBox& o, float slack = 0.5f) const {
        return o.x0 >= x0 - slack && o.x1 <= x1 + slack && o.y0 >= y0 - slack && o.y1 <= y1 + slack;
    }
};

// One text item (a line, or a paragraph wrapped to `wrap_width`), or a control.
struct LayoutText {
    std::string where;  // the part of the panel: "controls", "lesson text", "toy outputs"
    std::string text;   // as given (a control: its label)
    LayoutBox rect;     // where ImGui laid it out
    // The part of the screen it was drawn into (its window's, or its table cell's, clip
    // rectangle): what sticks out sideways is cut off.
    float visible_x0 = 0, visible_x1 = 0;
    std::string visible_text;  // one line cut at the edge: the part a reader sees
    float wrap_width = 0;      // > 0: wrapped at this width
    // Wrapped: where each line ends, as offsets into `text` (the last line ends at size()).
    std::vector<std::size_t> line_ends;
    bool control = false;  // a button, slider or field (no text inside to read)
    // Inside a table: which (table, column) and whether in its header row.
    std::uint32_t table = 0;  // 0: not in a table
    int column = -1;
    bool header = false;
    // Pixels the text needs without a break: its widest unbreakable part when it wraps
    // (break_allowed), all of it when it is one line.
    float widest_word = 0;
    std::string widest_word_text;
};

// One table: each column's width for its content, in pixels.
struct LayoutTable {
    std::string where;
    std::uint32_t id = 0;              // LayoutText::table of its cells
    std::vector<std::string> headers;  // a column's name ("" when it has none)
    std::vector<float> header_widths;  // pixels its name needs on one line
    std::vector<float> widths;         // pixels of room for a cell's content
};

// A label drawn into a chart, and a line across it.
struct LayoutLabel {
    std::string text;
    LayoutBox rect;
};
struct LayoutLine {
    std::string what;  // "p50 mark", "CDF"
    float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};
// A chart drawn with the draw list: its frame, its labels, the lines drawn across it and
// the colours of its marks (each needs a legend entry when the chart asks for one).
struct LayoutChart {
    std::string where;
    LayoutBox rect;
    std::vector<LayoutLabel> labels;
    std::vector<LayoutLine> lines;
    std::vector<std::uint32_t> mark_colours;  // ImU32 (0xAABBGGRR), each once
    bool needs_legend = false;
};

// A legend entry: a swatch of this colour and what it means.
struct LayoutLegendEntry {
    std::string where;
    std::uint32_t colour = 0;
    std::string text;
};

// A number shown for the step in view ("step 11/20", "after step 11"): all must agree.
struct LayoutStep {
    std::string where;
    int step = 0;
    std::string text;
};

// A window (ImGui's, or a child) of the frame.
struct LayoutWindow {
    std::string name;
    bool scrolls_sideways = false;  // it needed a horizontal scrollbar
    bool sideways_allowed = false;  // and may have one (a lesson's diagram, whose columns
                                    // must stay aligned)
    float cut_right = 0,
          cut_bottom = 0;  // pixels its content reaches past an edge it cannot scroll
    bool outside_display = false;
};

// Everything one frame recorded (cleared at the start of each frame).
struct LayoutRecord {
    float char_width = 0;  // an average character of the main font, in pixels
    std::string scope;     // the part being drawn now: what a new item's `where` says
    std::vector<LayoutText> texts;
    std::vector<LayoutTable> tables;
    std::vector<LayoutChart> charts;
    std::vector<LayoutLegendEntry> legend;
    std::vector<LayoutStep> steps;
    std::vector<LayoutWindow> windows;
    void clear() {
        const float w = char_width;
        *this = LayoutRecord{};
        char_width = w;
    }
};

}  // namespace plab::viewer
