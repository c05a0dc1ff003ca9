// The panels' small widgets (see ui_widgets.h).
#include "panels/ui_widgets.h"

#include <imgui_internal.h>  // FindRenderedTextEnd: a label's shown part

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <utility>
#include <vector>

#include "panels/layout_probe.h"
#include "panels/ui_colours.h"
#include "panels/ui_scale.h"

namespace plab::viewer {
namespace {

// `text` cut at `lines` (wrap_lines), the lines joined by newlines: as drawn.
std::string widget_lines_joined(const std::string& text,
                                const std::vector<std::pair<std::size_t, std::size_t>>& lines) {
    std::string shown;
    for (std::size_t i = 0; i < lines.size(); ++i)
        shown.append(i ? "\n" : "").append(text, lines[i].first, lines[i].second - lines[i].first);
    return shown;
}

}  // namespace

void tooltip(const std::string& text) {
    ImGui::BeginTooltip();
    // ImGui keeps a tooltip inside the display by moving it, which cannot help one
    // wider than the display: wrap it narrower than that, whatever the scale.
    const ImGuiStyle& st = ImGui::GetStyle();
    const float margin = 2 * (st.DisplaySafeAreaPadding.x + st.WindowPadding.x) + 2;
    const float width =
        std::max(ImGui::GetFontSize() * 8,
                 std::min(ImGui::GetFontSize() * 36.0f, ImGui::GetIO().DisplaySize.x - margin));
    // Wrapped here, by the rules wrapped_text keeps (break_allowed), not by ImGui.
    const auto lines = wrap_lines(text, width);
    const std::string shown = widget_lines_joined(text, lines);
    ImGui::TextUnformatted(shown.c_str(), shown.c_str() + shown.size());
    const ProbeScope scope("tooltip");
    probe_text(text, width, lines);
    ImGui::EndTooltip();
}

void tooltipf(const char* fmt, ...) {
    char buf[1024];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, args);
    va_end(args);
    tooltip(buf);
}

void help_marker(const char* text) {
    // Beside a one-line title when it fits; under a wrapped one.
    if (ImGui::GetItemRectSize().y <= ImGui::GetFrameHeightWithSpacing()) flow(text_width("(?)"));
    line_text("(?)", dim_colour());
    if (ImGui::IsItemHovered()) tooltip(text);
}

void item_tooltip(const std::string& text) {
    // Disabled items explain themselves too (why they cannot be changed).
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) tooltip(text);
}

void text_with_tip(const std::string& text, const std::string& tip) {
    line_text(text);
    item_tooltip(tip);
}

void wrapped_with_tip(const std::string& text, const std::string& tip, ImU32 colour, float width) {
    wrapped_text(text, colour, width);
    item_tooltip(tip);
}

ImU32 dim_colour() {
    return ImGui::GetColorU32(ImGuiCol_TextDisabled);
}

void line_text(const std::string& text, ImU32 colour) {
    if (colour != 0) ImGui::PushStyleColor(ImGuiCol_Text, colour);
    ImGui::TextUnformatted(text.c_str(), text.c_str() + text.size());
    if (colour != 0) ImGui::PopStyleColor();
    probe_text(text);
}

void wrapped_text(const std::string& text, ImU32 colour, float width) {
    // Wrapped here, not by ImGui (which also breaks after '.', ',' and '"': "2./4e-7"), at
    // the content region's right edge (a table cell's in a table), drawn as one item.
    const float avail = ImGui::GetContentRegionAvail().x;
    const float wrap = std::max(1.0f, width > 0 ? std::min(width, avail) : avail);
    const auto lines = wrap_lines(text, wrap);
    const std::string shown = widget_lines_joined(text, lines);
    if (colour != 0) ImGui::PushStyleColor(ImGuiCol_Text, colour);
    ImGui::TextUnformatted(shown.c_str(), shown.c_str() + shown.size());
    if (colour != 0) ImGui::PopStyleColor();
    probe_text(text, wrap, lines);
}

void hint_text(const std::string& text) {
    wrapped_text(text, dim_colour());
}

float text_width(const std::string& text) {
    return ImGui::CalcTextSize(text.c_str(), text.c_str() + text.size()).x;
}

float labelled_width(float frame_w, const char* label) {
    const char* end = ImGui::FindRenderedTextEnd(label);
    const float text = ImGui::CalcTextSize(label, end).x;
    return frame_w + (text > 0 ? ImGui::GetStyle().ItemInnerSpacing.x + text : 0);
}

float button_width(const char* label) {
    return ImGui::CalcTextSize(label, ImGui::FindRenderedTextEnd(label)).x +
           2 * ImGui::GetStyle().FramePadding.x;
}

float checkbox_width(const char* label) {
    return labelled_width(ImGui::GetFrameHeight(), label);
}

bool flow(float w, float spacing) {
    const float sp = spacing >= 0 ? spacing : ImGui::GetStyle().ItemSpacing.x;
    const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    if (ImGui::GetItemRectMax().x + sp + w > right) return false;
    ImGui::SameLine(0, sp);
    return true;
}

void legend_entry(ImU32 fill, ImU32 border, const std::string& text, const std::string& tip,
                  bool hatch, ImU32 under) {
    const float font = ImGui::GetFontSize();
    flow(font + ImGui::GetStyle().ItemInnerSpacing.x + text_width(text), font * 1.2f);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const ImVec2 q(p.x + font, p.y + font);
    if (under != 0) dl->AddRectFilled(p, q, under);
    if (fill != 0) dl->AddRectFilled(p, q, fill);
    if (hatch) draw_hatch(dl, p, q, colour::kHatch, px(5));
    if (border != 0) dl->AddRect(p, q, border, 0, 0, px(2.5f));
    ImGui::Dummy(ImVec2(font, font));
    ImGui::SameLine(0, ImGui::GetStyle().ItemInnerSpacing.x);
    text_with_tip(text, tip);
    probe_legend(fill != 0 ? fill : border, text);
}

void badge(const char* label, ImU32 colour, const std::string& tip) {
    ImGui::PushStyleColor(ImGuiCol_Button, colour);
    ImGui::PushStyleColor(ImGuiCol_ButtonHovered, colour);
    ImGui::PushStyleColor(ImGuiCol_ButtonActive, colour);
    ImGui::SmallButton(label);
    probe_control(label);
    ImGui::PopStyleColor(3);
    item_tooltip(tip);
}

void draw_hatch(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 colour, float spacing) {
    const float w = b.x - a.x, h = b.y - a.y;
    // Lines x + y = d (bottom-left to top-right), clipped to the rectangle.
    for (float d = spacing; d < w + h; d += spacing) {
        const ImVec2 p0(a.x + std::max(0.0f, d - h), a.y + std::min(d, h));
        const ImVec2 p1(a.x + std::min(d, w), a.y + std::max(0.0f, d - w));
        dl->AddLine(p0, p1, colour);
    }
}

}  // namespace plab::viewer
