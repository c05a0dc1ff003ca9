// The Mask panel's heatmap: its texture, squares, bands, labels, hover and legend (see
// panel_mask_heatmap.h; the panel and its layout: panel_mask.cpp).
//
// What it teaches (lessons/03-chunked-prefill.md): one head's attention probabilities,
// row = query position, column = key position, the masked cells hatched and the chunk in
// view outlined: its rows read every earlier key from the KV cache (blue) plus their own
// keys (orange). Every cell is the engine's: the probabilities are its attention probe,
// the masked cells its bound mask's visible() (core/mask.h).
#include "panels/panel_mask_heatmap.h"

#include <imgui_internal.h>  // SetItemUsingMouseWheel (1.86 has no public form)

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/mask.h"
#include "panels/layout_probe.h"
#include "panels/panels.h"
#include "panels/ui_colours.h"
#include "panels/ui_format.h"
#include "panels/ui_scale.h"
#include "panels/ui_texture.h"
#include "panels/ui_widgets.h"

namespace plab::viewer {
namespace {

// a + (b - a) * f per channel: a highlight that lets the colour under it show.
ImU32 mask_colour_mix(ImU32 a, ImU32 b, float f) {
    ImU32 out = 0;
    for (int shift = 0; shift < 32; shift += 8) {
        const float x = static_cast<float>((a >> shift) & 0xFF);
        const float y = static_cast<float>((b >> shift) & 0xFF);
        out |= static_cast<ImU32>(x + (y - x) * f + 0.5f) << shift;
    }
    return out;
}

// The heatmap texture, drawn at screen resolution (side x side pixels) with the cell
// colours, the hatching of masked cells, grid lines and chunk boundaries baked in, so a
// frame draws one textured quad however long the prompt is (a software rasterizer pays
// per line and per pixel). Only the cells in the view are drawn; where a pixel covers
// several cells it shows their largest probability (a sharp peak stays visible at any
// zoom) and the highlight if any of them differs side by side. Rebuilt only when what it
// shows changes (a drag or the wheel changes the view).
void update_mask_texture(const MaskSnapshot& mask, const std::vector<float>& probs,
                         const std::vector<unsigned char>* differs, const std::string& what,
                         const ViewerState& state, HeatmapTexture& tex, int side) {
    const HeatmapView& v = state.heatmap_view;
    char key[160];
    std::snprintf(key, sizeof key, "%d/%.4f/%.4f/%.4f/%d/%d/%d/%s/%s/%d/", side, v.x0, v.y0, v.span,
                  state.attn_layer, state.attn_head, state.sqrt_colours ? 1 : 0,
                  mask.backend.c_str(), mask.plan.to_string().c_str(), mask.n_tokens());
    // A painted mask keeps its file name: its version tells the pictures apart.
    const std::string full_key = key + what + "/" + mask.mask.spec() + "/" +
                                 std::to_string(state.explorer.paint_version) + "/" + state.prompt;
    if (tex.id != 0 && tex.key == full_key) return;
    const int t = mask.n_tokens();
    const bool grid = cell_pixels(v, static_cast<float>(side)) >= 6;  // 6+ pixel cells
    // starts_upto[i]: chunk starts (after the first chunk) at positions <= i.
    std::vector<int> starts_upto(t, 0);
    for (int p = 0, c = 0; c < static_cast<int>(mask.plan.lengths.size()); ++c) {
        if (c > 0 && p < t) starts_upto[p] = 1;
        p += mask.plan.lengths[c];
    }
    for (int i = 1; i < t; ++i) starts_upto[i] += starts_upto[i - 1];
    std::vector<CellRange> rows(side), cols(side);
    for (int p = 0; p < side; ++p) {
        rows[p] = cells_of_pixel(v.y0, v.span, t, static_cast<float>(side), p);
        cols[p] = cells_of_pixel(v.x0, v.span, t, static_cast<float>(side), p);
    }
    const Mask m = mask.mask.view();
    std::vector<unsigned char> rgba(static_cast<size_t>(side) * side * 4);
    for (int y = 0; y < side; ++y) {
        const CellRange r = rows[y];
        const bool row_edge = y > 0 && rows[y - 1].first != r.first;
        const bool chunk_edge = row_edge && starts_upto[r.first] > starts_upto[rows[y - 1].first];
        for (int x = 0; x < side; ++x) {
            const CellRange c = cols[x];
            const bool col_edge = x > 0 && cols[x - 1].first != c.first;
            float best = -1;  // the largest visible probability under the pixel
            bool differ = false;
            for (int q = r.first; q < r.last; ++q)
                for (int k = c.first; k < c.last; ++k) {
                    if (!m.visible(q, k)) continue;  // the engine's mask
                    const size_t i = static_cast<size_t>(q) * t + k;
                    best = std::max(best, probs[i]);
                    differ = differ || (differs != nullptr && (*differs)[i] != 0);
                }
            ImU32 col;
            if (best < 0)
                col = (x + y) % 8 < 2 ? colour::kHatch : colour::kMasked;
            else
                col = probability_colour(best, state.sqrt_colours);
            // The highlight still shows the probability under it.
            if (differ) col = mask_colour_mix(col, kMaskDiffers, 0.6f);
            if (grid && (row_edge || col_edge)) col = IM_COL32(20, 20, 24, 255);
            if (chunk_edge) col = IM_COL32(255, 190, 60, 255);
            unsigned char* px = &rgba[(static_cast<size_t>(y) * side + x) * 4];
            px[0] = col & 0xFF;
            px[1] = (col >> 8) & 0xFF;
            px[2] = (col >> 16) & 0xFF;
            px[3] = 255;
        }
    }
    upload_texture(tex, rgba, side, side);
    tex.key = full_key;
}

// Why a hovered cell is empty: the mask hides it (the future, or a key the mask drops).
void masked_cell_lines(const MaskSnapshot& mask, int q, int k) {
    if (mask.mask.is_causal()) {
        ImGui::TextColored(ImColor(colour::kHatch), "masked (future): key %d comes after query %d",
                           k, q);
        ImGui::TextUnformatted(
            "The causal mask lets position p attend to keys 0..p only:\n"
            "a token cannot look at text that follows it. Probability 0.");
    } else {
        ImGui::TextColored(ImColor(colour::kHatch), "masked: %s hides key %d from query %d",
                           mask.mask.spec().c_str(), k, q);
        ImGui::TextUnformatted(
            k > q ? "The future: no mask here lets a query read it. Probability 0."
                  : "An earlier key the mask hides (outside the window, another chunk\n"
                    "or document, or between dilated keys). Probability 0.");
    }
}

// A computed cell: its probability and score, where its key came from and, side by
// side, the second run's value.
void computed_cell_lines(const MaskFrame& f, int q, int k) {
    const MaskSnapshot& mask = f.mask;
    const int t = f.t;
    const float p = f.map.probs[static_cast<size_t>(q) * t + k];
    ImGui::Text("probability %.6f", p);
    ImGui::TextDisabled("(engine's attention probe, layer %d head %d)", f.map.probe.layer,
                        f.map.probe.head);
    const std::vector<float>* scores = mask.scores_of(f.map);
    if (scores != nullptr)
        ImGui::Text("score q.k/sqrt(Dh) = %.4f", (*scores)[static_cast<size_t>(q) * t + k]);
    else
        ImGui::TextDisabled("score: the engine has no score probe for this backend");
    ImGui::Text("query in chunk %d; key %s", f.chunk[q],
                f.chunk[k] < f.chunk[q] ? "read from the KV cache (an earlier chunk)"
                                        : "computed in this same chunk");
    if (f.compare) {
        const MaskViewSnapshot& v = mask.view;
        const size_t i = static_cast<size_t>(q) * t + k;
        ImGui::Text("side by side, %s: probability %.9g", v.compare.c_str(), v.compare_probs[i]);
        if (v.differs[i])
            ImGui::TextColored(ImColor(kMaskDiffers), "float bits differ (%.3g apart)",
                               std::fabs(v.compare_probs[i] - p));
        else
            ImGui::TextDisabled("the same float bits");
    }
}

// The hover tooltip: token texts, probability, score and why a cell is masked.
void mask_cell_tooltip(const MaskFrame& f, int q, int k) {
    const MaskSnapshot& mask = f.mask;
    ImGui::BeginTooltip();
    ImGui::Text("query %d '%s'  ->  key %d '%s'", q, token_label(mask.token_text[q]).c_str(), k,
                token_label(mask.token_text[k]).c_str());
    if (!mask.mask.view().visible(q, k))
        masked_cell_lines(mask, q, k);
    else if (q >= f.done_rows)
        ImGui::TextDisabled("not computed yet: query %d's chunk %d has not run", q, f.chunk[q]);
    else
        computed_cell_lines(f, q, k);
    ImGui::EndTooltip();
}

// The pinned query's table: the keys it attends to most, as the panel's map holds
// them (the self-check holds them to a fresh probe: check_mask_view).
void draw_mask_pinned(const MaskFrame& f, float width) {
    const MaskSnapshot& mask = f.mask;
    const MaskViewSnapshot& v = mask.view;
    const int t = f.t;
    const int q = f.pinned;
    wrapped_with_tip(
        "query " + std::to_string(q) + " '" + token_label(mask.token_text[q]) + "' reads most:",
        "Click the row again to unpin it (or press Esc). Chunk: the prefill chunk "
        "that computed the key; 'cache' = read from the KV cache by this query.",
        0, width);
    if (!v.ready || v.pinned != q) {
        line_text("asking the engine...", dim_colour());
        return;
    }
    const AttentionMap* map = mask.map(v.layer, v.head);
    if (map == nullptr) return;
    if (ImGui::BeginTable("pinned", 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit,
                          ImVec2(width, 0))) {
        ImGui::TableSetupColumn("key");
        ImGui::TableSetupColumn("token");
        ImGui::TableSetupColumn("p");
        ImGui::TableSetupColumn("chunk");
        ImGui::TableHeadersRow();
        for (int k : v.pinned_keys) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            line_text(std::to_string(k));
            ImGui::TableNextColumn();
            std::string text = token_label(mask.token_text[k]);
            if (text.size() > 8) text = text.substr(0, 7) + "~";
            line_text(text);
            item_tooltip("'" + token_label(mask.token_text[k]) + "' at position " +
                         std::to_string(k));
            ImGui::TableNextColumn();
            char p[32];
            std::snprintf(p, sizeof p, "%.4g", map->probs[static_cast<size_t>(q) * t + k]);
            line_text(p);
            ImGui::TableNextColumn();
            line_text(std::to_string(f.chunk[k]) + (f.chunk[k] < f.chunk[q] ? " cache" : ""));
        }
        probe_table("pinned keys");
        ImGui::EndTable();
    }
}

// A label inside the masked triangle says why it is empty (the whole prompt in view).
void draw_mask_triangle_label(const MaskFrame& f) {
    const char* why = "masked: a token never attends to later tokens";
    const ImVec2 sz = ImGui::CalcTextSize(why);
    if (sz.x + f.font * 2 < f.side * 0.9f && f.mask.mask.is_causal() &&
        zoom_of(f.hv, f.t) < 1.01f) {
        const ImVec2 p(f.b.x - sz.x - f.font, f.a.y + f.side * 0.12f);
        f.dl->AddRectFilled(ImVec2(p.x - 4, p.y - 2), ImVec2(p.x + sz.x + 4, p.y + sz.y + 2),
                            IM_COL32(30, 30, 36, 230), px(3.0f));
        f.dl->AddText(p, IM_COL32(230, 230, 230, 255), why);
    }
}

// A row's label: its token's text when rows are a line tall, else its position; long
// BPE tokens shortened to what fits `row_w`, ending in '~' (hover shows all).
std::string mask_row_label(const MaskFrame& f, int i, int every, float row_w) {
    std::string row = every == 1 ? token_label(f.mask.token_text[i]) : std::to_string(i);
    while (row.size() > 1 && text_width(row) > row_w) {
        std::size_t cut = row.size() - (row.back() == '~' ? 2 : 1);
        while (cut > 0 && (static_cast<unsigned char>(row[cut]) & 0xC0) == 0x80) --cut;
        row = row.substr(0, cut) + "~";
    }
    return row;
}

// The hovered cell of square `pane` at pointer `m`: crosshair, then a click (pin or
// paint) or the tooltip.
void hover_mask_cell(const MaskFrame& f, ViewerState& state, int pane, ImVec2 m) {
    const ImGuiIO& io = ImGui::GetIO();
    const ImVec2 p0 = f.corner(pane);
    const int t = f.t;
    const CellPoint c = screen_to_cell(f.hv, f.side, m.x - p0.x, m.y - p0.y);
    const int k = std::clamp(static_cast<int>(c.k), 0, t - 1);
    const int q = std::clamp(static_cast<int>(c.q), 0, t - 1);
    f.dl->PushClipRect(p0, ImVec2(p0.x + f.side, p0.y + f.side), true);
    f.dl->AddRect(ImVec2(p0.x, f.sy(q)), ImVec2(p0.x + f.side, f.sy(q + 1.0f)),
                  IM_COL32(255, 255, 255, 120));
    f.dl->AddRect(ImVec2(f.sx(pane, k), f.a.y), ImVec2(f.sx(pane, k + 1.0f), f.b.y),
                  IM_COL32(255, 255, 255, 120));
    f.dl->PopClipRect();
    // A click is a press and release on the heatmap that moved under 3 pixels (more
    // is a drag that pans).
    const bool released_in_place =
        ImGui::IsItemDeactivated() && io.MouseDragMaxDistanceSqr[0] < 9.0f;
    if (state.explorer.paint && ImGui::IsItemClicked()) {
        paint_cell(f.mask, state, q, k);
    } else {
        if (!state.explorer.paint && released_in_place)
            state.pinned_query = state.pinned_query == q ? -1 : q;
        mask_cell_tooltip(f, q, k);
    }
}

// The colour scale at `l`: a bar `bar_h` tall from probability 1 (top) to 0, and the
// ticks that fit.
void draw_mask_colour_scale(const MaskFrame& f, ChartProbe& legend, ImVec2 l, float bar_h,
                            bool sqrt_colours) {
    const float font = f.font;
    for (int i = 0; i < 64; ++i) {
        const float p = 1.0f - i / 63.0f;
        f.dl->AddRectFilled(ImVec2(l.x, l.y + font * 1.5f + i * bar_h / 64),
                            ImVec2(l.x + font, l.y + font * 1.5f + (i + 1) * bar_h / 64 + 1),
                            probability_colour(p, sqrt_colours));
    }
    float last_label = 1e9f;  // a tick too close to the one below is left out
    for (float p : {0.0f, 0.1f, 0.25f, 0.5f, 1.0f}) {
        const float tpos = sqrt_colours ? std::sqrt(p) : p;
        const float ty = l.y + font * 1.5f + (1 - tpos) * bar_h - font * 0.5f;
        if (ty > last_label - font) continue;
        char buf[16];
        std::snprintf(buf, sizeof buf, "%.2g", p);
        legend.label(f.dl, ImVec2(l.x + font * 1.4f, ty), IM_COL32_WHITE, buf);
        last_label = ty;
    }
}

}  // namespace

void update_mask_textures(const MaskFrame& f, ViewerState& state) {
    const int side = static_cast<int>(f.side);
    update_mask_texture(f.mask, f.map.probs, nullptr, "", state, state.heatmap, side);
    if (f.compare) {
        const MaskViewSnapshot& view = f.mask.view;
        update_mask_texture(f.mask, view.compare_probs, &view.differs, view.compare, state,
                            state.heatmap_compare, side);
    }
}

void draw_mask_squares(const MaskFrame& f, const ViewerState& state) {
    const MaskViewSnapshot& view = f.mask.view;
    ImDrawList* dl = f.dl;
    const std::vector<int>& starts = f.starts;
    const int current = f.current, pinned = f.pinned;
    for (int pane = 0; pane < f.panes; ++pane) {
        const ImVec2 p0 = f.corner(pane), p1(p0.x + f.side, p0.y + f.side);
        const HeatmapTexture& tex = pane == 0 ? state.heatmap : state.heatmap_compare;
        dl->AddImage(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(tex.id)), p0, p1);
        dl->PushClipRect(p0, p1, true);
        if (f.done_rows < f.t)
            dl->AddRectFilled(ImVec2(p0.x, f.sy(static_cast<float>(f.done_rows))), p1,
                              IM_COL32(30, 30, 36, 235));
        if (current >= 0) {
            const float y0 = f.sy(starts[current]), y1 = f.sy(starts[current + 1]);
            const float x0 = f.sx(pane, starts[current]), x1 = f.sx(pane, starts[current + 1]);
            if (starts[current] > 0)
                dl->AddRect(ImVec2(f.sx(pane, 0), y0), ImVec2(x0, y1), colour::kCached, 0, 0,
                            px(2.5f));
            dl->AddRect(ImVec2(x0, y0), ImVec2(x1, y1), colour::kChunk, 0, 0, px(2.5f));
        }
        if (pinned >= 0) {
            dl->AddRect(ImVec2(p0.x, f.sy(pinned) - 1), ImVec2(p1.x, f.sy(pinned + 1.0f) + 1),
                        IM_COL32_WHITE, 0, 0, px(2.0f));
            if (view.ready && view.pinned == pinned)
                for (int k : view.pinned_keys)
                    dl->AddRect(ImVec2(f.sx(pane, k) - 2, f.sy(pinned) - 2),
                                ImVec2(f.sx(pane, k + 1.0f) + 2, f.sy(pinned + 1.0f) + 2),
                                IM_COL32(255, 255, 255, 255), 0, 0, px(1.5f));
        }
        dl->PopClipRect();
    }
    draw_mask_triangle_label(f);
}

void draw_mask_chunk_bands(const MaskFrame& f) {
    const float font = f.font;
    f.dl->PushClipRect(ImVec2(f.a.x - font, f.a.y), f.b, true);
    for (size_t c = 0; c + 1 < f.starts.size(); ++c)
        f.dl->AddRectFilled(ImVec2(f.a.x - font * 0.7f, f.sy(f.starts[c])),
                            ImVec2(f.a.x - 2, f.sy(f.starts[c + 1])),
                            c % 2 ? IM_COL32(200, 140, 40, 255) : IM_COL32(120, 90, 40, 255));
    f.dl->PopClipRect();
}

void draw_mask_row_labels(const MaskFrame& f) {
    // A row's token text when rows are a line tall, else every n-th position (1, 2, 5,
    // 10, ...).
    const float font = f.font;
    const ImVec2 origin = f.origin, a = f.a, b = f.b;
    const CellRange rows_in_view = visible_cells(f.hv.y0, f.hv.span, f.t);
    const int every = label_every(f.cell, font * 1.2f);
    const float row_w = a.x - font * 0.7f - origin.x;
    ChartProbe rows("heatmap rows", ImVec2(origin.x, a.y - 1),
                    ImVec2(a.x - font * 0.7f, b.y + font), false);
    f.dl->PushClipRect(ImVec2(origin.x, a.y - 1), ImVec2(a.x - font * 0.7f, b.y + font), true);
    float last_y = -1e9f;  // a label the clamp below pushes onto the one above is left out
    for (int i = rows_in_view.first; i < rows_in_view.last; ++i) {
        if (i % every != 0) continue;
        const std::string row = mask_row_label(f, i, every, row_w);
        // Centred on its row, kept inside the heatmap's height (row 0's label).
        const float y = std::clamp(f.sy(i + 0.5f) - font * 0.5f, a.y - 1, b.y);
        if (y < last_y + font) continue;
        last_y = y;
        rows.label(f.dl, ImVec2(origin.x, y),
                   i == f.pinned ? IM_COL32_WHITE : IM_COL32(220, 220, 220, 255), row);
    }
    f.dl->PopClipRect();
}

void draw_mask_column_labels(const MaskFrame& f) {
    // Positions that fit whole.
    const int every_col = label_every(f.cell, ImGui::CalcTextSize("0000").x);
    const CellRange cols_in_view = visible_cells(f.hv.x0, f.hv.span, f.t);
    for (int pane = 0; pane < f.panes; ++pane) {
        const float x0 = f.corner(pane).x, x1 = x0 + f.side;
        ChartProbe cols("heatmap columns", ImVec2(x0, f.origin.y), ImVec2(x1, f.a.y), false);
        for (int i = cols_in_view.first; i < cols_in_view.last; ++i) {
            const std::string label = std::to_string(i);
            const float x = f.sx(pane, static_cast<float>(i));
            // Only whole labels: one the square's edge would cut is left out.
            if (i % every_col == 0 && x >= x0 - 0.5f && x + text_width(label) <= x1)
                cols.label(f.dl, ImVec2(x, f.origin.y), IM_COL32(200, 200, 200, 255), label);
        }
    }
}

void handle_mask_hover(const MaskFrame& f, ViewerState& state) {
    const ImGuiIO& io = ImGui::GetIO();
    const int t = f.t;
    const float side = f.side;
    for (int pane = 0; pane < f.panes; ++pane) {
        const ImVec2 p0 = f.corner(pane);
        ImGui::SetCursorScreenPos(p0);
        ImGui::PushID(pane);
        ImGui::InvisibleButton("heatmap", ImVec2(side, side));
        ImGui::SetItemUsingMouseWheel();  // the wheel zooms here instead of scrolling the panel
        const ImVec2 m = io.MousePos;
        if (ImGui::IsItemHovered() && io.MouseWheel != 0)
            state.heatmap_view =
                zoom_about(f.hv, t, side, std::pow(1.25f, io.MouseWheel), m.x - p0.x, m.y - p0.y);
        if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 3.0f))
            state.heatmap_view =
                pan_by(state.heatmap_view, t, side, io.MouseDelta.x, io.MouseDelta.y);
        if (ImGui::IsItemHovered()) hover_mask_cell(f, state, pane, m);
        ImGui::PopID();
    }
}

float draw_mask_legend(const MaskFrame& f, const ViewerState& state, ImVec2 l, float legend_w,
                       float bottom) {
    const float font = f.font;
    ImDrawList* dl = f.dl;
    const float right = ImGui::GetWindowDrawList()->GetClipRectMax().x;
    ChartProbe legend("heatmap legend", l, ImVec2(right, l.y + 1e6f), false);
    legend.label(dl, l, IM_COL32_WHITE, "probability");
    const float bar_h = std::clamp(f.side * 0.6f, font * 6, font * (f.pinned >= 0 ? 6 : 14));
    draw_mask_colour_scale(f, legend, l, bar_h, state.sqrt_colours);
    float y = l.y + font * 2.5f + bar_h;
    auto swatch = [&](ImU32 fill, ImU32 border, bool hatch, const char* text) {
        const ImVec2 s0(l.x, y), s1(l.x + font, y + font);
        dl->AddRectFilled(s0, s1, fill);
        if (hatch) draw_hatch(dl, s0, s1, colour::kHatch, 5);
        if (border) dl->AddRect(s0, s1, border, 0, 0, px(2.0f));
        legend.label(dl, ImVec2(l.x + font * 1.4f, y), IM_COL32_WHITE, text);
        y += font * 1.5f;
    };
    swatch(colour::kMasked, 0, true, f.mask.mask.is_causal() ? "masked: the future" : "masked");
    swatch(IM_COL32(30, 30, 36, 255), 0, false, "chunk not run yet");
    swatch(0, colour::kChunk, false, "current chunk's keys");
    swatch(0, colour::kCached, false, "keys from KV cache");
    if (f.compare) swatch(kMaskDiffers, 0, false, "bits differ");
    ImGui::SetCursorScreenPos(ImVec2(l.x, l.y));
    ImGui::Dummy(ImVec2(legend_w - font * 0.5f, y - l.y));
    if (f.pinned >= 0) {
        ImGui::SetCursorScreenPos(ImVec2(l.x, y + font * 0.3f));
        ImGui::BeginGroup();
        draw_mask_pinned(f, legend_w - font);
        ImGui::EndGroup();
    }
    return std::max(bottom, ImGui::GetItemRectMax().y);
}

}  // namespace plab::viewer
