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
#include <imgui.h>
#include <imgui_internal.h>  // SetItemUsingMouseWheel (1.86 has no public form)

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "app/heatmap_view.h"
#include "core/mask.h"
#include "panels/layout_probe.h"
#include "panels/panels.h"
#include "panels/ui_common.h"

namespace plab::viewer {
namespace {

// Side by side: a cell whose float bits differ between the two runs.
constexpr ImU32 kDiffers = IM_COL32(255, 60, 200, 255);

// a + (b - a) * f per channel: a highlight that lets the colour under it show.
ImU32 mix(ImU32 a, ImU32 b, float f) {
    ImU32 out = 0;
    for (int shift = 0; shift < 32; shift += 8) {
        const float x = static_cast<float>((a >> shift) & 0xFF);
        const float y = static_cast<float>((b >> shift) & 0xFF);
        out |= static_cast<ImU32>(x + (y - x) * f + 0.5f) << shift;
    }
    return out;
}

// Chunk index of every position, from the plan the engine ran.
std::vector<int> chunk_of(const ChunkPlan& plan) {
    std::vector<int> out;
    for (int c = 0; c < static_cast<int>(plan.lengths.size()); ++c)
        out.insert(out.end(), plan.lengths[c], c);
    return out;
}

// 1. The heatmap texture, drawn at screen resolution (side x side pixels) with the
//    cell colours, the hatching of masked cells, grid lines and chunk boundaries baked
//    in, so a frame draws one textured quad however long the prompt is (a software
//    rasterizer pays per line and per pixel). Only the cells in the view are drawn;
//    where a pixel covers several cells it shows their largest probability (a sharp peak
//    stays visible at any zoom) and the highlight if any of them differs side by side.
//    Rebuilt only when what it shows changes (a drag or the wheel changes the view).
void update_texture(const MaskSnapshot& mask, const std::vector<float>& probs,
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
            if (differ) col = mix(col, kDiffers, 0.6f);  // still shows the probability under it
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

// 2. The hover tooltip: token texts, probability, score and why a cell is masked.
void cell_tooltip(const MaskSnapshot& mask, const AttentionMap& map, int q, int k, int done_rows,
                  const std::vector<int>& chunk, bool compare) {
    const int t = mask.n_tokens();
    ImGui::BeginTooltip();
    ImGui::Text("query %d '%s'  ->  key %d '%s'", q, token_label(mask.token_text[q]).c_str(), k,
                token_label(mask.token_text[k]).c_str());
    if (!mask.mask.view().visible(q, k)) {
        if (mask.mask.is_causal()) {
            ImGui::TextColored(ImColor(colour::kHatch),
                               "masked (future): key %d comes after query %d", k, q);
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
    } else if (q >= done_rows) {
        ImGui::TextDisabled("not computed yet: query %d's chunk %d has not run", q, chunk[q]);
    } else {
        const float p = map.probs[static_cast<size_t>(q) * t + k];
        ImGui::Text("probability %.6f", p);
        ImGui::TextDisabled("(engine's attention probe, layer %d head %d)", map.probe.layer,
                            map.probe.head);
        const std::vector<float>* scores = mask.scores_of(map);
        if (scores != nullptr)
            ImGui::Text("score q.k/sqrt(Dh) = %.4f", (*scores)[static_cast<size_t>(q) * t + k]);
        else
            ImGui::TextDisabled("score: the engine has no score probe for this backend");
        ImGui::Text("query in chunk %d; key %s", chunk[q],
                    chunk[k] < chunk[q] ? "read from the KV cache (an earlier chunk)"
                                        : "computed in this same chunk");
        if (compare) {
            const MaskViewSnapshot& v = mask.view;
            const size_t i = static_cast<size_t>(q) * t + k;
            ImGui::Text("side by side, %s: probability %.9g", v.compare.c_str(),
                        v.compare_probs[i]);
            if (v.differs[i])
                ImGui::TextColored(ImColor(kDiffers), "float bits differ (%.3g apart)",
                                   std::fabs(v.compare_probs[i] - p));
            else
                ImGui::TextDisabled("the same float bits");
        }
    }
    ImGui::EndTooltip();
}

// 3. The pinned query's table: the keys it attends to most, as the panel's map holds
//    them (the self-check holds them to a fresh probe: check_mask_view).
void draw_pinned(const MaskSnapshot& mask, int q, const std::vector<int>& chunk, float width) {
    const MaskViewSnapshot& v = mask.view;
    const int t = mask.n_tokens();
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
            line_text(std::to_string(chunk[k]) + (chunk[k] < chunk[q] ? " cache" : ""));
        }
        probe_table("pinned keys");
        ImGui::EndTable();
    }
}

}  // namespace

void draw_mask(const Snapshot& snap, ViewerState& state) {
    const MaskSnapshot& mask = snap.mask;
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
    draw_mask_picker(mask, state);
    if (!mask.error.empty()) {
        wrapped_text(mask.error, colour::kBad);
        return;
    }
    if (!mask.ready) return;

    // 1. Layer/head selectors and view options.
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
    const AttentionMap* map = mask.map(state.attn_layer, state.attn_head);
    if (map == nullptr) return;

    // 2. Geometry: a square heatmap that fills the panel (two side by side), zoomed and
    //    panned by state.heatmap_view (heatmap_view.h), token labels when they fit.
    const int t = mask.n_tokens();
    const MaskViewSnapshot& view = mask.view;
    const bool compare = view.ready && !view.compare.empty() && view.layer == state.attn_layer &&
                         view.head == state.attn_head;
    if (state.pinned_query >= t) state.pinned_query = -1;  // the prompt became shorter
    const int pinned = state.pinned_query;
    if (!view.error.empty()) wrapped_text(view.error, colour::kBad);
    if (compare) {
        char buf[400];
        std::snprintf(buf, sizeof buf,
                      "left: %s plan %s   right: %s plan %s   %lld cells' bits differ, by up "
                      "to %.2g%s",
                      mask.backend.c_str(), mask.plan.to_string().c_str(),
                      view.compare_backend.c_str(), view.compare_plan.to_string().c_str(),
                      view.n_differs, view.compare_max_abs,
                      view.compare_bitwise_promised ? " (reference backends: bitwise promised)"
                                                    : " (highlighted)");
        wrapped_with_tip(
            buf,
            "The same prompt and mask run twice. Two chunk plans on a reference backend must "
            "give the same bits (lesson 3); a fast backend sums in another order and rounds "
            "differently, so its probabilities may differ in the last bits (lesson 4). Cells "
            "whose float bits differ are tinted; hover one for both values.",
            kDiffers);
    }
    // Where the legend and the facts go (a narrow panel - lesson mode, a
    // projector's scale - keeps a readable heatmap): beside the heatmap when it stays at
    // least kMinSide fonts wide, else the facts, then the legend too, move below it.
    const float font = ImGui::GetFontSize();
    ImVec2 avail = ImGui::GetContentRegionAvail();
    const float margin_left = font * 4.5f, margin_top = font * 1.4f, gap = font;
    const float legend_w = font * (pinned >= 0 ? 15.5f : 11), facts_w = font * 18;
    const int panes = compare ? 2 : 1;
    auto side_with = [&](float beside) {
        return (avail.x - margin_left - gap * (panes - 1) - beside) / panes;
    };
    constexpr float kMinSide = 16;
    enum class Place { kBothBeside, kLegendBeside, kBelow };
    const Place place =
        side_with(font * 1.5f + legend_w + facts_w) >= font * kMinSide ? Place::kBothBeside
        : side_with(font * 1.5f + legend_w) >= font * kMinSide         ? Place::kLegendBeside
                                                                       : Place::kBelow;
    // The facts (pairs, tile map, the chunking verdict) are the panel's point (lesson
    // 13): where they fit beside nothing, they go above the heatmap, which then takes
    // the height left, rather than under it, below the fold of a lesson's pane.
    const bool facts_first =
        place == Place::kLegendBeside || (place == Place::kBelow && legend_w + facts_w > avail.x);
    if (facts_first) {
        ImGui::BeginGroup();
        draw_mask_facts(mask, state, avail.x);
        ImGui::EndGroup();
        ImGui::Spacing();
        avail = ImGui::GetContentRegionAvail();
    }
    const float beside = place == Place::kBothBeside     ? font * 1.5f + legend_w + facts_w
                         : place == Place::kLegendBeside ? font * 1.5f + legend_w
                                                         : font * 0.5f;
    // As tall as the panel shows, but never under 12 lines when the width allows (the
    // panel scrolls down rather than shrink the heatmap to a stamp).
    const float side = std::floor(std::max(
        64.0f,
        std::min(side_with(beside), std::max(avail.y - margin_top - font * 2.5f, font * 12))));
    if (state.heatmap_view_tokens != t) {  // another prompt: sized again
        state.heatmap_view = HeatmapView{};
        state.heatmap_view_tokens = t;
    }
    if (!(state.heatmap_view.span > 0)) {  // not sized yet: the asked zoom (--zoom, F fits)
        const float cq = state.zoom_q >= 0 ? state.zoom_q : pinned >= 0 ? pinned + 0.5f : t / 2.0f;
        const float ck = state.zoom_k >= 0 ? state.zoom_k : cq;
        state.heatmap_view = zoom_to(t, state.zoom, cq, ck);
    }
    state.heatmap_view = clamp_view(state.heatmap_view, t);  // the prompt may have changed
    const HeatmapView hv = state.heatmap_view;
    const float cell = cell_pixels(hv, side);
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const ImVec2 a(std::floor(origin.x + margin_left), std::floor(origin.y + margin_top));
    update_texture(mask, map->probs, nullptr, "", state, state.heatmap, static_cast<int>(side));
    if (compare)
        update_texture(mask, view.compare_probs, &view.differs, view.compare, state,
                       state.heatmap_compare, static_cast<int>(side));
    // Square `pane`'s corners; a cell coordinate -> screen.
    auto corner = [&](int pane) { return ImVec2(a.x + pane * (side + gap), a.y); };
    auto sx = [&](int pane, float k) { return corner(pane).x + key_to_screen(hv, side, k); };
    auto sy = [&](float q) { return a.y + query_to_screen(hv, side, q); };
    const ImVec2 b(a.x + side, a.y + side);
    const ImVec2 b_last(corner(panes - 1).x + side, b.y);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const StepView step = step_view(snap, state);
    std::vector<int> starts{0};
    for (int len : mask.plan.lengths) starts.push_back(starts.back() + len);
    const int done_rows = starts[step.stages_done];
    const std::vector<int> chunk = chunk_of(mask.plan);
    const int current = step.stages_done > 0 ? step.stages_done - 1 : -1;

    // 3. Each heatmap, a veil over the rows whose chunk has not run yet, the current
    //    chunk outlined, the pinned row and its most-read keys marked.
    for (int pane = 0; pane < panes; ++pane) {
        const ImVec2 p0 = corner(pane), p1(p0.x + side, p0.y + side);
        const HeatmapTexture& tex = pane == 0 ? state.heatmap : state.heatmap_compare;
        dl->AddImage(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(tex.id)), p0, p1);
        dl->PushClipRect(p0, p1, true);
        if (done_rows < t)
            dl->AddRectFilled(ImVec2(p0.x, sy(static_cast<float>(done_rows))), p1,
                              IM_COL32(30, 30, 36, 235));
        if (current >= 0) {
            const float y0 = sy(starts[current]), y1 = sy(starts[current + 1]);
            const float x0 = sx(pane, starts[current]), x1 = sx(pane, starts[current + 1]);
            if (starts[current] > 0)
                dl->AddRect(ImVec2(sx(pane, 0), y0), ImVec2(x0, y1), colour::kCached, 0, 0,
                            px(2.5f));
            dl->AddRect(ImVec2(x0, y0), ImVec2(x1, y1), colour::kChunk, 0, 0, px(2.5f));
        }
        if (pinned >= 0) {
            dl->AddRect(ImVec2(p0.x, sy(pinned) - 1), ImVec2(p1.x, sy(pinned + 1.0f) + 1),
                        IM_COL32_WHITE, 0, 0, px(2.0f));
            if (view.ready && view.pinned == pinned)
                for (int k : view.pinned_keys)
                    dl->AddRect(ImVec2(sx(pane, k) - 2, sy(pinned) - 2),
                                ImVec2(sx(pane, k + 1.0f) + 2, sy(pinned + 1.0f) + 2),
                                IM_COL32(255, 255, 255, 255), 0, 0, px(1.5f));
        }
        dl->PopClipRect();
    }
    // A label inside the masked triangle says why it is empty (the whole prompt in view).
    const char* why = "masked: a token never attends to later tokens";
    const ImVec2 sz = ImGui::CalcTextSize(why);
    if (sz.x + font * 2 < side * 0.9f && mask.mask.is_causal() && zoom_of(hv, t) < 1.01f) {
        const ImVec2 p(b.x - sz.x - font, a.y + side * 0.12f);
        dl->AddRectFilled(ImVec2(p.x - 4, p.y - 2), ImVec2(p.x + sz.x + 4, p.y + sz.y + 2),
                          IM_COL32(30, 30, 36, 230), px(3.0f));
        dl->AddText(p, IM_COL32(230, 230, 230, 255), why);
    }

    // 4. Chunk bands on the left of the first square.
    dl->PushClipRect(ImVec2(a.x - font, a.y), b, true);
    for (size_t c = 0; c + 1 < starts.size(); ++c)
        dl->AddRectFilled(ImVec2(a.x - font * 0.7f, sy(starts[c])),
                          ImVec2(a.x - 2, sy(starts[c + 1])),
                          c % 2 ? IM_COL32(200, 140, 40, 255) : IM_COL32(120, 90, 40, 255));
    dl->PopClipRect();

    // 5. Axis labels of the cells in view: a row's token text when rows are a line tall,
    //    else every n-th position (1, 2, 5, 10, ...); columns: positions that fit whole.
    const CellRange rows_in_view = visible_cells(hv.y0, hv.span, t);
    const int every = label_every(cell, font * 1.2f);
    const int every_col = label_every(cell, ImGui::CalcTextSize("0000").x);
    {
        const float row_w = a.x - font * 0.7f - origin.x;
        ChartProbe rows("heatmap rows", ImVec2(origin.x, a.y - 1),
                        ImVec2(a.x - font * 0.7f, b.y + font), false);
        dl->PushClipRect(ImVec2(origin.x, a.y - 1), ImVec2(a.x - font * 0.7f, b.y + font), true);
        float last_y = -1e9f;  // a label the clamp below pushes onto the one above is left out
        for (int i = rows_in_view.first; i < rows_in_view.last; ++i) {
            if (i % every != 0) continue;
            std::string row = every == 1 ? token_label(mask.token_text[i]) : std::to_string(i);
            // Long BPE tokens shortened to what fits, ending in '~' (hover shows all).
            while (row.size() > 1 && text_width(row) > row_w) {
                std::size_t cut = row.size() - (row.back() == '~' ? 2 : 1);
                while (cut > 0 && (static_cast<unsigned char>(row[cut]) & 0xC0) == 0x80) --cut;
                row = row.substr(0, cut) + "~";
            }
            // Centred on its row, kept inside the heatmap's height (row 0's label).
            const float y = std::clamp(sy(i + 0.5f) - font * 0.5f, a.y - 1, b.y);
            if (y < last_y + font) continue;
            last_y = y;
            rows.label(dl, ImVec2(origin.x, y),
                       i == pinned ? IM_COL32_WHITE : IM_COL32(220, 220, 220, 255), row);
        }
        dl->PopClipRect();
    }
    const CellRange cols_in_view = visible_cells(hv.x0, hv.span, t);
    for (int pane = 0; pane < panes; ++pane) {
        const float x0 = corner(pane).x, x1 = x0 + side;
        ChartProbe cols("heatmap columns", ImVec2(x0, origin.y), ImVec2(x1, a.y), false);
        for (int i = cols_in_view.first; i < cols_in_view.last; ++i) {
            const std::string label = std::to_string(i);
            const float x = sx(pane, static_cast<float>(i));
            // Only whole labels: one the square's edge would cut is left out.
            if (i % every_col == 0 && x >= x0 - 0.5f && x + text_width(label) <= x1)
                cols.label(dl, ImVec2(x, origin.y), IM_COL32(200, 200, 200, 255), label);
        }
    }

    // 6. Hover: crosshair and tooltip; wheel zooms about the pointer, a drag pans, a click
    //    pins the query row (again: unpins), or with 'paint' on toggles the cell.
    const ImGuiIO& io = ImGui::GetIO();
    for (int pane = 0; pane < panes; ++pane) {
        const ImVec2 p0 = corner(pane);
        ImGui::SetCursorScreenPos(p0);
        ImGui::PushID(pane);
        ImGui::InvisibleButton("heatmap", ImVec2(side, side));
        ImGui::SetItemUsingMouseWheel();  // the wheel zooms here instead of scrolling the panel
        const ImVec2 m = io.MousePos;
        if (ImGui::IsItemHovered() && io.MouseWheel != 0)
            state.heatmap_view =
                zoom_about(hv, t, side, std::pow(1.25f, io.MouseWheel), m.x - p0.x, m.y - p0.y);
        if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 3.0f))
            state.heatmap_view =
                pan_by(state.heatmap_view, t, side, io.MouseDelta.x, io.MouseDelta.y);
        if (ImGui::IsItemHovered()) {
            const CellPoint c = screen_to_cell(hv, side, m.x - p0.x, m.y - p0.y);
            const int k = std::clamp(static_cast<int>(c.k), 0, t - 1);
            const int q = std::clamp(static_cast<int>(c.q), 0, t - 1);
            dl->PushClipRect(p0, ImVec2(p0.x + side, p0.y + side), true);
            dl->AddRect(ImVec2(p0.x, sy(q)), ImVec2(p0.x + side, sy(q + 1.0f)),
                        IM_COL32(255, 255, 255, 120));
            dl->AddRect(ImVec2(sx(pane, k), a.y), ImVec2(sx(pane, k + 1.0f), b.y),
                        IM_COL32(255, 255, 255, 120));
            dl->PopClipRect();
            // A click is a press and release on the heatmap that moved under 3 pixels (more
            // is a drag that pans).
            const bool released_in_place =
                ImGui::IsItemDeactivated() && io.MouseDragMaxDistanceSqr[0] < 9.0f;
            if (state.explorer.paint && ImGui::IsItemClicked()) {
                paint_cell(mask, state, q, k);
            } else {
                if (!state.explorer.paint && released_in_place)
                    state.pinned_query = state.pinned_query == q ? -1 : q;
                cell_tooltip(mask, pane == 0 ? *map : *map, q, k, done_rows, chunk, compare);
            }
        }
        ImGui::PopID();
    }

    // 7. The chunk in view, under the heatmap.
    float bottom = b.y;
    ImGui::SetCursorScreenPos(ImVec2(origin.x, b.y + font * 0.4f));
    const float under_w = b_last.x - origin.x;
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
    bottom = std::max(bottom, ImGui::GetItemRectMax().y);

    // 8. The legend: the colour scale and what each mark means (beside the heatmap, or
    //    below it), the pinned query's most-read keys under it.
    const ImVec2 l = place == Place::kBelow ? ImVec2(origin.x, bottom + font * 0.6f)
                                            : ImVec2(b_last.x + font * 1.5f, a.y);
    {
        const float right = ImGui::GetWindowDrawList()->GetClipRectMax().x;
        ChartProbe legend("heatmap legend", l, ImVec2(right, l.y + 1e6f), false);
        legend.label(dl, l, IM_COL32_WHITE, "probability");
        const float bar_h = std::clamp(side * 0.6f, font * 6, font * (pinned >= 0 ? 6 : 14));
        for (int i = 0; i < 64; ++i) {
            const float p = 1.0f - i / 63.0f;
            dl->AddRectFilled(ImVec2(l.x, l.y + font * 1.5f + i * bar_h / 64),
                              ImVec2(l.x + font, l.y + font * 1.5f + (i + 1) * bar_h / 64 + 1),
                              probability_colour(p, state.sqrt_colours));
        }
        float last_label = 1e9f;  // a tick too close to the one below is left out
        for (float p : {0.0f, 0.1f, 0.25f, 0.5f, 1.0f}) {
            const float tpos = state.sqrt_colours ? std::sqrt(p) : p;
            const float ty = l.y + font * 1.5f + (1 - tpos) * bar_h - font * 0.5f;
            if (ty > last_label - font) continue;
            char buf[16];
            std::snprintf(buf, sizeof buf, "%.2g", p);
            legend.label(dl, ImVec2(l.x + font * 1.4f, ty), IM_COL32_WHITE, buf);
            last_label = ty;
        }
        float y = l.y + font * 2.5f + bar_h;
        auto swatch = [&](ImU32 fill, ImU32 border, bool hatch, const char* text) {
            const ImVec2 s0(l.x, y), s1(l.x + font, y + font);
            dl->AddRectFilled(s0, s1, fill);
            if (hatch) draw_hatch(dl, s0, s1, colour::kHatch, 5);
            if (border) dl->AddRect(s0, s1, border, 0, 0, px(2.0f));
            legend.label(dl, ImVec2(l.x + font * 1.4f, y), IM_COL32_WHITE, text);
            y += font * 1.5f;
        };
        swatch(colour::kMasked, 0, true, mask.mask.is_causal() ? "masked: the future" : "masked");
        swatch(IM_COL32(30, 30, 36, 255), 0, false, "chunk not run yet");
        swatch(0, colour::kChunk, false, "current chunk's keys");
        swatch(0, colour::kCached, false, "keys from KV cache");
        if (compare) swatch(kDiffers, 0, false, "bits differ");
        ImGui::SetCursorScreenPos(ImVec2(l.x, l.y));
        ImGui::Dummy(ImVec2(legend_w - font * 0.5f, y - l.y));
        if (pinned >= 0) {
            ImGui::SetCursorScreenPos(ImVec2(l.x, y + font * 0.3f));
            ImGui::BeginGroup();
            draw_pinned(mask, pinned, chunk, legend_w - font);
            ImGui::EndGroup();
        }
        bottom = std::max(bottom, ImGui::GetItemRectMax().y);
    }
    // 9. The explorer's facts: right of the legend, or under everything (unless drawn
    //    above the heatmap).
    if (facts_first) return;
    const bool facts_beside =
        place == Place::kBothBeside ||
        (place == Place::kBelow && l.x + legend_w + facts_w <= origin.x + avail.x);
    const ImVec2 f =
        facts_beside ? ImVec2(l.x + legend_w, l.y) : ImVec2(origin.x, bottom + font * 0.6f);
    ImGui::SetCursorScreenPos(f);
    ImGui::BeginGroup();
    draw_mask_facts(mask, state, std::min(facts_w, origin.x + avail.x - f.x));
    ImGui::EndGroup();
}

}  // namespace plab::viewer
