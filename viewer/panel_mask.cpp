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

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/mask.h"
#include "panels.h"
#include "ui_common.h"

namespace plab::viewer {
namespace {

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
//    rasterizer pays per line and per pixel). Rebuilt only when what it shows changes.
void update_texture(const MaskSnapshot& mask, const AttentionMap& map, ViewerState& state,
                    int side) {
    char key[128];
    std::snprintf(key, sizeof key, "%d/%d/%d/%d/%s/%s/%d/", side, map.probe.layer, map.probe.head,
                  state.sqrt_colours ? 1 : 0, mask.backend.c_str(), mask.plan.to_string().c_str(),
                  mask.n_tokens());
    // A painted mask keeps its file name: its version tells the pictures apart.
    const std::string full_key = key + mask.mask.spec() + "/" +
                                 std::to_string(state.explorer.paint_version) + "/" + state.prompt;
    if (state.heatmap.id != 0 && state.heatmap.key == full_key) return;
    const int t = mask.n_tokens();
    const bool grid = side >= 6 * t;  // grid lines only when cells are 6+ pixels
    std::vector<bool> chunk_start(t, false);
    for (int p = 0, c = 0; c < static_cast<int>(mask.plan.lengths.size()); ++c) {
        chunk_start[p] = c > 0;
        p += mask.plan.lengths[c];
    }
    const Mask m = mask.mask.view();
    std::vector<unsigned char> rgba(static_cast<size_t>(side) * side * 4);
    auto cell_of = [&](int px) { return static_cast<int>(static_cast<long long>(px) * t / side); };
    for (int y = 0; y < side; ++y) {
        const int q = cell_of(y);
        const bool row_edge = y > 0 && cell_of(y - 1) != q;
        for (int x = 0; x < side; ++x) {
            const int k = cell_of(x);
            const bool col_edge = x > 0 && cell_of(x - 1) != k;
            ImU32 c;
            if (!m.visible(q, k))  // the engine's mask
                c = (x + y) % 8 < 2 ? colour::kHatch : colour::kMasked;
            else
                c = probability_colour(map.probs[static_cast<size_t>(q) * t + k],
                                       state.sqrt_colours);
            if (grid && (row_edge || col_edge)) c = IM_COL32(20, 20, 24, 255);
            if (row_edge && chunk_start[q]) c = IM_COL32(255, 190, 60, 255);
            unsigned char* px = &rgba[(static_cast<size_t>(y) * side + x) * 4];
            px[0] = c & 0xFF;
            px[1] = (c >> 8) & 0xFF;
            px[2] = (c >> 16) & 0xFF;
            px[3] = 255;
        }
    }
    upload_texture(state.heatmap, rgba, side, side);
    state.heatmap.key = full_key;
}

// 2. The hover tooltip: token texts, probability, score and why a cell is masked.
void cell_tooltip(const MaskSnapshot& mask, const AttentionMap& map, int q, int k, int done_rows,
                  const std::vector<int>& chunk) {
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
    }
    ImGui::EndTooltip();
}

}  // namespace

void draw_mask(const Snapshot& snap, ViewerState& state) {
    const MaskSnapshot& mask = snap.mask;
    ImGui::TextUnformatted("Mask & attention: rows = queries, columns = keys");
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
        "the heatmap shows which tiles a fast kernel skips.");
    ImGui::TextDisabled("%s",
                        "Try: press Home, then the right arrow: each chunk adds its rows. Slide "
                        "chunk size: the colours stay the same.");
    draw_mask_picker(mask, state);
    if (!mask.error.empty()) {
        ImGui::TextColored(ImColor(colour::kBad), "%s", mask.error.c_str());
        return;
    }
    if (!mask.ready) return;

    // 1. Layer/head selectors and view options.
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 8);
    ImGui::SliderInt("layer", &state.attn_layer, 0, mask.n_layers - 1);
    item_tooltip("Which transformer layer's attention to show (0 = closest to the input).");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 8);
    ImGui::SliderInt("head", &state.attn_head, 0, mask.n_heads - 1);
    item_tooltip((snap.head_hint.empty()
                      ? std::string()
                      : "The panel opened on this model's " + snap.head_hint + ".\n") +
                 "Which query head. With grouped-query attention heads " +
                 std::to_string(mask.n_heads / std::max(1, mask.n_kv_heads)) +
                 " at a time share one K/V head (H=" + std::to_string(mask.n_heads) +
                 ", Hkv=" + std::to_string(mask.n_kv_heads) + ").");
    ImGui::SameLine();
    ImGui::Checkbox("sqrt colours", &state.sqrt_colours);
    item_tooltip(
        "Colour by the square root of the probability, so that small weights stay "
        "visible next to a large one. Off: linear colours.");
    ImGui::SameLine();
    ImGui::TextDisabled("%d tokens, plan %s, prefill %s", mask.n_tokens(),
                        mask.plan.to_string().c_str(), format_us(mask.prefill_us).c_str());
    item_tooltip(
        "Prompt length T in tokens, the chunk plan the engine ran (chunk lengths) and "
        "the wall time of the prefill chunks on backend " +
        mask.backend + ".");
    state.attn_layer = std::clamp(state.attn_layer, 0, mask.n_layers - 1);
    state.attn_head = std::clamp(state.attn_head, 0, mask.n_heads - 1);
    const AttentionMap* map = mask.map(state.attn_layer, state.attn_head);
    if (map == nullptr) return;

    // 2. Geometry: a square heatmap that fills the panel, token labels when they fit.
    const int t = mask.n_tokens();
    const float font = ImGui::GetFontSize();
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float margin_left = font * 4.5f, margin_top = font * 1.4f, legend = font * 30;
    const float side = std::floor(std::max(
        64.0f, std::min(avail.x - margin_left - legend, avail.y - margin_top - font * 2.5f)));
    const float cell = side / static_cast<float>(t);
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const ImVec2 a(std::floor(origin.x + margin_left), std::floor(origin.y + margin_top));
    update_texture(mask, *map, state, static_cast<int>(side));
    const ImVec2 b(a.x + side, a.y + side);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const StepView step = step_view(snap, state);
    std::vector<int> starts{0};
    for (int len : mask.plan.lengths) starts.push_back(starts.back() + len);
    const int done_rows = starts[step.stages_done];
    const std::vector<int> chunk = chunk_of(mask.plan);

    // 3. The heatmap, then a veil over the rows whose chunk has not run yet.
    dl->AddImage(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(state.heatmap.id)), a, b);
    if (done_rows < t)
        dl->AddRectFilled(ImVec2(a.x, a.y + done_rows * cell), b, IM_COL32(30, 30, 36, 235));
    // A label inside the masked triangle says why it is empty.
    if (side > font * 20 && mask.mask.is_causal()) {
        const char* why = "masked: a token never attends to later tokens";
        const ImVec2 sz = ImGui::CalcTextSize(why);
        const ImVec2 p(b.x - sz.x - font, a.y + side * 0.12f);
        dl->AddRectFilled(ImVec2(p.x - 4, p.y - 2), ImVec2(p.x + sz.x + 4, p.y + sz.y + 2),
                          IM_COL32(30, 30, 36, 230), 3.0f);
        dl->AddText(p, IM_COL32(230, 230, 230, 255), why);
    }

    // 4. Chunk bands on the left, boundaries across, the current chunk outlined.
    for (size_t c = 0; c + 1 < starts.size(); ++c) {
        const float y0 = a.y + starts[c] * cell, y1 = a.y + starts[c + 1] * cell;
        dl->AddRectFilled(ImVec2(a.x - font * 0.7f, y0), ImVec2(a.x - 2, y1),
                          c % 2 ? IM_COL32(200, 140, 40, 255) : IM_COL32(120, 90, 40, 255));
    }
    const int current = step.stages_done > 0 ? step.stages_done - 1 : -1;
    if (current >= 0) {
        const float y0 = a.y + starts[current] * cell, y1 = a.y + starts[current + 1] * cell;
        const float x0 = a.x + starts[current] * cell, x1 = a.x + starts[current + 1] * cell;
        if (starts[current] > 0)
            dl->AddRect(ImVec2(a.x, y0), ImVec2(x0, y1), colour::kCached, 0, 0, 2.5f);
        dl->AddRect(ImVec2(x0, y0), ImVec2(x1, y1), colour::kChunk, 0, 0, 2.5f);
    }

    // 5. Axis labels: token text when a row is tall enough, else every n-th position.
    const int every = std::max(1, static_cast<int>(std::ceil(font * 1.2f / cell)));
    for (int i = 0; i < t; i += every) {
        const std::string pos = std::to_string(i);
        std::string row = every == 1 ? token_label(mask.token_text[i]) : pos;
        if (row.size() > 7) row = row.substr(0, 6) + "~";  // long BPE tokens: hover shows all
        const float y = a.y + (i + 0.5f) * cell - font * 0.5f;
        dl->AddText(ImVec2(origin.x, y), IM_COL32(220, 220, 220, 255), row.c_str());
        if (i % (every * (every == 1 ? 2 : 3)) == 0)
            dl->AddText(ImVec2(a.x + i * cell, origin.y), IM_COL32(200, 200, 200, 255),
                        pos.c_str());
    }

    // 6. Hover: crosshair and tooltip.
    ImGui::SetCursorScreenPos(a);
    ImGui::InvisibleButton("heatmap", ImVec2(side, side));
    if (ImGui::IsItemHovered()) {
        const ImVec2 m = ImGui::GetIO().MousePos;
        const int k = std::clamp(static_cast<int>((m.x - a.x) / cell), 0, t - 1);
        const int q = std::clamp(static_cast<int>((m.y - a.y) / cell), 0, t - 1);
        dl->AddRect(ImVec2(a.x, a.y + q * cell), ImVec2(b.x, a.y + (q + 1) * cell),
                    IM_COL32(255, 255, 255, 120));
        dl->AddRect(ImVec2(a.x + k * cell, a.y), ImVec2(a.x + (k + 1) * cell, b.y),
                    IM_COL32(255, 255, 255, 120));
        if (state.explorer.paint && ImGui::IsItemClicked())
            paint_cell(mask, state, q, k);
        else
            cell_tooltip(mask, *map, q, k, done_rows, chunk);
    }

    // 7. Legend.
    const ImVec2 l(b.x + font * 1.5f, a.y);
    dl->AddText(l, IM_COL32_WHITE, "probability");
    const float bar_h = std::min(side * 0.6f, font * 14);
    for (int i = 0; i < 64; ++i) {
        const float p = 1.0f - i / 63.0f;
        dl->AddRectFilled(ImVec2(l.x, l.y + font * 1.5f + i * bar_h / 64),
                          ImVec2(l.x + font, l.y + font * 1.5f + (i + 1) * bar_h / 64 + 1),
                          probability_colour(p, state.sqrt_colours));
    }
    for (float p : {1.0f, 0.5f, 0.25f, 0.1f, 0.0f}) {
        const float tpos = state.sqrt_colours ? std::sqrt(p) : p;
        char buf[16];
        std::snprintf(buf, sizeof buf, "%.2g", p);
        dl->AddText(ImVec2(l.x + font * 1.4f, l.y + font * 1.5f + (1 - tpos) * bar_h - font * 0.5f),
                    IM_COL32_WHITE, buf);
    }
    float y = l.y + font * 2.5f + bar_h;
    auto swatch = [&](ImU32 fill, ImU32 border, bool hatch, const char* text) {
        const ImVec2 s0(l.x, y), s1(l.x + font, y + font);
        dl->AddRectFilled(s0, s1, fill);
        if (hatch) draw_hatch(dl, s0, s1, colour::kHatch, 5);
        if (border) dl->AddRect(s0, s1, border, 0, 0, 2.0f);
        dl->AddText(ImVec2(l.x + font * 1.4f, y), IM_COL32_WHITE, text);
        y += font * 1.5f;
    };
    swatch(colour::kMasked, 0, true, mask.mask.is_causal() ? "masked: the future" : "masked");
    swatch(IM_COL32(30, 30, 36, 255), 0, false, "chunk not run yet");
    swatch(0, colour::kChunk, false, "current chunk's keys");
    swatch(0, colour::kCached, false, "keys from KV cache");
    // The explorer's facts in a column right of the legend.
    ImGui::SetCursorScreenPos(ImVec2(l.x + font * 11, a.y));
    ImGui::BeginGroup();
    draw_mask_facts(mask, state, font * 18);
    ImGui::EndGroup();
    ImGui::SetCursorScreenPos(ImVec2(origin.x, b.y + font * 0.4f));
    if (current >= 0) {
        char buf[200];
        std::snprintf(buf, sizeof buf,
                      "chunk %d of %zu: queries %d..%d see cached keys 0..%d and their own keys "
                      "%d..%d, %s",
                      current, mask.plan.lengths.size(), starts[current], starts[current + 1] - 1,
                      starts[current] - 1, starts[current], starts[current + 1] - 1,
                      mask.mask.is_causal() ? "each only up to itself" : "as the mask allows");
        ImGui::TextColored(ImColor(colour::kChunk), "%s", buf);
    } else {
        ImGui::TextDisabled("before prefill: no chunk has run (press the right arrow)");
    }
}

}  // namespace plab::viewer
