// Small widgets every panel draws with: texts that wrap between words, tooltips, "(?)"
// help markers, rows of controls that flow like text, legend entries, badges, hatching.
//
// What it teaches: nothing about prefill; it keeps the panels short and makes every
// panel explain itself the same way: a "(?)" marker naming its lesson and a tooltip on
// every number (imgui_demo.cpp's HelpMarker idiom). Every text drawn here is recorded
// for the layout self-check (layout_probe.h), so "nothing cut off" is checked, not hoped.
#pragma once

#include <imgui.h>

#include <string>

namespace plab::viewer {

// A tooltip of `text` (call while its item is hovered): wrapped to 36 ems, or to the
// display less its margins when that is narrower, so it always fits beside the pointer;
// recorded for the layout self-check ("tooltip"), which holds it inside the display.
void tooltip(const std::string& text);
// The same, printf-style.
void tooltipf(const char* fmt, ...) IM_FMTARGS(1);
// "(?)" that shows `text` when hovered; the first line should name the lesson.
void help_marker(const char* text);
// Tooltip for the last item, shown when it is hovered.
void item_tooltip(const std::string& text);
// Text followed by a tooltip explaining it (one line; wrapped: wrapped_with_tip).
void text_with_tip(const std::string& text, const std::string& tip);
void wrapped_with_tip(const std::string& text, const std::string& tip, ImU32 colour = 0,
                      float width = 0);

// Texts recorded for the layout self-check (panels/layout_probe.h). `colour` 0: the
// style's text colour. line_text: one line, which must fit; wrapped_text: wrapped at the
// right edge of the window or table cell (between words); hint_text: a wrapped hint in
// the dim colour ("Try: ..." lines).
void line_text(const std::string& text, ImU32 colour = 0);
void wrapped_text(const std::string& text, ImU32 colour = 0, float width = 0);  // 0: to the edge
void hint_text(const std::string& text);
ImU32 dim_colour();  // the style's disabled-text colour

// Rows of controls that flow like text: flow(w) puts the next item, w pixels
// wide with its label, on this line when it fits before the right edge, else on the
// next; `spacing` < 0 is the style's. The widths of the usual widgets, label included:
bool flow(float w, float spacing = -1);                  // true: on this line
float labelled_width(float frame_w, const char* label);  // a slider, combo or field
float button_width(const char* label);
float checkbox_width(const char* label);
float text_width(const std::string& text);
// One legend entry, flowing: a swatch of `fill` (with a `border` if not 0, hatched
// when asked) and its text, recorded as naming `fill` (or `border` when fill is 0).
// `under`: a colour drawn beneath a see-through fill (a veil over a mark).
void legend_entry(ImU32 fill, ImU32 border, const std::string& text, const std::string& tip,
                  bool hatch = false, ImU32 under = 0);
// A coloured "bitwise match" / "differs" badge with a tooltip.
void badge(const char* label, ImU32 colour, const std::string& tip);

// Diagonal hatching inside the rectangle a..b (marks masked cells).
void draw_hatch(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 colour, float spacing);

}  // namespace plab::viewer
