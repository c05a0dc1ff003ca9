// Small drawing helpers shared by the panels: help markers, tooltips on
// numbers, match badges, the probability colour scale, textures.
//
// What it teaches: nothing about prefill; it keeps the panels short and makes
// every panel explain itself the same way — a "(?)" marker naming its lesson
// and a tooltip on every number (imgui_demo.cpp's HelpMarker idiom).
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "app/snapshot.h"
#include "app/viewer_state.h"

namespace plab::viewer {

// The UI scale (--scale × the monitor's content scale, changed by Ctrl +/-/0): fonts
// and ImGui's style are rebuilt at it (main.cpp); a panel's own pixel constants (line
// widths, gaps, minimum cell sizes) are multiplied by it, so everything grows together.
// One number for the whole window, like ImGui's own style: set only by main().
float ui_scale();
void set_ui_scale(float scale);
// v pixels at scale 1 -> pixels now.
inline float px(float v) {
    return v * ui_scale();
}

// Colours used by every panel, so a colour means the same thing everywhere.
namespace colour {
inline constexpr ImU32 kMasked = IM_COL32(70, 70, 78, 255);  // future cells (hatched)
inline constexpr ImU32 kHatch = IM_COL32(120, 120, 132, 255);
inline constexpr ImU32 kPending = IM_COL32(40, 40, 46, 255);       // not computed yet
inline constexpr ImU32 kChunk = IM_COL32(255, 190, 60, 255);       // the current chunk
inline constexpr ImU32 kCached = IM_COL32(90, 170, 255, 255);      // read from the KV cache
inline constexpr ImU32 kDecode = IM_COL32(120, 220, 120, 255);     // a decode step
inline constexpr ImU32 kShared = IM_COL32(230, 110, 220, 255);     // prefix-cache hit
inline constexpr ImU32 kCachedFree = IM_COL32(70, 120, 130, 255);  // free, K/V still findable
inline constexpr ImU32 kRecompute = IM_COL32(215, 95, 95, 255);  // computed again after preemption
inline constexpr ImU32 kTileFull = IM_COL32(80, 160, 220, 255);  // tile map: all visible
inline constexpr ImU32 kTilePartial = IM_COL32(150, 110, 200, 255);  // tile map: some visible
inline constexpr ImU32 kTileEmpty = IM_COL32(34, 34, 40, 255);       // tile map: skipped
inline constexpr ImU32 kFreed = IM_COL32(150, 60, 110, 255);         // KV block a mask gave back
inline constexpr ImU32 kGood = IM_COL32(60, 170, 80, 255);
inline constexpr ImU32 kBad = IM_COL32(200, 60, 60, 255);
inline constexpr ImU32 kClose = IM_COL32(200, 150, 40, 255);
// Lesson mode (panel_lesson.cpp): headings, code boxes, Try buttons.
inline constexpr ImU32 kHeading = IM_COL32(255, 214, 120, 255);
inline constexpr ImU32 kCodeBox = IM_COL32(28, 32, 44, 255);
inline constexpr ImU32 kTryButton = IM_COL32(40, 120, 90, 255);
}  // namespace colour

// The colour of request `id` in the serving views (one per request, cycling).
ImU32 request_colour(int id);

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

// Probability in [0,1] -> colour (dark blue -> teal -> yellow, like viridis).
ImU32 probability_colour(float p, bool sqrt_scale);

// A token as shown on an axis: printable, short ("\n" -> "\\n", " " -> "_"); a byte
// that is not a whole character as <D0>, a character the font lacks as <U+4E2D>
// (text_utf8.h: never a replacement glyph or '?').
std::string token_label(const std::string& text);

// "12.3 us" / "4.56 ms" / "1.2 KiB"
std::string format_us(double us);
std::string format_bytes(double bytes);
// A time axis of up to six ticks labelled from 0 at t_begin, as many as fit without
// their labels touching: x = x0 + (us - t_begin) / span * width, labels at axis_y (the
// timeline panels' shared ruler; its labels are recorded for the layout check).
void draw_time_axis(ImDrawList* dl, float x0, float width, float axis_y, double t_begin,
                    double span);

// The step cursor of the current scene: stages done and layers done of the next stage.
struct StepView {
    int n_stages = 0;     // engine calls in this scene (chunks, then decode steps)
    int n_layers = 1;     // layer granularity of a stage (1 = not layered)
    int stages_done = 0;  // 0..n_stages
    int layers_done = 0;  // 0..n_layers-1, of stage `stages_done`
    bool complete() const { return stages_done >= n_stages; }
};
StepView step_view(const Snapshot& snap, const ViewerState& state);
// Applies a step: +1/-1 chunk, +1/-1 layer, reset, to the end.
enum class Step { kNextChunk, kPrevChunk, kNextLayer, kPrevLayer, kReset, kEnd };
void apply_step(const Snapshot& snap, ViewerState& state, Step step);

// Uploads an RGBA8 image (width × height, rows top-down) into `tex`.
void upload_texture(HeatmapTexture& tex, const std::vector<unsigned char>& rgba, int width,
                    int height);
void release_texture(HeatmapTexture& tex);

}  // namespace plab::viewer
