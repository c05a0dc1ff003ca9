// The FlashAttention panel on a model head (see panel_flash_parts.h), lesson 17.
//
// What it teaches: the toy's online softmax at the size a kernel meets it. One head of
// one layer of a real prefill, walked in the order the gpu kernel takes it: per chunk
// (one launch) query tiles of 64 rows, each taking key tiles of 64 keys, two warp groups
// taking the even and the odd key tiles with an m, l and acc each, merged at the end of
// every 256-key segment. The grid shows which tile is taken when, in which class, and
// which ones are never loaded (skipped, or past every key the tile's queries see); the
// table shows only the rows of the query tile in view, the rows the kernel holds while it
// takes that tile. Its output is another order than cpu-ref's one max, one sum and one
// division: a few ulps apart, within the tolerance, not the same bits.
// Left out: the Dh - 1 other output components (the walk keeps the first), the two
// groups' merge itself (its result is the output once a row's last tile is taken).
// Everything drawn is the snapshot's walk (run_flash_head, src/toy/flash_head.h).
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "app/heatmap_view.h"
#include "panels/layout_probe.h"
#include "panels/panel_flash_parts.h"
#include "panels/panels.h"
#include "panels/ui_colours.h"
#include "panels/ui_scale.h"
#include "panels/ui_texture.h"
#include "panels/ui_widgets.h"
#include "toy/flash_order.h"

namespace plab::viewer {
namespace {

const char* const kFlashHeadDash = "\xE2\x80\x94";  // U+2014: not reached yet

// Where the grid is drawn: its top-left corner and its side; cells may be under a pixel.
struct FlashHeadGrid {
    const FlashWalk& walk;
    int done = 0;     // steps taken (the cursor)
    ImVec2 origin{};  // top-left corner of cell (0, 0)
    float side = 0;   // pixels across (keys) and down (queries)
    float x(int k) const { return origin.x + side * static_cast<float>(k) / keys(); }
    float y(int q) const { return origin.y + side * static_cast<float>(q) / queries(); }
    float keys() const { return static_cast<float>(std::max(1, walk.n_keys)); }
    float queries() const { return static_cast<float>(std::max(1, walk.n_queries)); }
    ImVec2 tile_a(const FlashWalkStep& s) const { return ImVec2(x(s.key_lo), y(s.query_lo)); }
    ImVec2 tile_b(const FlashWalkStep& s) const {
        return ImVec2(x(s.key_hi + 1), y(s.query_hi + 1));
    }
    float score(int q, int k) const {
        return walk.scores[static_cast<std::size_t>(q) * static_cast<std::size_t>(walk.n_keys) +
                           static_cast<std::size_t>(k)];
    }
};

// The segment of a step's keys: where the kernel merges its two warp groups.
int flash_head_segment(const FlashWalk& w, const FlashWalkStep& s) {
    return s.key_lo / flash_segment_keys(std::max(1, w.key_tile));
}

// Whether some query of a skipped tile sees a key at or after the tile's first: then the
// mask hid the tile; else the tile lies past every key its queries see (never reached).
bool flash_head_hidden_by_mask(const FlashHeadGrid& g, const FlashWalkStep& s) {
    for (int q = s.query_lo; q <= s.query_hi; ++q)
        for (int k = s.key_lo; k < g.walk.n_keys; ++k)
            if (!std::isinf(g.score(q, k))) return true;
    return false;
}

// 1a. The cells the mask hides, hatched, baked into a texture at screen resolution; the
//     visible ones see-through, so that the tiles drawn under them show their class. A
//     frame draws one quad however long the prompt (as the Mask panel's heatmap,
//     panel_mask_heatmap.cpp); a pixel over several cells is see-through when any of
//     them is visible. Made again only when the walk or the grid's size changes.
void flash_head_texture(const FlashSnapshot& f, int side, HeatmapTexture& tex) {
    const std::string key = f.key + "|" + std::to_string(side);
    if (tex.id != 0 && tex.key == key) return;
    const FlashWalk& w = f.walk;
    std::vector<CellRange> rows(static_cast<std::size_t>(side)), cols(rows.size());
    for (int p = 0; p < side; ++p) {
        const float s = static_cast<float>(side);
        rows[static_cast<std::size_t>(p)] =
            cells_of_pixel(0, static_cast<float>(w.n_queries), w.n_queries, s, p);
        cols[static_cast<std::size_t>(p)] =
            cells_of_pixel(0, static_cast<float>(w.n_keys), w.n_keys, s, p);
    }
    std::vector<unsigned char> rgba(static_cast<std::size_t>(side) * side * 4, 0);
    for (int y = 0; y < side; ++y) {
        const CellRange r = rows[static_cast<std::size_t>(y)];
        for (int x = 0; x < side; ++x) {
            const CellRange c = cols[static_cast<std::size_t>(x)];
            bool visible = false;
            for (int q = r.first; q < r.last && !visible; ++q)
                for (int k = c.first; k < c.last && !visible; ++k)
                    visible = !std::isinf(w.scores[static_cast<std::size_t>(q) * w.n_keys +
                                                   static_cast<std::size_t>(k)]);
            if (visible) continue;  // alpha 0: the tile under it shows
            const ImU32 col = (x + y) % 8 < 2 ? colour::kHatch : colour::kMasked;
            unsigned char* p = &rgba[(static_cast<std::size_t>(y) * side + x) * 4];
            p[0] = col & 0xFF;
            p[1] = (col >> 8) & 0xFF;
            p[2] = (col >> 16) & 0xFF;
            p[3] = 255;
        }
    }
    upload_texture(tex, rgba, side, side);
    tex.key = key;
}

// 1b. Under the texture, every tile the kernel loads: its class's colour once taken, dark
//     until then. Over it, the tiles it never loads (hatched), every tile's outline where
//     tiles are a few pixels wide, the chunk boundaries, and the tile in view framed.
void flash_head_tiles(const FlashHeadGrid& g, ImDrawList* dl) {
    const std::vector<FlashWalkStep>& steps = g.walk.steps;
    for (std::size_t i = 0; i < steps.size(); ++i)
        if (steps[i].kind != TileClass::empty)
            dl->AddRectFilled(g.tile_a(steps[i]), g.tile_b(steps[i]),
                              static_cast<int>(i) < g.done ? flash_class_colour(steps[i].kind)
                                                           : colour::kPending);
}

void flash_head_overlays(const FlashHeadGrid& g, ImDrawList* dl) {
    const FlashWalk& w = g.walk;
    const bool outlines = g.side / g.keys() * static_cast<float>(std::max(1, w.key_tile)) >= px(4);
    for (const FlashWalkStep& s : w.steps) {
        if (s.kind == TileClass::empty) {
            dl->AddRectFilled(g.tile_a(s), g.tile_b(s), colour::kTileEmpty);
            draw_hatch(dl, g.tile_a(s), g.tile_b(s), colour::kHatch, px(8));
        }
        if (outlines) dl->AddRect(g.tile_a(s), g.tile_b(s), colour::kHatch, 0, 0, px(1));
    }
    const ImVec2 end(g.origin.x + g.side, g.origin.y + g.side);
    for (int start : w.chunk_starts) {
        if (start <= 0) continue;
        if (start < w.n_queries)
            dl->AddLine(ImVec2(g.origin.x - px(4), g.y(start)), ImVec2(end.x + px(4), g.y(start)),
                        colour::kChunk, px(2));
        if (start < w.n_keys)
            dl->AddLine(ImVec2(g.x(start), g.origin.y - px(4)), ImVec2(g.x(start), end.y + px(4)),
                        colour::kChunk, px(2));
    }
    if (g.done > 0) {
        const FlashWalkStep& s = w.steps[static_cast<std::size_t>(g.done - 1)];
        dl->AddRect(g.tile_a(s), g.tile_b(s), IM_COL32_WHITE, 0, 0, px(3));
    }
}

// 1c. Position labels, every n-th as keeps them apart: keys across the top, queries down
//     the left (right-aligned against the grid).
void flash_head_labels(const FlashHeadGrid& g, ImDrawList* dl, float top) {
    const FlashWalk& w = g.walk;
    const float cell = g.side / g.keys();
    const std::string widest = "k" + std::to_string(std::max(0, w.n_keys - 1));
    const int every = label_every(cell, text_width(widest) + ImGui::GetFontSize() * 0.6f);
    for (int k = 0; k < w.n_keys; k += every) {
        const std::string s = "k" + std::to_string(k);
        dl->AddText(ImVec2(g.x(k) + (cell - text_width(s)) / 2, top), IM_COL32_WHITE, s.c_str());
    }
    const int every_q = label_every(g.side / g.queries(), ImGui::GetFontSize() * 1.1f);
    for (int q = 0; q < w.n_queries; q += every_q) {
        const std::string s = "q" + std::to_string(q);
        const float y = g.y(q) + (g.side / g.queries() - ImGui::GetFontSize()) / 2;
        dl->AddText(ImVec2(g.origin.x - ImGui::GetFontSize() * 0.3f - text_width(s), y),
                    IM_COL32_WHITE, s.c_str());
    }
}

// 1d. The hovered cell, said in words.
void flash_head_tooltip(const FlashHeadGrid& g, int q, int k) {
    const FlashWalk& w = g.walk;
    std::size_t found = w.steps.size();
    for (std::size_t i = 0; i < w.steps.size() && found == w.steps.size(); ++i) {
        const FlashWalkStep& s = w.steps[i];
        if (q >= s.query_lo && q <= s.query_hi && k >= s.key_lo && k <= s.key_hi) found = i;
    }
    const std::string cell = "query " + std::to_string(q) + ", key " + std::to_string(k) +
                             " (chunk " + std::to_string(flash_chunk_of(w, q)) + "): ";
    if (found == w.steps.size()) {
        tooltip(cell +
                "after the last key of this query's chunk: no key tile of its launch reaches "
                "it, so the kernel never loads it (the causal future).");
        return;
    }
    const FlashWalkStep& s = w.steps[found];
    const std::string tile = "step " + std::to_string(found + 1) + " of " +
                             std::to_string(w.steps.size()) + ", a " + flash_class_name(s.kind) +
                             " tile (" + flash_queries_text(s) + " x " + flash_keys_text(s) +
                             ", warp group " + std::to_string(s.group) + ", segment " +
                             std::to_string(flash_head_segment(w, s)) + ")";
    if (s.kind == TileClass::empty) {
        tooltip(cell + tile +
                (flash_head_hidden_by_mask(g, s)
                     ? ": the mask hides every key of it from these queries, so the kernel "
                       "skips it: never loaded, m, l and acc stay as they were."
                     : ": past the last key any query of its tile sees: the kernel's loop ends "
                       "before it, never reached."));
    } else if (std::isinf(g.score(q, k))) {
        tooltip(cell + tile +
                ": loaded with its tile but hidden by the mask: score -inf, weight "
                "exp(-inf - m) = 0, nothing added.");
    } else {
        tooltip(cell + "score s = q*k/sqrt(Dh) = " + flash_exact(g.score(q, k)) + ", taken in " +
                tile + (static_cast<int>(found) < g.done ? "." : ", not taken yet."));
    }
}

// 1. The score grid: labels, the tiles under the hidden cells' texture, the overlays, and
//    the hovered cell.
void flash_head_grid(const FlashSnapshot& f, ViewerState& state, int done, float side,
                     float label_w) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 top = ImGui::GetCursorScreenPos();
    const FlashHeadGrid g{
        f.walk, done,
        ImVec2(std::floor(top.x + label_w), std::floor(top.y + ImGui::GetFontSize() * 1.4f)), side};
    flash_head_labels(g, dl, top.y);
    flash_head_texture(f, static_cast<int>(side), state.flash_heatmap);
    flash_head_tiles(g, dl);
    const ImVec2 end(g.origin.x + side, g.origin.y + side);
    dl->AddImage(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(state.flash_heatmap.id)),
                 g.origin, end);
    flash_head_overlays(g, dl);
    ImGui::SetCursorScreenPos(g.origin);
    ImGui::InvisibleButton("flash head grid", ImVec2(side, side));
    if (!ImGui::IsItemHovered() || f.walk.n_keys <= 0 || f.walk.n_queries <= 0) return;
    const ImVec2 m = ImGui::GetIO().MousePos;
    const int k =
        std::clamp(static_cast<int>((m.x - g.origin.x) / side * g.keys()), 0, f.walk.n_keys - 1);
    const int q = std::clamp(static_cast<int>((m.y - g.origin.y) / side * g.queries()), 0,
                             f.walk.n_queries - 1);
    flash_head_tooltip(g, q, k);
}

// 2. What was walked, where its states came from, and the plan the engine ran.
void flash_head_facts(const FlashSnapshot& f) {
    const FlashHeadSummary& h = f.head;
    const FlashWalk& w = f.walk;
    if (!f.refusal.empty())
        wrapped_with_tip(
            "plan refused: " + f.refusal + "; ran plan " + f.plan.to_string() + " instead",
            "The mask forbids the chunk plan asked for (a boundary it cannot "
            "have); the engine ran the nearest valid plan, as the Mask panel does.",
            colour::kBad);
    const std::string tile = w.key_tile == h.kernel_key_tile
                                 ? " (the kernel's own)"
                                 : " (the kernel's own: " + std::to_string(h.kernel_key_tile) + ")";
    int rows = 0;  // the tallest query tile (chunks of 16 or fewer: tiles of 16)
    for (const FlashWalkStep& s : w.steps) rows = std::max(rows, s.query_hi - s.query_lo + 1);
    wrapped_with_tip(
        "walked: " + w.source + " (KV head " + std::to_string(h.kv_head) + ", Dh " +
            std::to_string(h.head_dim) + ") on " + std::to_string(w.n_queries) + " tokens in " +
            std::to_string(f.plan.lengths.size()) + " chunks, mask " + w.mask +
            ", query tiles of up to " + std::to_string(rows) + " rows, key tiles of " +
            std::to_string(w.key_tile) + tile + ", backend " + h.backend,
        "plab flash --model M --layer L --head H: the prompt, chunk plan and mask of the model "
        "panels, prefilled on the gpu backend. A chunk of 16 positions or fewer is taken in "
        "query tiles of 16 (the kernel's decode tiling).",
        dim_colour());
    const bool good =
        h.recorded ? h.port_matches_kernel && h.vs_gpu.max_ulps == 0 : h.vs_gpu.within();
    const std::string gpu = h.vs_gpu.max_ulps == 0
                                ? "bitwise equal: yes"
                                : "bitwise equal: no, " + std::to_string(h.vs_gpu.max_ulps) +
                                      " ulps apart at most, within the tolerance: " +
                                      (h.vs_gpu.within() ? "yes" : "no");
    const std::string text =
        h.recorded ? "states read from the emulated kernel (" + std::to_string(h.kernel_states) +
                         " row-tile states); the CPU port agrees bit for bit: " +
                         (h.port_matches_kernel ? "yes" : "no") + "; output vs gpu backend: " + gpu
                   : "states from the CPU port of the kernel's order (at another tile, natively "
                     "or without the gpu backend, the kernel's own are not read); output vs " +
                         h.backend + ": " + gpu;
    wrapped_with_tip(text,
                     "The emulated gpu kernel records every row's m, l and acc through a tap; "
                     "a CPU port of its order (toy/flash_order.h) replays them. At the "
                     "kernel's own tile the two agree bit for bit and the walk's output is the "
                     "gpu backend's; another tile is another order: the same answer within "
                     "the tolerance, not the same bits.",
                     good ? colour::kGood : colour::kClose);
}

// 3. The step in view in words: which tile, its class, warp group and segment, and how
//    many rows it changed.
void flash_head_step(const FlashHeadGrid& g) {
    const FlashWalk& w = g.walk;
    if (g.done == 0) {
        wrapped_with_tip("before the first tile: no row has seen a key (m = -inf, l = 0)",
                         "Press the right arrow to take the first tile in the kernel's order.",
                         dim_colour());
        return;
    }
    const FlashWalkStep& s = w.steps[static_cast<std::size_t>(g.done - 1)];
    const std::string head = "step " + std::to_string(g.done) + " of " +
                             std::to_string(w.steps.size()) + ": " + flash_queries_text(s);
    int rescaled = 0;
    for (const FlashWalkRow& r : s.rows) rescaled += r.rescaled;
    const std::string where = "warp group " + std::to_string(s.group) + ", segment " +
                              std::to_string(flash_head_segment(w, s));
    const bool hidden = s.kind == TileClass::empty && flash_head_hidden_by_mask(g, s);
    const std::string text =
        s.kind != TileClass::empty ? head + (s.query_lo == s.query_hi ? " takes " : " take ") +
                                         flash_keys_text(s) + ", a " + flash_class_name(s.kind) +
                                         " tile (" + where + "): " + std::to_string(s.rows.size()) +
                                         " rows changed, " + std::to_string(rescaled) + " rescaled"
        : hidden ? head + ", " + flash_keys_text(s) + ": an empty tile, skipped (never loaded)"
                 : head + ", " + flash_keys_text(s) + ": past every key they see, never reached";
    wrapped_with_tip(text,
                     s.kind == TileClass::empty
                         ? "The kernel never loads this tile: m, l and acc stay as they were."
                         : "Warp group " + std::to_string(s.group) +
                               " loads these keys and folds them into its own m, l and acc of "
                               "each row (group 0 takes the even key tiles, group 1 the odd "
                               "ones; the two merge at the end of each 256-key segment).",
                     colour::kChunk);
    probe_step("flash step", g.done, text);
}

// 4a. The widest the table gets: numbers as wide as %.7g prints, the widest ulps badge.
float flash_head_table_width(const FlashWalk& w) {
    const float num = text_width(
        "\xE2\x88\x92"
        "8.888888e-88");
    long long most = 0;
    for (long long u : w.ulps) most = std::max(most, u);
    const std::string apart = std::to_string(most) + " ulps apart";
    const float cols[7] = {
        std::max(text_width("query"), text_width("q" + std::to_string(w.n_queries))),
        text_width("group"),
        std::max(text_width("m"), num),
        std::max(text_width("l"), num),
        std::max(text_width("rescale"), text_width("\xC3\x97") + num),
        std::max(text_width("group acc / l"), num),
        std::max({text_width("vs cpu-ref"), button_width(apart.c_str()),
                  button_width("bitwise equal")})};
    float sum = ImGui::GetStyle().ScrollbarSize + 2;
    for (float c : cols) sum += c + 2 * ImGui::GetStyle().CellPadding.x + 1;
    return sum;
}

// 4b. One row: its query, the warp group of its latest state, m, l and the rescale, the
//     group's acc / l, and once its last tile is taken the output against cpu-ref's.
void flash_head_row(const FlashSnapshot& f, const FlashRowState& r, int q, int done, bool final) {
    const FlashWalk& w = f.walk;
    const std::size_t i = static_cast<std::size_t>(q);
    const std::string who = "query " + std::to_string(q);
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    text_with_tip("q" + std::to_string(q), "Query position " + std::to_string(q) + " (chunk " +
                                               std::to_string(flash_chunk_of(w, q)) +
                                               "): its row of the grid.");
    const std::string not_yet = "Not reached yet: no tile of " + who + " has been taken.";
    ImGui::TableNextColumn();
    const int group = r.reached ? w.steps[static_cast<std::size_t>(r.step)].group : -1;
    text_with_tip(r.reached ? std::to_string(group) : kFlashHeadDash,
                  r.reached ? "The warp group whose state this row shows: the one that took "
                              "its latest tile (group 0 the even key tiles, group 1 the odd)."
                            : not_yet);
    flash_state_cells(r, q, done);
    ImGui::TableNextColumn();
    if (!r.reached)
        text_with_tip(kFlashHeadDash, not_yet);
    else
        text_with_tip(flash_num(r.row.out),
                      "Warp group " + std::to_string(group) + "'s acc / l for " + who +
                          " after the keys it took so far (the first of Dh components): its "
                          "output if those keys were all. The groups and the 256-key segments "
                          "are merged into the row's output after its last tile. Exactly " +
                          flash_exact(r.row.out) + ".");
    ImGui::TableNextColumn();
    if (!final) {
        text_with_tip(kFlashHeadDash, "Compared with cpu-ref once the row's last tile is taken.");
        return;
    }
    const std::string versus = "The output of " + who +
                               " after its last tile (groups and "
                               "segments merged) " +
                               flash_exact(w.output[i]) + " against cpu-ref's whole softmax " +
                               flash_exact(w.full[i]) +
                               " (one max, one sum in key order, one division): ";
    if (w.ulps[i] == 0) {
        badge("bitwise equal", colour::kGood, versus + "the same 32 bits.");
        return;
    }
    const std::string apart =
        std::to_string(w.ulps[i]) + (w.ulps[i] == 1 ? " ulp" : " ulps") + " apart";
    badge(apart.c_str(), colour::kClose,
          versus + apart + " (a tiled order: within the tolerance |diff| <= 1e-6 + 1e-5 max|v| " +
              "over every component: " + (f.head.vs_reference.within() ? "yes" : "no") + ").");
}

// 4. The rows of the query tile in view, the rows the kernel holds while it takes it, in
//    a box of their own that scrolls (up to 64 rows), its header kept on top.
void flash_head_table(const FlashSnapshot& f, int done, float width, float most_h) {
    const FlashWalk& w = f.walk;
    if (w.steps.empty()) return;
    const FlashWalkStep& s = w.steps[static_cast<std::size_t>(std::max(0, done - 1))];
    const std::vector<FlashRowState> rows = flash_rows_after(w, done);
    const std::vector<int> last = flash_last_steps(w);
    wrapped_text("The rows of " + flash_queries_text(s) + " after the step in view");
    const int n = s.query_hi - s.query_lo + 1;
    const float row_h = ImGui::GetFrameHeight() + 2 * ImGui::GetStyle().CellPadding.y;
    const float height = std::min(most_h, (n + 1) * row_h + 4);
    if (!ImGui::BeginTable(
            "flash head rows", 7,
            ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_ScrollY,
            ImVec2(width, height)))
        return;
    ImGui::TableSetupScrollFreeze(0, 1);
    for (const char* h : {"query", "group", "m", "l", "rescale", "group acc / l", "vs cpu-ref"})
        ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    for (int q = std::max(0, s.query_lo); q <= std::min(w.n_queries - 1, s.query_hi); ++q) {
        const std::size_t i = static_cast<std::size_t>(q);
        ImGui::PushID(q);
        flash_head_row(f, rows[i], q, done, last[i] >= 0 && last[i] < done);
        ImGui::PopID();
    }
    probe_table("flash head rows");
    ImGui::EndTable();
}

// 5. After the last step: every output against cpu-ref's whole softmax.
void flash_head_verdict(const FlashSnapshot& f, bool complete) {
    const FlashWalk& w = f.walk;
    if (!complete) {
        hint_text(
            "Each row's output is compared with cpu-ref's whole softmax once its last tile is "
            "taken (End: to the last step).");
        return;
    }
    int same = 0;
    long long most = 0;
    for (long long u : w.ulps) {
        same += u == 0;
        most = std::max(most, u);
    }
    const bool within = f.head.vs_reference.within();
    const std::string verdict =
        most == 0
            ? std::string("bitwise equal: yes")
            : std::to_string(most) + (most == 1 ? " ulp" : " ulps") + " apart (" +
                  (within ? "a tiled order: within the tolerance)" : "outside the tolerance)");
    badge(verdict.c_str(),
          most == 0 ? colour::kGood
          : within  ? colour::kClose
                    : colour::kBad,
          "The output after each row's last tile against cpu-ref's whole softmax on the same "
          "q, k and v (one max, one sum in key order, one division): another order of the "
          "same sums, so a few ulps apart, held to |diff| <= 1e-6 + 1e-5 max|v| (the gpu "
          "backend's tolerance, toy/flash_head.h).");
    wrapped_with_tip(
        std::to_string(same) + " of " + std::to_string(w.n_queries) +
            " outputs bitwise equal to cpu-ref's (first components; all " +
            std::to_string(f.head.head_dim) + ": at most " +
            std::to_string(f.head.vs_reference.max_ulps) + " ulps apart); " +
            std::to_string(w.rescales) + " rescale" + (w.rescales == 1 ? "" : "s") + ", " +
            std::to_string(w.skipped) + " tile" + (w.skipped == 1 ? "" : "s") + " never loaded (" +
            std::to_string(f.head.unreached) + " never reached)",
        "Rescales: a warp group's tile that raised a row's max after its first in the "
        "segment. Never loaded: tiles the mask leaves empty, and tiles past every key their "
        "queries see (the loop ends before them).");
}

}  // namespace

void flash_head_controls(const Snapshot& snap, ViewerState& state) {
    const float font = ImGui::GetFontSize();
    const FlashSnapshot& f = snap.flash;
    int layer = state.attn_layer, head = state.attn_head, tile = state.flash_head_tile;
    flow(labelled_width(font * 6, "layer"), font);
    ImGui::SetNextItemWidth(font * 6);
    if (ImGui::SliderInt("layer", &layer, 0, std::max(0, snap.n_layers - 1)))
        state.attn_layer = std::clamp(layer, 0, std::max(0, snap.n_layers - 1));
    probe_control("layer");
    item_tooltip(
        "The layer whose head is walked (plab flash --layer; the Mask panel shows it too).");
    flow(labelled_width(font * 6, "head"));
    ImGui::SetNextItemWidth(font * 6);
    if (ImGui::SliderInt("head", &head, 0, std::max(0, snap.n_heads - 1)))
        state.attn_head = std::clamp(head, 0, std::max(0, snap.n_heads - 1));
    probe_control("head");
    item_tooltip("The query head walked (plab flash --head); heads share a KV head (GQA).");
    const int positions = f.ready && f.model_head ? f.walk.n_keys : 64;
    flow(labelled_width(font * 8, "keys per tile"));
    ImGui::SetNextItemWidth(font * 8);
    if (ImGui::SliderInt("keys per tile", &tile, 0,
                         std::max({64, positions, state.flash_head_tile}),
                         tile == 0 ? "kernel's own" : "%d"))
        state.flash_head_tile = std::max(0, tile);
    probe_control("keys per tile");
    item_tooltip(
        "The key tile's width (plab flash --tile; 0: the gpu kernel's own). At the kernel's "
        "own tile the walk replays the emulated kernel bit for bit; at another it is another "
        "order: the same answer within the tolerance.");
}

void flash_head_body(const Snapshot& snap, ViewerState& state, int done, bool complete) {
    const FlashSnapshot& f = snap.flash;
    const FlashWalk& w = f.walk;
    flash_head_facts(f);
    // The grid beside the table when the grid keeps 10 lines of text; else the table under it.
    const float font = ImGui::GetFontSize();
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float label_w = text_width("q" + std::to_string(std::max(0, w.n_queries - 1))) + font;
    const float table_w = flash_head_table_width(w), gap = font * 1.5f;
    const float below = font * 4.5f;  // the caption, the key labels and the legend
    float side = std::min(avail.x - label_w - gap - table_w, avail.y - below);
    const bool beside = side >= font * 10;
    if (!beside) side = std::min(avail.x - label_w, std::max(avail.y - below, font * 12));
    side = std::floor(std::max(side, font * 8));
    ImGui::BeginGroup();
    wrapped_text(
        "Scores s = q\xC2\xB7k/\xE2\x88\x9A"
        "Dh (rows: queries, columns: keys)",
        0, beside ? label_w + side : 0);
    flash_head_grid(f, state, done, side, label_w);
    ImGui::EndGroup();
    if (beside) ImGui::SameLine(0, gap);
    ImGui::BeginGroup();
    flash_head_step(FlashHeadGrid{w, done, ImVec2(0, 0), side});
    flash_head_table(f, done, table_w, beside ? std::max(font * 8, side - font * 6) : font * 16);
    flash_head_verdict(f, complete);
    ImGui::EndGroup();
}

}  // namespace plab::viewer
