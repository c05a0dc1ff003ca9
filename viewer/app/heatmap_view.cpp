// See heatmap_view.h.
#include "app/heatmap_view.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace plab::viewer {

HeatmapView fit_view(int t) {
    return HeatmapView{0, 0, static_cast<float>(std::max(1, t))};
}

HeatmapView clamp_view(HeatmapView v, int t) {
    const float tf = static_cast<float>(std::max(1, t));
    if (!(v.span > 0)) return fit_view(t);
    v.span = std::clamp(v.span, std::min(tf, kMinSpanCells), tf);
    v.x0 = std::clamp(v.x0, 0.0f, tf - v.span);
    v.y0 = std::clamp(v.y0, 0.0f, tf - v.span);
    return v;
}

float zoom_of(const HeatmapView& v, int t) {
    return v.span > 0 ? static_cast<float>(t) / v.span : 1.0f;
}

float cell_pixels(const HeatmapView& v, float side) {
    return side / v.span;
}

CellPoint screen_to_cell(const HeatmapView& v, float side, float px, float py) {
    const float per_px = v.span / side;
    return CellPoint{v.x0 + px * per_px, v.y0 + py * per_px};
}

float key_to_screen(const HeatmapView& v, float side, float k) {
    return (k - v.x0) * side / v.span;
}

float query_to_screen(const HeatmapView& v, float side, float q) {
    return (q - v.y0) * side / v.span;
}

HeatmapView zoom_to(int t, float zoom, float q, float k) {
    HeatmapView v;
    v.span = static_cast<float>(t) / std::max(1.0f, zoom);
    v.x0 = k - v.span / 2;
    v.y0 = q - v.span / 2;
    return clamp_view(v, t);
}

HeatmapView zoom_about(const HeatmapView& v, int t, float side, float factor, float px, float py) {
    const CellPoint c = screen_to_cell(v, side, px, py);
    HeatmapView z = v;
    z.span = clamp_view(HeatmapView{0, 0, v.span / factor}, t).span;
    // The cell under the pointer stays there: c = x0' + px * span' / side.
    z.x0 = c.k - px * z.span / side;
    z.y0 = c.q - py * z.span / side;
    return clamp_view(z, t);
}

HeatmapView pan_by(const HeatmapView& v, int t, float side, float dx, float dy) {
    HeatmapView p = v;
    p.x0 -= dx * v.span / side;
    p.y0 -= dy * v.span / side;
    return clamp_view(p, t);
}

CellRange cells_of_pixel(float origin, float span, int t, float side, int p) {
    // Pixel p covers [origin + p*span/side, origin + (p+1)*span/side): the cells
    // whose interval meets it, at least the one under the pixel's left edge.
    const double per_px = static_cast<double>(span) / side;
    const double a = origin + p * per_px, b = origin + (p + 1) * per_px;
    CellRange r;
    r.first = std::clamp(static_cast<int>(std::floor(a)), 0, t - 1);
    r.last = std::clamp(static_cast<int>(std::ceil(b)), r.first + 1, t);
    return r;
}

CellRange visible_cells(float origin, float span, int t) {
    CellRange r;
    r.first = std::clamp(static_cast<int>(std::floor(origin)), 0, t);
    r.last = std::clamp(static_cast<int>(std::ceil(origin + span)), r.first, t);
    return r;
}

int label_every(float cell_px, float label_px) {
    if (!(cell_px > 0)) return 1 << 20;  // no room: effectively no labels
    if (cell_px >= label_px) return 1;
    for (int decade = 1;; decade *= 10)
        for (int m : {1, 2, 5})
            if (cell_px * static_cast<float>(m * decade) >= label_px) return m * decade;
}

std::vector<int> top_keys(const float* row, int t, int n) {
    std::vector<int> keys(t);
    std::iota(keys.begin(), keys.end(), 0);
    keys.erase(std::remove_if(keys.begin(), keys.end(), [&](int k) { return !(row[k] > 0.0f); }),
               keys.end());
    const int m = std::min(n, static_cast<int>(keys.size()));
    std::partial_sort(keys.begin(), keys.begin() + m, keys.end(),
                      [&](int a, int b) { return row[a] != row[b] ? row[a] > row[b] : a < b; });
    keys.resize(m);
    return keys;
}

}  // namespace plab::viewer
