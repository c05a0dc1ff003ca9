// Panel 7, FlashAttention by hand: one head's attention taken key tile by key tile.
//
// What it teaches (lessons/17-flash-attention.md): a tiled kernel never holds a query's
// whole row of scores. It takes the keys one tile at a time and keeps per query a running
// max m, a running denominator l = sum exp(s - m) and an output acc = sum exp(s - m) v;
// a tile that raises the max first multiplies l and acc by exp(m_old - m_new). After the
// last tile, acc / l is the whole softmax's answer (its very bits when the operations
// come in the same order). Under a mask each tile is classified first: empty (skipped,
// never loaded), partial (masked key by key), full (no mask test).
// Left: the score grid (queries down, keys across) with its tiles by class, the chunk
// boundaries and the tile in view; right: each query row's state after the step in view.
// Everything drawn is the walk in the snapshot (src/toy/flash_walk.h): the toy's by
// default, a model head's in the same form (drawn by panel_flash_head.cpp, sized for
// hundreds of positions); nothing is computed here.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "app/flash_view.h"
#include "panels/layout_probe.h"
#include "panels/panel_flash_parts.h"
#include "panels/panels.h"
#include "panels/ui_colours.h"
#include "panels/ui_playback.h"
#include "panels/ui_scale.h"
#include "panels/ui_widgets.h"

namespace plab::viewer {

// Up to 7 significant digits; -inf as the lessons write it.
std::string flash_num(float x) {
    if (std::isinf(x)) return x < 0 ? "\xE2\x88\x92inf" : "inf";  // U+2212 minus
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.7g", x);
    return buf;
}

// All the digits a float holds, and its 32 bits: for tooltips.
std::string flash_exact(float x) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &x, sizeof bits);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g (bits 0x%08X)", x, bits);
    return buf;
}

ImU32 flash_class_colour(TileClass c) {
    return c == TileClass::full      ? colour::kTileFull
           : c == TileClass::partial ? colour::kTilePartial
                                     : colour::kTileEmpty;
}

const char* flash_class_name(TileClass c) {
    return c == TileClass::full ? "full" : c == TileClass::partial ? "partial" : "empty";
}

// The keys of a step's tile: "keys 2..3" (one key: "key 2").
std::string flash_keys_text(const FlashWalkStep& s) {
    return s.key_lo == s.key_hi
               ? "key " + std::to_string(s.key_lo)
               : "keys " + std::to_string(s.key_lo) + ".." + std::to_string(s.key_hi);
}

// "query 2" or "queries 0..3": the rows of a step's query tile.
std::string flash_queries_text(const FlashWalkStep& s) {
    return s.query_lo == s.query_hi
               ? "query " + std::to_string(s.query_lo)
               : "queries " + std::to_string(s.query_lo) + ".." + std::to_string(s.query_hi);
}

// The index of the chunk holding position p (chunk_starts from the Toy panel's plan).
int flash_chunk_of(const FlashWalk& w, int p) {
    int c = 0;
    for (std::size_t i = 1; i < w.chunk_starts.size(); ++i)
        if (w.chunk_starts[i] <= p) c = static_cast<int>(i);
    return c;
}

// The last step touching each query (its row is final once that step is taken); -1: none.
std::vector<int> flash_last_steps(const FlashWalk& w) {
    std::vector<int> last(static_cast<std::size_t>(w.n_queries), -1);
    for (std::size_t i = 0; i < w.steps.size(); ++i)
        for (int q = std::max(0, w.steps[i].query_lo);
             q <= std::min(w.n_queries - 1, w.steps[i].query_hi); ++q)
            last[static_cast<std::size_t>(q)] = static_cast<int>(i);
    return last;
}

// 3a. One query's m, l and rescale cells: its latest row, or "—" before its first tile.
void flash_state_cells(const FlashRowState& r, int q, int done) {
    const std::string who = "query " + std::to_string(q);
    const char* dash = "\xE2\x80\x94";  // U+2014: not reached yet
    const std::string not_yet =
        "Not reached yet: no tile of " + who + " has been taken (step forward: right arrow).";
    ImGui::TableNextColumn();
    if (!r.reached) {
        text_with_tip(dash, not_yet);
    } else {
        text_with_tip(flash_num(r.row.m),
                      "m, the running max of " + who +
                          ": the largest score among the keys taken so far (-inf before the "
                          "first tile); it only grows. Exactly " +
                          flash_exact(r.row.m) + ".");
    }
    ImGui::TableNextColumn();
    if (!r.reached) {
        text_with_tip(dash, not_yet);
    } else {
        text_with_tip(flash_num(r.row.l),
                      "l, the running denominator of " + who +
                          ": the sum of exp(s - m) over the keys taken so far, each measured "
                          "against the current max m; at the end output = acc / l. Exactly " +
                          flash_exact(r.row.l) + ".");
    }
    ImGui::TableNextColumn();
    if (!r.reached || std::isinf(r.row.m_old)) {
        text_with_tip(dash, r.reached ? "Its first tile so far: nothing was summed before it, "
                                        "so there is nothing to re-measure (m_old = -inf)."
                                      : not_yet);
        return;
    }
    // The rescale of the step in view, when it re-measured this row: highlighted.
    if (r.row.rescaled && r.step == done - 1)
        ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, colour::kClose);
    text_with_tip("\xC3\x97" + flash_num(r.row.rescale),  // U+00D7 times
                  "rescale = exp(m_old - m_new) = exp(" + flash_num(r.row.m_old) + " - " +
                      flash_num(r.row.m) + ") = " + flash_exact(r.row.rescale) +
                      ": what l and acc were multiplied by at step " + std::to_string(r.step + 1) +
                      ", before its keys were added. " +
                      (r.row.rescaled ? "A later tile raised the max: what was summed against "
                                        "the old max is re-measured against the new one."
                                      : "1: the max did not move, nothing changes."));
}

namespace {

// Where the grid is drawn: its top-left cell, the size of a cell, and its shape.
struct FlashGrid {
    const FlashWalk& walk;
    int done = 0;                // steps taken (the cursor)
    std::vector<int> cell_step;  // (n_queries, n_keys): flash_cell_steps
    ImVec2 origin{};             // top-left corner of cell (0, 0)
    float cell = 0;
    bool numbers = false;  // cells large enough for their score
    ImVec2 at(int q, int k) const { return ImVec2(origin.x + k * cell, origin.y + q * cell); }
    int step_of(int q, int k) const {
        return cell_step[static_cast<std::size_t>(q) * walk.n_keys + k];
    }
    float score(int q, int k) const {
        return walk.scores[static_cast<std::size_t>(q) * walk.n_keys + k];
    }
};

// 1a. Each cell: masked (hatched), in a tile taken (its class's colour, its score), or in
//     a tile not taken yet (dark, its score dimmed).
void flash_draw_cells(const FlashGrid& g, ImDrawList* dl) {
    const float gap = g.cell >= px(6) ? px(2) : 0;
    for (int q = 0; q < g.walk.n_queries; ++q)
        for (int k = 0; k < g.walk.n_keys; ++k) {
            const ImVec2 a = g.at(q, k);
            const ImVec2 b(a.x + g.cell - gap, a.y + g.cell - gap);
            const int s = g.step_of(q, k);
            const float score = g.score(q, k);
            if (s < 0 || std::isinf(score)) {
                const bool skipped = s >= 0 && g.walk.steps[s].kind == TileClass::empty;
                dl->AddRectFilled(a, b, skipped ? colour::kTileEmpty : colour::kMasked);
                draw_hatch(dl, a, b, colour::kHatch, px(8));
                continue;
            }
            const bool taken = s < g.done;
            dl->AddRectFilled(a, b,
                              taken ? flash_class_colour(g.walk.steps[s].kind) : colour::kPending);
            if (!g.numbers) continue;
            char buf[16];
            std::snprintf(buf, sizeof buf, "%.3g", score);
            const ImVec2 size = ImGui::CalcTextSize(buf);
            dl->AddText(
                ImVec2(a.x + (g.cell - gap - size.x) / 2, a.y + (g.cell - gap - size.y) / 2),
                taken ? IM_COL32(0, 0, 0, 255) : dim_colour(), buf);
        }
}

// 1b. Over the cells: every tile's outline, the chunk boundaries (orange lines between
//     positions), and the tile of the step in view (a thick white frame).
void flash_draw_overlays(const FlashGrid& g, ImDrawList* dl) {
    const FlashWalk& w = g.walk;
    for (const FlashWalkStep& s : w.steps)
        dl->AddRect(g.at(s.query_lo, s.key_lo), g.at(s.query_hi + 1, s.key_hi + 1), colour::kHatch,
                    0, 0, px(1));
    const ImVec2 end = g.at(w.n_queries, w.n_keys);
    for (int start : w.chunk_starts) {
        if (start <= 0) continue;
        if (start < w.n_queries)
            dl->AddLine(ImVec2(g.origin.x - px(4), g.at(start, 0).y),
                        ImVec2(end.x + px(4), g.at(start, 0).y), colour::kChunk, px(2));
        if (start < w.n_keys)
            dl->AddLine(ImVec2(g.at(0, start).x, g.origin.y - px(4)),
                        ImVec2(g.at(0, start).x, end.y + px(4)), colour::kChunk, px(2));
    }
    if (g.done > 0) {
        const FlashWalkStep& s = w.steps[static_cast<std::size_t>(g.done - 1)];
        dl->AddRect(g.at(s.query_lo, s.key_lo), g.at(s.query_hi + 1, s.key_hi + 1), IM_COL32_WHITE,
                    0, 0, px(3));
    }
}

// 1c. The hovered cell, said in words.
void flash_grid_tooltip(const FlashGrid& g, int q, int k) {
    const FlashWalk& w = g.walk;
    const int s = g.step_of(q, k);
    const std::string cell = "query " + std::to_string(q) + ", key " + std::to_string(k) +
                             " (chunk " + std::to_string(flash_chunk_of(w, q)) + "): ";
    if (s < 0) {
        tooltip(cell +
                "outside the keys the mask lets this query reach: no tile of its row covers "
                "it, so the kernel never loads it.");
        return;
    }
    const FlashWalkStep& st = w.steps[static_cast<std::size_t>(s)];
    const std::string tile = "step " + std::to_string(s + 1) + " of " +
                             std::to_string(w.steps.size()) + ", a " + flash_class_name(st.kind) +
                             " tile (" + flash_keys_text(st) + ")";
    if (st.kind == TileClass::empty) {
        tooltip(cell + tile +
                ": the mask hides every key of it, so the kernel skips it: never "
                "loaded, m, l and the output stay as they were.");
    } else if (std::isinf(g.score(q, k))) {
        tooltip(cell + tile +
                ": loaded with its tile but hidden by the mask: score -inf, weight "
                "exp(-inf - m) = 0, nothing added.");
    } else {
        tooltip(cell + "score s = q*k/sqrt(Dh) = " + flash_exact(g.score(q, k)) + ", taken in " +
                tile + (s < g.done ? "." : ", not taken yet (step forward: right arrow)."));
    }
}

// 1. The score grid: key labels across, query labels down, the cells, the overlays.
void flash_draw_grid(const FlashWalk& w, int done, float cell) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float font = ImGui::GetFontSize();
    const ImVec2 top = ImGui::GetCursorScreenPos();
    const FlashGrid g{w,
                      done,
                      flash_cell_steps(w),
                      ImVec2(top.x + font * 2.5f, top.y + font * 1.5f),
                      cell,
                      cell >= font * 2.6f};
    // A label every n-th position, n as small as keeps labels apart.
    const int every = std::max(1, static_cast<int>(std::ceil(font * 2.2f / cell)));
    for (int k = 0; k < w.n_keys; k += every) {
        const std::string s = "k" + std::to_string(k);
        dl->AddText(ImVec2(g.at(0, k).x + (cell - ImGui::CalcTextSize(s.c_str()).x) / 2, top.y),
                    IM_COL32_WHITE, s.c_str());
    }
    for (int q = 0; q < w.n_queries; q += every) {
        const std::string s = "q" + std::to_string(q);
        dl->AddText(ImVec2(top.x, g.at(q, 0).y + (cell - font) / 2), IM_COL32_WHITE, s.c_str());
    }
    flash_draw_cells(g, dl);
    flash_draw_overlays(g, dl);
    ImGui::SetCursorScreenPos(g.origin);
    ImGui::InvisibleButton("flash grid", ImVec2(cell * w.n_keys, cell * w.n_queries));
    if (ImGui::IsItemHovered()) {
        const ImVec2 m = ImGui::GetIO().MousePos;
        const int k = std::clamp(static_cast<int>((m.x - g.origin.x) / cell), 0, w.n_keys - 1);
        const int q = std::clamp(static_cast<int>((m.y - g.origin.y) / cell), 0, w.n_queries - 1);
        flash_grid_tooltip(g, q, k);
    }
}

// 2. What each colour of the grid means.
void flash_draw_legend(bool model_head) {
    legend_entry(colour::kTileFull, 0, "full tile",
                 "Every key of the tile is visible to its queries: taken whole, no mask test.");
    legend_entry(colour::kTilePartial, 0, "partial tile",
                 "Some keys visible: the tile is loaded and masked key by key (hidden cells get "
                 "weight 0).");
    legend_entry(colour::kTileEmpty, 0, "empty tile: skipped",
                 "No key of the tile is visible: the kernel skips it, never loads it, and m, l "
                 "and the output stay as they were.",
                 true);
    legend_entry(colour::kMasked, 0, "masked",
                 "Hidden by the mask (causal: a key after the query). Score -inf: it adds "
                 "nothing.",
                 true);
    legend_entry(colour::kPending, 0, "not taken yet",
                 "A tile the kernel takes later in its order: step forward (right arrow).");
    legend_entry(0, IM_COL32_WHITE, "tile in view",
                 "The tile of the step in view: the step counter's number.");
    legend_entry(colour::kChunk, 0, "chunk boundary",
                 model_head
                     ? "Where the chunk plan cuts the prompt: each chunk is one launch of the "
                       "kernel, its query tiles start at the chunk's first position; key tiles "
                       "are aligned to position 0, so every plan folds the same keys together."
                     : "Where the Toy panel's chunk plan cuts the prompt. Tiles are aligned to "
                       "position 0, not to chunks: every plan sees the same tiles, so the same "
                       "bits.");
}
// 3b. One query's output so far, the whole softmax, and once its last tile is taken
//     whether the two have the same bits.
void flash_output_cells(const FlashWalk& w, const FlashRowState& r, int q, bool final) {
    const std::string who = "query " + std::to_string(q);
    const std::size_t i = static_cast<std::size_t>(q);
    ImGui::TableNextColumn();
    if (!r.reached)
        text_with_tip("\xE2\x80\x94", "Not reached yet: no tile of " + who + " has been taken.");
    else
        text_with_tip(flash_num(r.row.out), "acc / l after the keys taken so far: " + who +
                                                "'s output if its row stopped here. Exactly " +
                                                flash_exact(r.row.out) + ".");
    ImGui::TableNextColumn();
    text_with_tip(flash_num(w.full[i]),
                  "The whole softmax of " + who +
                      " on cpu-ref: one max, one sum, one division over all its keys at once "
                      "(plab toy). The answer the tiles must give. Exactly " +
                      flash_exact(w.full[i]) + ".");
    ImGui::TableNextColumn();
    if (!final) return;
    if (w.ulps[i] == 0) {
        badge("bitwise equal: yes", colour::kGood,
              "acc / l after the last tile has the same 32 bits as the whole softmax.");
    } else {
        const std::string apart =
            std::to_string(w.ulps[i]) + (w.ulps[i] == 1 ? " ulp apart" : " ulps apart");
        badge(apart.c_str(), colour::kClose,
              "The floats between the tiled output " + flash_exact(w.output[i]) +
                  " and the whole softmax " + flash_exact(w.full[i]) +
                  ": the exponentials and sums came in another order (lesson 15), the "
                  "math is the same.");
    }
}

// 3. The table: one line per query row, its state after the step in view.
void flash_draw_table(const FlashWalk& w, int done) {
    const std::vector<FlashRowState> rows = flash_rows_after(w, done);
    const std::vector<int> last = flash_last_steps(w);
    if (!ImGui::BeginTable("flash rows", 7,
                           ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit))
        return;
    for (const char* h : {"query", "m", "l", "rescale", "output so far", "whole softmax", "match"})
        ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    for (int q = 0; q < w.n_queries; ++q) {
        const std::size_t i = static_cast<std::size_t>(q);
        ImGui::PushID(q);
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        text_with_tip("q" + std::to_string(q), "Query position " + std::to_string(q) + " (chunk " +
                                                   std::to_string(flash_chunk_of(w, q)) +
                                                   "): its row of the grid.");
        flash_state_cells(rows[i], q, done);
        flash_output_cells(w, rows[i], q, last[i] >= 0 && last[i] < done);
        ImGui::PopID();
    }
    probe_table("flash rows");
    ImGui::EndTable();
}

// 4. The step in view in words: which tile, its class, and what it did to each row it
//    changed (the rescale spelled out when a later tile raised the max).
void flash_draw_step(const FlashWalk& w, int done) {
    if (done == 0) {
        wrapped_with_tip("before the first tile: no query has seen a key (m = -inf, l = 0)",
                         "Press the right arrow to take the first tile in the kernel's order.",
                         dim_colour());
        return;
    }
    const FlashWalkStep& s = w.steps[static_cast<std::size_t>(done - 1)];
    const std::string head = "step " + std::to_string(done) + " of " +
                             std::to_string(w.steps.size()) + ": " + flash_queries_text(s);
    const std::string text =
        s.kind == TileClass::empty
            ? head + ", " + flash_keys_text(s) + ": an empty tile, skipped (never loaded)"
            : head + " takes " + flash_keys_text(s) + ", a " + flash_class_name(s.kind) + " tile";
    wrapped_with_tip(text,
                     s.kind == TileClass::empty
                         ? "The mask hides every key of this tile: the kernel skips it without "
                           "loading it, and m, l and the output stay as they were."
                         : "The kernel loads these keys, takes their scores and folds them into "
                           "each query row's running max m, denominator l and output.",
                     colour::kChunk);
    probe_step("flash step", done, text);
    for (const FlashWalkRow& r : s.rows) {
        wrapped_with_tip("query " + std::to_string(r.query) + ": m " + flash_num(r.m_old) +
                             " \xE2\x86\x92 " + flash_num(r.m) + ", l " + flash_num(r.l) +
                             ", output so far " + flash_num(r.out),
                         "m_old -> m: the running max before and after this tile; l the running "
                         "denominator after it; output so far = acc / l.");
        if (!r.rescaled) continue;
        wrapped_with_tip("rescale \xC3\x97" + flash_num(r.rescale) +
                             " = exp(m_old \xE2\x88\x92 m) = exp(" + flash_num(r.m_old) +
                             " \xE2\x88\x92 " + flash_num(r.m) +
                             "): l and acc so far multiplied by it, then this tile's keys added",
                         "This tile raised the max from m_old to m: everything summed so far "
                         "was measured against the old max, and exp(m_old - m) re-measures it "
                         "against the new one (online softmax, Milakov & Gimelshein 2018).",
                         colour::kClose);
    }
}

// 5. After the last step: every output against the whole softmax.
void flash_draw_verdict(const FlashWalk& w, bool complete) {
    if (!complete) {
        hint_text(
            "Each output is compared with the whole softmax once its query's last tile is "
            "taken (End: to the last step).");
        return;
    }
    int same = 0;
    for (long long u : w.ulps) same += u == 0;
    badge(same == w.n_queries ? "bitwise equal: yes" : "bitwise equal: not all",
          same == w.n_queries ? colour::kGood : colour::kClose,
          "acc / l after each query's last tile against the whole softmax of cpu-ref, bit for "
          "bit. The same bits need the same order of operations: one tile holding every key "
          "is the reference's order exactly.");
    wrapped_with_tip(std::to_string(same) + " of " + std::to_string(w.n_queries) +
                         " outputs bitwise equal to the whole softmax; " +
                         std::to_string(w.rescales) + " rescale" + (w.rescales == 1 ? "" : "s") +
                         ", " + std::to_string(w.skipped) + " tile" + (w.skipped == 1 ? "" : "s") +
                         " skipped",
                     "Rescales: tiles after a query's first that raised its max. Skipped: tiles "
                     "inside a query's key range that the mask leaves empty, never loaded.");
}

// The table's width on one line a cell: each column's widest text, padded (to decide
// whether the grid and the table fit side by side).
float flash_table_width(const FlashWalk& w) {
    float num = text_width("\xE2\x88\x92inf");
    auto widen = [&](float x) { num = std::max(num, text_width(flash_num(x))); };
    for (const FlashWalkStep& s : w.steps)
        for (const FlashWalkRow& r : s.rows) {
            widen(r.m);
            widen(r.l);
            widen(r.out);
            widen(r.rescale);
        }
    for (float x : w.full) widen(x);
    const float cols[7] = {text_width("query"),
                           std::max(text_width("m"), num),
                           std::max(text_width("l"), num),
                           std::max(text_width("rescale"), text_width("\xC3\x97") + num),
                           std::max(text_width("output so far"), num),
                           std::max(text_width("whole softmax"), num),
                           std::max(text_width("match"), button_width("bitwise equal: yes"))};
    float sum = 0;
    for (float c : cols) sum += c + 2 * ImGui::GetStyle().CellPadding.x + 1;
    return sum;
}

// 0a. Which walk: the toy, or a model head of the prompt (the walk is asked again when
//     the switch moves: flash_inputs_key).
void flash_draw_source(ViewerState& state) {
    ImGui::AlignTextToFramePadding();
    line_text("walk:");
    ImGui::SameLine();
    if (ImGui::RadioButton("toy", !state.flash_model_head)) state.flash_model_head = false;
    probe_control("toy");
    item_tooltip(
        "Walk the toy: the Toy panel's V, Q and K (one head, head dimension 1, 4 positions), "
        "every query a tile row of its own, its tiles in order (plab flash).");
    flow(checkbox_width("model head"));
    if (ImGui::RadioButton("model head", state.flash_model_head)) state.flash_model_head = true;
    probe_control("model head");
    item_tooltip(
        "Walk one head of the loaded model on the prompt, chunk plan and mask of the model "
        "panels, in the order the gpu kernel takes it: query tiles of 64 rows, key tiles of "
        "64 keys, two warp groups taking the even and odd tiles (plab flash --layer L --head "
        "H; plab-viewer --layer/--head open it).");
}

// 0b. The tile width (the walk is asked again when it moves), the mask and a button that
//     gives the toy rising keys, so a later tile raises the max.
void flash_draw_controls(const FlashSnapshot& f, ViewerState& state) {
    const float font = ImGui::GetFontSize();
    const bool toy_walk = f.ready && !f.model_head;
    const int positions = toy_walk ? f.walk.n_keys : state.toy.n_tokens();
    int tile = state.flash_tile;
    flow(labelled_width(font * 8, "keys per tile"), font);
    ImGui::SetNextItemWidth(font * 8);
    if (ImGui::SliderInt("keys per tile", &tile, 1, std::max({1, positions, state.flash_tile})))
        state.flash_tile = std::max(1, tile);
    probe_control("keys per tile");
    item_tooltip(
        "The key tile's width (plab flash --tile): each query takes its keys this many at a "
        "time, tiles aligned to position 0. As wide as the prompt: one tile, the whole "
        "softmax's order, the same bits.");
    flow(button_width("rising keys"));
    if (ImGui::Button("rising keys")) {
        for (std::size_t j = 0; j < state.toy.keys.size(); ++j)
            state.toy.keys[j] = static_cast<float>(j + 1);
        state.dirty.toy = true;
    }
    probe_control("rising keys");
    item_tooltip(
        "Sets the toy's keys to 1, 2, 3, ... (the Toy panel's K): each later key scores "
        "higher, so a later tile raises the running max and rescales l and acc.");
    const std::string facts = "mask " + (toy_walk ? f.walk.mask : state.mask) +
                              ", walked: " + (toy_walk ? f.walk.source : std::string("toy"));
    flow(text_width(facts));
    line_text(facts, dim_colour());
    item_tooltip(
        "The mask the walk ran under (the Mask panel's, or --mask) and what was walked: the "
        "toy (the Toy panel's V, Q, K; one head, head dimension 1).");
}

// The toy's grid beside its table when both fit (cells shrunk down to 6 px if need be),
// else the table under the grid; the step in view and the verdict under the table.
void flash_draw_toy(const FlashWalk& w, const StepView& step) {
    const float font = ImGui::GetFontSize();
    const float avail = ImGui::GetContentRegionAvail().x;
    const float label = font * 2.5f, gap = font * 3;
    const float table_w = flash_table_width(w);
    const int n = std::max(1, w.n_keys);
    float cell = std::min(font * 3.2f, std::floor((avail - gap - table_w - label) / n));
    const bool beside = cell >= px(6);
    if (!beside) cell = std::clamp(std::floor((avail - label) / n), px(2), font * 3.2f);
    const float grid_w = label + cell * n;
    ImGui::BeginGroup();
    wrapped_text(
        "Scores s = q\xC2\xB7k/\xE2\x88\x9A"
        "Dh (rows: queries, columns: keys)",
        0, beside ? grid_w : 0);
    flash_draw_grid(w, step.stages_done, cell);
    ImGui::EndGroup();
    if (beside) ImGui::SameLine(0, gap);
    ImGui::BeginGroup();
    wrapped_text("Each query row after the step in view");
    flash_draw_table(w, step.stages_done);
    flash_draw_step(w, step.stages_done);
    flash_draw_verdict(w, step.complete());
    ImGui::EndGroup();
}

}  // namespace

void draw_flash(const Snapshot& snap, ViewerState& state) {
    const FlashSnapshot& f = snap.flash;
    wrapped_text("FlashAttention by hand: one head's attention, key tile by key tile");
    help_marker(
        "Lesson 17 - FlashAttention by hand (lessons/17-flash-attention.md; plab flash).\n\nA "
        "tiled kernel never holds a query's whole row of scores. It takes the keys one tile at "
        "a time and keeps, per query, a running max m, a running denominator l = sum exp(s - "
        "m) and an output acc = sum exp(s - m) v. A tile that raises the max first multiplies "
        "l and acc by rescale = exp(m_old - m_new). After the last tile, output = acc / l: the "
        "whole softmax's answer, bit for bit when the operations come in the same order (one "
        "tile holding every key). Under a mask each tile is classified first: empty (skipped, "
        "never loaded), partial (masked key by key), full (no mask test).\n\nThe walk is the "
        "toy's, or (model head) one head of the loaded model on the prompt, in the gpu "
        "kernel's order: query tiles of 64 rows, key tiles of 64 keys taken by two warp "
        "groups, each with its own m, l and acc, merged at every 256 keys and at the end.");
    hint_text(state.flash_model_head
                  ? "Try: press Home, then the right arrow to take one (query tile x key tile) "
                    "at a time; pick another layer or head; set keys per tile to 16 and "
                    "compare the ulps."
                  : "Try: press Home, then the right arrow to take one tile at a time; press "
                    "rising keys and watch a rescale; set keys per tile to 1 or 4.");
    flash_draw_source(state);
    if (state.flash_model_head)
        flash_head_controls(snap, state);
    else
        flash_draw_controls(f, state);
    if (!f.error.empty()) {
        wrapped_text(f.error, colour::kBad);
        return;
    }
    if (!f.ready) return;
    ImGui::Separator();
    const StepView step = step_view(snap, state);
    if (f.model_head)
        flash_head_body(snap, state, step.stages_done, step.complete());
    else
        flash_draw_toy(f.walk, step);
    ImGui::Spacing();
    ImGui::Dummy(ImVec2(0, 0));  // the legend flows from the left edge, under both
    flash_draw_legend(f.model_head);
}

}  // namespace plab::viewer
