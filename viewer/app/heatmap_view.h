// The attention heatmap's window onto the T x T grid of (query, key) cells: zoom,
// pan, fit, which cells a screen pixel covers, and the keys a pinned query reads most.
//
// What it teaches: nothing about prefill; it makes a 512-token prompt readable (the
// heatmap of lesson 3 and the mask explorer). Pure arithmetic without ImGui or OpenGL,
// so tests/viewer/test_viewer_heatmap.cpp checks it without a window; panel_mask.cpp
// turns mouse wheel, drag and the F key into calls of these functions.
//
// Coordinates: a cell coordinate is a float position on the grid (key k across, query q
// down; cell (q, k) covers [k, k+1) x [q, q+1)). The view shows the square of `span`
// cells whose top-left corner is (x0, y0), drawn into a square of `side` pixels.
#pragma once

#include <vector>

namespace plab::viewer {

struct HeatmapView {
    float x0 = 0, y0 = 0;  // key and query coordinate at the square's left and top edges
    float span = 0;        // cells across (and down); 0 = not sized yet (the panel fits it)
};

// The deepest zoom shows this many cells across: a cell is then a quarter of the square.
inline constexpr float kMinSpanCells = 4;

// The whole grid: x0 = y0 = 0, span = t.
HeatmapView fit_view(int t);
// span within [min(t, kMinSpanCells), t] and the window inside [0, t] on both axes.
HeatmapView clamp_view(HeatmapView v, int t);
// t / span: 1 = the whole prompt, 8 = an eighth of it across.
float zoom_of(const HeatmapView& v, int t);
float cell_pixels(const HeatmapView& v, float side);  // side / span

// A point `px` pixels right of and `py` below the square's corner, in cell coordinates.
struct CellPoint {
    float k = 0, q = 0;
};
CellPoint screen_to_cell(const HeatmapView& v, float side, float px, float py);
// Cell coordinate -> pixels from the square's left (key) or top (query) edge.
float key_to_screen(const HeatmapView& v, float side, float k);
float query_to_screen(const HeatmapView& v, float side, float q);

// Magnified `zoom` times (1 = fit) with cell (q, k) at the centre, clamped to the grid.
HeatmapView zoom_to(int t, float zoom, float q, float k);
// Magnified by `factor` (> 1 closer) about the pixel (px, py): the cell coordinate
// under it stays under it, unless clamping to the grid moves the window.
HeatmapView zoom_about(const HeatmapView& v, int t, float side, float factor, float px, float py);
// The content follows a drag of (dx, dy) pixels, clamped to the grid.
HeatmapView pan_by(const HeatmapView& v, int t, float side, float dx, float dy);

// Cells [first, last) on one axis that pixel column (or row) `p` of the square covers:
// one cell when zoomed in, several when cells are smaller than a pixel (the texture
// then shows their largest probability, so a sharp peak is never lost between samples).
struct CellRange {
    int first = 0, last = 0;
};
CellRange cells_of_pixel(float origin, float span, int t, float side, int p);
// Cells at least partly inside the view on one axis.
CellRange visible_cells(float origin, float span, int t);

// Label every n-th position so that labels `label_px` tall (or wide) do not overlap in
// cells of `cell_px`: 1, 2, 5, 10, 20, 50, ... (round steps are easy to read off).
int label_every(float cell_px, float label_px);

// Keys listed for a pinned query (the panel's table has room for this many).
inline constexpr int kPinnedKeys = 8;

// The n keys with the largest probabilities in a row of t (largest first, ties by
// lower position), leaving out zeros (masked or underflowed keys are not "attended to").
std::vector<int> top_keys(const float* row, int t, int n);

}  // namespace plab::viewer
