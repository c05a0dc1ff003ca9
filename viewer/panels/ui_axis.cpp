// The timeline panels' time axis (see ui_axis.h).
#include "panels/ui_axis.h"

#include <algorithm>
#include <string>

#include "panels/layout_probe.h"
#include "panels/ui_format.h"
#include "panels/ui_widgets.h"

namespace plab::viewer {

void draw_time_axis(ImDrawList* dl, float x0, float width, float axis_y, double t_begin,
                    double span) {
    const float font = ImGui::GetFontSize();
    // As many ticks as leave a gap between labels (at most six). The first and last labels
    // sit inside the axis, beside their ticks, so neighbours of the widest (the span's own)
    // need one and a half of its width apart, and a font of room.
    const float widest = text_width(format_us(span)) * 1.5f + font;
    const int intervals = std::clamp(static_cast<int>(width / std::max(1.0f, widest)), 1, 5);
    ChartProbe axis("time axis", ImVec2(x0, axis_y), ImVec2(x0 + width, axis_y + font * 1.6f),
                    false);
    for (int i = 0; i <= intervals; ++i) {
        const double us = t_begin + span * i / intervals;
        const float x = x0 + static_cast<float>((us - t_begin) / span) * width;
        dl->AddLine(ImVec2(x, axis_y + font * 1.2f), ImVec2(x, axis_y + font * 1.6f),
                    IM_COL32(180, 180, 180, 255));
        const std::string txt = format_us(us - t_begin);
        const float w = text_width(txt);
        // The first label starts at its tick, the last ends at its tick: inside the axis.
        const float tx = i == 0 ? x : i == intervals ? x - w : x - w * 0.5f;
        axis.label(dl, ImVec2(tx, axis_y), IM_COL32(180, 180, 180, 255), txt);
    }
}

}  // namespace plab::viewer
