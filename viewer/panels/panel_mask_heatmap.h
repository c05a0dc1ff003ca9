// The Mask panel's heatmap, drawn in parts that share one MaskFrame (panel_mask.cpp
// lays the panel out and calls them in order; panel_mask_heatmap.cpp draws them).
//
// What it teaches (lessons/03-chunked-prefill.md): see panel_mask.cpp. The parts are the
// heatmap's texture, its squares with the chunk in view outlined, the chunk bands and
// axis labels, the hover (crosshair, tooltip, zoom, pan, pin, paint) and the legend.
#pragma once

#include <imgui.h>

#include <vector>

#include "app/heatmap_view.h"
#include "app/snapshot.h"
#include "app/viewer_state.h"

namespace plab::viewer {

// Side by side: a cell whose float bits differ between the two runs.
inline constexpr ImU32 kMaskDiffers = IM_COL32(255, 60, 200, 255);

// One frame of the heatmap: where its squares are on screen, which cells they show and
// which step is in view. Made once a frame by draw_mask; every part reads it.
struct MaskFrame {
    const MaskSnapshot& mask;
    const AttentionMap& map;  // the layer and head shown
    int t = 0;                // prompt length T
    bool compare = false;     // a second run beside the first
    int panes = 1;            // squares side by side: 1, or 2 with `compare`
    int pinned = -1;          // the pinned query row; -1 = none
    float font = 0;           // the font's size, pixels
    float side = 0;           // a square's side, pixels
    float gap = 0;            // between two squares
    HeatmapView hv{};         // the cells in view (heatmap_view.h), as the frame began
    float cell = 0;           // pixels per cell
    ImVec2 origin{};          // top-left of the heatmap's block: row labels, column labels
    ImVec2 a{}, b{};          // the first square's corners
    ImVec2 b_last{};          // the last square's bottom-right corner
    ImDrawList* dl = nullptr;
    std::vector<int> starts{};  // chunk c's rows: starts[c]..starts[c+1]-1; back() = T
    std::vector<int> chunk{};   // (T) the chunk of each position
    int done_rows = 0;          // rows whose chunk has run
    int current = -1;           // the chunk in view (the last one run); -1 = none yet

    // Square `pane`'s top-left corner; a cell coordinate -> screen.
    ImVec2 corner(int pane) const { return ImVec2(a.x + pane * (side + gap), a.y); }
    float sx(int pane, float k) const { return corner(pane).x + key_to_screen(hv, side, k); }
    float sy(float q) const { return a.y + query_to_screen(hv, side, q); }
};

// 1. The squares' textures (state.heatmap, and state.heatmap_compare side by side),
//    uploaded again only when what they show changes.
void update_mask_textures(const MaskFrame& f, ViewerState& state);
// 2. Each square, a veil over the rows whose chunk has not run yet, the current chunk
//    outlined, the pinned row and its most-read keys marked; the masked triangle's label.
void draw_mask_squares(const MaskFrame& f, const ViewerState& state);
// 3. Chunk bands left of the first square, and the axis labels of the cells in view.
void draw_mask_chunk_bands(const MaskFrame& f);
void draw_mask_row_labels(const MaskFrame& f);
void draw_mask_column_labels(const MaskFrame& f);
// 4. Hover: crosshair and tooltip; the wheel zooms about the pointer, a drag pans, a
//    click pins the query row (again: unpins), or with 'paint' on toggles the cell.
void handle_mask_hover(const MaskFrame& f, ViewerState& state);
// 5. The legend at `l`, `legend_w` wide: the colour scale, what each mark means, and the
//    pinned query's most-read keys under it. Returns the lowest y drawn so far (`bottom`
//    or below the legend).
float draw_mask_legend(const MaskFrame& f, const ViewerState& state, ImVec2 l, float legend_w,
                       float bottom);

}  // namespace plab::viewer
