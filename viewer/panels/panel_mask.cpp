// Panel 2, the mask and attention: who each token looks at, chunk by chunk.
//
// What it teaches (lessons/03-chunked-prefill.md; the mask itself is lesson 1): a heatmap of one head's
// attention probabilities, row = query position, column = key position. The
// cells the mask hides are hatched (causal: the upper triangle, the future; the
// explorer above, panel_mask_explorer.cpp, picks any other mask).
// Chunk boundaries are drawn as bands: chunk c's queries (its rows) read every
// earlier key from the KV cache (blue) plus their own keys (orange), so the
// rows come out the same whatever the chunking. The probabilities are the
// engine's attention probe (Session::prefill with ForwardProbes); the masked
// cells are placed with the engine's own bound mask's visible() (core/mask.h).
//
// This file lays the panel out (where the heatmap, its legend and the explorer's facts
// go) and draws the texts around the heatmap; panel_mask_heatmap.cpp draws the heatmap.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "app/heatmap_view.h"
#include "panels/layout_probe.h"
#include "panels/panel_mask_heatmap.h"
#include "panels/panels.h"
#include "panels/ui_colours.h"
#include "panels/ui_format.h"
#include "panels/ui_playback.h"
#include "panels/ui_widgets.h"

namespace plab::viewer {
namespace {

// Chunk index of every position, from the plan the engine ran.
std::vector<int> chunk_of(const ChunkPlan& plan) {
    std::vector<int> out;
    for (int c = 0; c < static_cast<int>(plan.lengths.size()); ++c)
        out.insert(out.end(), plan.lengths[c], c);
    return out;
}

// Where the legend and the facts go (a narrow panel - lesson mode, a projector's scale -
// keeps a readable heatmap): beside the heatmap when it stays at least kMinSide fonts
// wide, else the facts, then the legend too, move below it.
enum class MaskPlace { kBothBeside, kLegendBeside, kBelow };

struct MaskLayout {
    float font = 0;
    float margin_left = 0, margin_top = 0, gap = 0;  // row labels, column labels, squares
    float legend_w = 0, facts_w = 0;
    int panes = 1;
    ImVec2 avail;  // the room left in the panel (after the facts, when they go first)
    MaskPlace place = MaskPlace::kBelow;
    // The facts (pairs, tile map, the chunking verdict) are the panel's point (lesson
    // 13): where they fit beside nothing, they go above the heatmap, which then takes
    // the height left, rather than under it, below the fold of a lesson's pane.
    bool facts_first = false;

    // A square's side with `beside` pixels of legend and facts right of the squares.
    float side_with(float beside) const {
        return (avail.x - margin_left - gap * (panes - 1) - beside) / panes;
    }
    // What goes right of the squares in this place.
    float beside() const {
        return place == MaskPlace::kBothBeside     ? font * 1.5f + legend_w + facts_w
               : place == MaskPlace::kLegendBeside ? font * 1.5f + legend_w
                                                   : font * 0.5f;
    }
};

MaskLayout plan_mask_layout(bool compare, int pinned) {
    MaskLayout lay;
    const float font = ImGui::GetFontSize();
    lay.font = font;
    lay.avail = ImGui::GetContentRegionAvail();
    lay.margin_left = font * 4.5f, lay.margin_top = font * 1.4f, lay.gap = font;
    lay.legend_w = font * (pinned >= 0 ? 15.5f : 11), lay.facts_w = font * 18;
    lay.panes = compare ? 2 : 1;
    constexpr float kMinSide = 16;
    lay.place = lay.side_with(font * 1.5f + lay.legend_w + lay.facts_w) >= font * kMinSide
                    ? MaskPlace::kBothBeside
                : lay.side_with(font * 1.5f + lay.legend_w) >= font * kMinSide
                    ? MaskPlace::kLegendBeside
                    : MaskPlace::kBelow;
    lay.facts_first = lay.place == MaskPlace::kLegendBeside ||
                      (lay.place == MaskPlace::kBelow && lay.legend_w + lay.facts_w > lay.avail.x);
    return lay;
}

// The title, its "(?)" and the hint.
void draw_mask_title() {
    wrapped_text("Mask & attention: rows = queries, columns = keys");
    help_marker(
        "Lesson 3 - chunked prefill (lessons/03-chunked-prefill.md); the causal mask is lesson "
        "1.\n\nEach row is one "
        "query position's attention over the keys; colours are probabilities from the "
        "engine (each row sums to 1). Hatched cells are the future: masked, never read. "
        "Bands on the left are prefill chunks: a chunk's rows see all earlier keys from "
        "the KV cache (blue outline) plus their own (orange). Hover a cell for the tokens, "
        "the score and the probability. Slide 'chunk size': the picture does not change.\n\n"
        "Pick another mask above (sliding window, sinks, chunked-local, dilated, prefix-LM, "
        "packed documents, or two composed): the engine runs under it, and the tile map beside "
        "the heatmap shows which tiles a fast kernel skips.\n\nLong prompts: the mouse wheel zooms "
        "about the pointer, a drag pans, F fits the whole prompt again. Click a row to pin that "
        "query and list the keys it reads most (click again or Esc: unpin). Down/up arrows: the "
        "next/previous layer. --compare-chunks PLAN or --compare-backend NAME puts a second run "
        "beside the first, the cells whose float bits differ highlighted.");
    hint_text(
        "Try: press Home, then the right arrow: each chunk adds its rows. Slide chunk size: the "
        "colours stay the same.");
}

// 1. Layer/head selectors and view options; the layer and head kept in range.
void draw_mask_options(const Snapshot& snap, ViewerState& state) {
    const MaskSnapshot& mask = snap.mask;
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 8);
    ImGui::SliderInt("layer", &state.attn_layer, 0, mask.n_layers - 1);
    probe_control("layer");
    item_tooltip(
        "Which transformer layer's attention to show (0 = closest to the input). "
        "Keys: down arrow the next layer, up arrow the previous one.");
    flow(labelled_width(ImGui::GetFontSize() * 8, "head"));
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 8);
    ImGui::SliderInt("head", &state.attn_head, 0, mask.n_heads - 1);
    probe_control("head");
    item_tooltip((snap.head_hint.empty()
                      ? std::string()
                      : "The panel opened on this model's " + snap.head_hint + ".\n") +
                 "Which query head. With grouped-query attention heads " +
                 std::to_string(mask.n_heads / std::max(1, mask.n_kv_heads)) +
                 " at a time share one K/V head (H=" + std::to_string(mask.n_heads) +
                 ", Hkv=" + std::to_string(mask.n_kv_heads) + ").");
    flow(checkbox_width("sqrt colours"));
    ImGui::Checkbox("sqrt colours", &state.sqrt_colours);
    probe_control("sqrt colours");
    item_tooltip(
        "Colour by the square root of the probability, so that small weights stay "
        "visible next to a large one. Off: linear colours.");
    const std::string ran = std::to_string(mask.n_tokens()) + " tokens, plan " +
                            mask.plan.to_string() + ", prefill " + format_us(mask.prefill_us);
    flow(text_width(ran));
    line_text(ran, dim_colour());
    item_tooltip(
        "Prompt length T in tokens, the chunk plan the engine ran (chunk lengths) and "
        "the wall time of the prefill chunks on backend " +
        mask.backend + ".");
    state.attn_layer = std::clamp(state.attn_layer, 0, mask.n_layers - 1);
    state.attn_head = std::clamp(state.attn_head, 0, mask.n_heads - 1);
}

// Side by side: the two runs and how many cells' bits differ.
void draw_mask_compare_line(const MaskSnapshot& mask) {
    const MaskViewSnapshot& view = mask.view;
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "left: %s plan %s   right: %s plan %s   %lld cells' bits differ, by up "
                  "to %.2g%s",
                  mask.backend.c_str(), mask.plan.to_string().c_str(), view.compare_backend.c_str(),
                  view.compare_plan.to_string().c_str(), view.n_differs, view.compare_max_abs,
                  view.compare_bitwise_promised ? " (reference backends: bitwise promised)"
                                                : " (highlighted)");
    wrapped_with_tip(
        buf,
        "The same prompt and mask run twice. Two chunk plans on a reference backend must "
        "give the same bits (lesson 3); a fast backend sums in another order and rounds "
        "differently, so its probabilities may differ in the last bits (lesson 4). Cells "
        "whose float bits differ are tinted; hover one for both values.",
        kMaskDiffers);
}

// The view sized for this prompt: the asked zoom (--zoom, F fits) when not sized yet,
// kept inside the prompt (which may have changed).
void size_mask_view(ViewerState& state, int t, int pinned) {
    if (state.heatmap_view_tokens != t) {  // another prompt: sized again
        state.heatmap_view = HeatmapView{};
        state.heatmap_view_tokens = t;
    }
    if (!(state.heatmap_view.span > 0)) {  // not sized yet
        const float cq = state.zoom_q >= 0 ? state.zoom_q : pinned >= 0 ? pinned + 0.5f : t / 2.0f;
        const float ck = state.zoom_k >= 0 ? state.zoom_k : cq;
        state.heatmap_view = zoom_to(t, state.zoom, cq, ck);
    }
    state.heatmap_view = clamp_view(state.heatmap_view, t);
}

// 2. Geometry: a square heatmap that fills the panel (two side by side), zoomed and
//    panned by state.heatmap_view (heatmap_view.h), and the step in view.
MaskFrame mask_frame(const Snapshot& snap, ViewerState& state, const AttentionMap& map,
                     const MaskLayout& lay, bool compare, int pinned) {
    const MaskSnapshot& mask = snap.mask;
    const float font = lay.font;
    MaskFrame f{mask, map};
    f.t = mask.n_tokens();
    f.compare = compare;
    f.panes = lay.panes;
    f.pinned = pinned;
    f.font = font;
    f.gap = lay.gap;
    // As tall as the panel shows, but never under 12 lines when the width allows (the
    // panel scrolls down rather than shrink the heatmap to a stamp).
    f.side = std::floor(
        std::max(64.0f, std::min(lay.side_with(lay.beside()),
                                 std::max(lay.avail.y - lay.margin_top - font * 2.5f, font * 12))));
    size_mask_view(state, f.t, pinned);
    f.hv = state.heatmap_view;
    f.cell = cell_pixels(f.hv, f.side);
    f.origin = ImGui::GetCursorScreenPos();
    f.a = ImVec2(std::floor(f.origin.x + lay.margin_left), std::floor(f.origin.y + lay.margin_top));
    f.b = ImVec2(f.a.x + f.side, f.a.y + f.side);
    f.b_last = ImVec2(f.corner(f.panes - 1).x + f.side, f.b.y);
    f.dl = ImGui::GetWindowDrawList();
    const StepView step = step_view(snap, state);
    f.starts = mask.plan.starts();
    f.done_rows = f.starts[step.stages_done];
    f.chunk = chunk_of(mask.plan);
    f.current = step.stages_done > 0 ? step.stages_done - 1 : -1;
    return f;
}

// The chunk in view, under the heatmap. Returns the lowest y drawn.
float draw_mask_chunk_line(const MaskFrame& f) {
    const MaskSnapshot& mask = f.mask;
    const std::vector<int>& starts = f.starts;
    const int current = f.current;
    ImGui::SetCursorScreenPos(ImVec2(f.origin.x, f.b.y + f.font * 0.4f));
    const float under_w = f.b_last.x - f.origin.x;
    if (current >= 0) {
        char buf[200];
        std::snprintf(buf, sizeof buf,
                      "chunk %d of %zu: queries %d..%d see cached keys 0..%d and their own keys "
                      "%d..%d, %s",
                      current + 1, mask.plan.lengths.size(),  // counted from 1, as the steps are
                      starts[current], starts[current + 1] - 1, starts[current] - 1,
                      starts[current], starts[current + 1] - 1,
                      mask.mask.is_causal() ? "each only up to itself" : "as the mask allows");
        wrapped_text(buf, colour::kChunk, under_w);
    } else {
        wrapped_text("before prefill: no chunk has run (press the right arrow)", dim_colour(),
                     under_w);
    }
    return std::max(f.b.y, ImGui::GetItemRectMax().y);
}

// The explorer's facts right of the legend (at `l`), or under everything (`bottom`).
void draw_mask_facts_after(const MaskFrame& f, ViewerState& state, const MaskLayout& lay, ImVec2 l,
                           float bottom) {
    const bool facts_beside = lay.place == MaskPlace::kBothBeside ||
                              (lay.place == MaskPlace::kBelow &&
                               l.x + lay.legend_w + lay.facts_w <= f.origin.x + lay.avail.x);
    const ImVec2 at =
        facts_beside ? ImVec2(l.x + lay.legend_w, l.y) : ImVec2(f.origin.x, bottom + f.font * 0.6f);
    ImGui::SetCursorScreenPos(at);
    ImGui::BeginGroup();
    draw_mask_facts(f.mask, state, std::min(lay.facts_w, f.origin.x + lay.avail.x - at.x));
    ImGui::EndGroup();
}

}  // namespace

void draw_mask(const Snapshot& snap, ViewerState& state) {
    const MaskSnapshot& mask = snap.mask;
    draw_mask_title();
    draw_mask_picker(mask, state);
    if (!mask.error.empty()) {
        wrapped_text(mask.error, colour::kBad);
        return;
    }
    if (!mask.ready) return;

    // 1. Layer/head selectors and view options.
    draw_mask_options(snap, state);
    const AttentionMap* map = mask.map(state.attn_layer, state.attn_head);
    if (map == nullptr) return;

    // 2. Geometry: the second run beside the first, the pinned row, where the parts go.
    const MaskViewSnapshot& view = mask.view;
    const bool compare = view.ready && !view.compare.empty() && view.layer == state.attn_layer &&
                         view.head == state.attn_head;
    if (state.pinned_query >= mask.n_tokens()) state.pinned_query = -1;  // a shorter prompt
    const int pinned = state.pinned_query;
    if (!view.error.empty()) wrapped_text(view.error, colour::kBad);
    if (compare) draw_mask_compare_line(mask);
    MaskLayout lay = plan_mask_layout(compare, pinned);
    if (lay.facts_first) {
        ImGui::BeginGroup();
        draw_mask_facts(mask, state, lay.avail.x);
        ImGui::EndGroup();
        ImGui::Spacing();
        lay.avail = ImGui::GetContentRegionAvail();
    }
    const MaskFrame f = mask_frame(snap, state, *map, lay, compare, pinned);
    update_mask_textures(f, state);

    // 3. The squares, the chunk bands on the left, the axis labels of the cells in view.
    draw_mask_squares(f, state);
    draw_mask_chunk_bands(f);
    draw_mask_row_labels(f);
    draw_mask_column_labels(f);

    // 4. Hover, zoom, pan, pin and paint.
    handle_mask_hover(f, state);

    // 5. The chunk in view under the heatmap; the legend beside the heatmap, or below it.
    float bottom = draw_mask_chunk_line(f);
    const ImVec2 l = lay.place == MaskPlace::kBelow ? ImVec2(f.origin.x, bottom + f.font * 0.6f)
                                                    : ImVec2(f.b_last.x + f.font * 1.5f, f.a.y);
    bottom = draw_mask_legend(f, state, l, lay.legend_w, bottom);

    // 6. The explorer's facts, unless drawn above the heatmap.
    if (!lay.facts_first) draw_mask_facts_after(f, state, lay, l, bottom);
}

}  // namespace plab::viewer
