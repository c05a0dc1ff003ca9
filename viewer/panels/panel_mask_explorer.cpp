// The Mask panel's explorer: pick a mask, set its parameters, compose two, and
// see what the engine and a fast kernel make of it.
//
// What it teaches (the masks lesson): a mask is data — a rule
// visible(q, k) written as a spec (`window:8+sink:2`) that the engine, `plab
// mask` and this panel all read the same way (runtime/mask_grammar.h). Beside the
// heatmap: the tile map a tiled kernel works from (empty tiles are skipped:
// that is where a sparse mask saves time), the visible pairs against causal
// (the work saved), and whether chunked prefill still equals full prefill under
// this mask and chunk plan (it does unless a query needs a key from a later
// chunk: a prefix-LM prefix split by a chunk boundary). Every number is the
// engine's (MaskSnapshot); the picker only writes the spec text.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "panels/layout_probe.h"
#include "panels/panels.h"
#include "panels/ui_colours.h"
#include "panels/ui_format.h"
#include "panels/ui_widgets.h"
#include "runtime/mask_grammar.h"

namespace plab::viewer {
namespace {

// 1. The picker's kinds, their parameters and the lessons' words for each.
struct KindInfo {
    const char* label;
    const char* a_name;  // nullptr: no parameter
    int a_min, a_max;    // a_max 0: up to the prompt length
    const char* b_name;
    int b_min, b_max;
    const char* tip;
};
constexpr KindInfo kKinds[] = {
    {"causal", nullptr, 0, 0, nullptr, 0, 0,
     "causal: query q sees keys 0..q, never the future (every decoder LLM)."},
    {"window", "W", 1, 0, nullptr, 0, 0,
     "window:W - a sliding window: the last W keys, itself included (Mistral, Gemma's local "
     "layers). Keys older than W are never read again, so the KV cache can give their blocks "
     "back."},
    {"sink + window", "W", 1, 0, "sinks S", 1, 8,
     "window:W+sink:S - a window plus the first S tokens, which every query keeps seeing "
     "(attention sinks, StreamingLLM): the model parks attention there."},
    {"chunked-local", "L", 1, 0, nullptr, 0, 0,
     "chunked:L - causal inside blocks of L positions, nothing across (Llama 4's local "
     "layers). Not the same as chunked prefill: this changes what a token sees."},
    {"dilated", "W", 1, 16, "spacing D", 1, 8,
     "dilated:W,D - W keys spaced D apart: q, q-D, ..., q-(W-1)D (Longformer): a longer reach "
     "for the same number of keys."},
    {"prefix-LM", "P", 1, 0, nullptr, 0, 0,
     "prefix:P - positions 0..P-1 see each other both ways, the rest is causal (prefix-LM, "
     "PaliGemma). A chunk plan may not cut the prefix: an early prefix query would need keys "
     "not computed yet."},
    {"docs", "documents", 1, 8, nullptr, 0, 0,
     "docs:N1,N2,... - packed documents: causal inside each, nothing across (every training "
     "pipeline). Here the prompt is cut into this many near-equal documents."},
};
constexpr int kKindCount = static_cast<int>(sizeof kKinds / sizeof kKinds[0]);

// One picker entry as spec text ("window:8+sink:2").
std::string item_text(int kind, int a, int b, int n_tokens) {
    switch (kind) {
        case 1:
            return "window:" + std::to_string(a);
        case 2:
            return "window:" + std::to_string(a) + "+sink:" + std::to_string(b);
        case 3:
            return "chunked:" + std::to_string(a);
        case 4:
            return "dilated:" + std::to_string(a) + "," + std::to_string(b);
        case 5:
            return "prefix:" + std::to_string(a);
        case 6: {
            // a near-equal documents summing to the prompt (the grammar's rule).
            const int n = std::clamp(a, 1, std::max(1, n_tokens));
            std::string s = "docs:";
            for (int i = 0; i < n; ++i)
                s += (i ? "," : "") + std::to_string(n_tokens / n + (i < n_tokens % n ? 1 : 0));
            return s;
        }
        default:
            return "causal";
    }
}

std::string picker_spec(const MaskExplorer& e, int n_tokens) {
    std::string s = item_text(e.kind[0], e.a[0], e.b[0], n_tokens);
    if (e.kind[1] >= 0)
        s += (e.use_or ? "|" : "+") + item_text(e.kind[1], e.a[1], e.b[1], n_tokens);
    // Modifiers apply to the whole mask wherever they are written.
    if (e.alibi) s += "+alibi";
    if (e.softcap > 0) s += "+softcap:" + std::to_string(e.softcap);
    return s;
}

// Fills the picker from a spec (the --mask the viewer opened with, or typed
// text) when it is one or two picker entries; otherwise the text stays the
// whole truth and the picker is left as it was.
void sync_picker(MaskExplorer& e, const std::string& spec) {
    e.synced = spec;
    std::snprintf(e.text, sizeof e.text, "%s", spec.c_str());
    MaskSpec parsed;
    try {
        parsed = parse_mask_spec(spec);
    } catch (const Error&) {
        return;
    }
    struct Unit {
        int kind, a, b;
        bool new_group;
    };
    std::vector<Unit> units;
    for (const MaskItem& it : parsed.items) {
        const bool new_group = it.new_group;
        switch (it.kind) {
            case MaskKind::causal:
                units.push_back({0, 0, 0, new_group});
                break;
            case MaskKind::window:
                units.push_back({it.b > 0 ? 2 : 1, it.a, std::max(1, it.b), new_group});
                break;
            case MaskKind::chunked:
                units.push_back({3, it.a, 0, new_group});
                break;
            case MaskKind::dilated:
                units.push_back({4, it.a, it.b, new_group});
                break;
            case MaskKind::prefix:
                units.push_back({5, it.a, 0, new_group});
                break;
            case MaskKind::docs:
                if (it.split_at_bos) return;
                units.push_back({6, static_cast<int>(it.lengths.size()), 0, new_group});
                break;
            case MaskKind::custom:
                return;
        }
    }
    if (units.empty() || units.size() > 2) return;
    for (int i = 0; i < 2; ++i) {
        e.kind[i] = i < static_cast<int>(units.size()) ? units[i].kind : -1;
        if (i < static_cast<int>(units.size())) {
            e.a[i] = std::max(1, units[i].a);
            e.b[i] = std::max(1, units[i].b);
        }
    }
    e.use_or = units.size() == 2 && units[1].new_group;
    e.alibi = parsed.alibi;
    e.softcap = static_cast<int>(parsed.softcap);
}

void set_mask(ViewerState& state, const std::string& spec, bool force = false) {
    if (spec == state.mask && !force) return;
    state.mask = spec;
    state.dirty.mask = state.dirty.kv = state.dirty.timeline = true;
}

// One picker row: kind combo and its sliders. Returns true when something changed.
bool picker_row(MaskExplorer& e, int i, int n_tokens) {
    bool changed = false;
    const float font = ImGui::GetFontSize();
    ImGui::PushID(i);
    const char* combo = i == 0 ? "mask" : "second mask";
    if (i > 0) flow(labelled_width(font * 9, combo));
    ImGui::SetNextItemWidth(font * 9);
    const char* shown = e.kind[i] < 0 ? "none" : kKinds[e.kind[i]].label;
    if (ImGui::BeginCombo(combo, shown)) {
        if (i == 1 && ImGui::Selectable("none", e.kind[i] < 0)) {
            e.kind[i] = -1;
            changed = true;
        }
        for (int k = 0; k < kKindCount; ++k) {
            if (ImGui::Selectable(kKinds[k].label, e.kind[i] == k)) {
                e.kind[i] = k;
                changed = true;
            }
            item_tooltip(kKinds[k].tip);
        }
        ImGui::EndCombo();
    }
    probe_control(combo);
    item_tooltip(e.kind[i] < 0 ? "No second mask: the first one alone." : kKinds[e.kind[i]].tip);
    if (e.kind[i] >= 0) {
        const KindInfo& k = kKinds[e.kind[i]];
        if (k.a_name != nullptr) {
            flow(labelled_width(font * 8, k.a_name));
            ImGui::SetNextItemWidth(font * 8);
            const int hi = k.a_max > 0 ? k.a_max : std::max(k.a_min, n_tokens);
            changed |= ImGui::SliderInt(k.a_name, &e.a[i], k.a_min, hi);
            probe_control(k.a_name);
            item_tooltip(k.tip);
        }
        if (k.b_name != nullptr) {
            flow(labelled_width(font * 7, k.b_name));
            ImGui::SetNextItemWidth(font * 7);
            changed |= ImGui::SliderInt(k.b_name, &e.b[i], k.b_min, k.b_max);
            probe_control(k.b_name);
            item_tooltip(k.tip);
        }
    }
    ImGui::PopID();
    return changed;
}

}  // namespace

// 2. Above the heatmap: the picker, the composition and the spec text.
void draw_mask_picker(const MaskSnapshot& mask, ViewerState& state) {
    MaskExplorer& e = state.explorer;
    if (e.synced != state.mask) sync_picker(e, state.mask);
    const int t = mask.ready ? mask.n_tokens() : 16;
    const ProbeScope scope("mask picker");
    const float font = ImGui::GetFontSize();
    bool changed = picker_row(e, 0, t);
    flow(font * 5, font * 1.5f);
    ImGui::SetNextItemWidth(font * 5);
    int op = e.use_or ? 1 : 0;
    if (ImGui::Combo("##op", &op, "and\0or\0")) {
        e.use_or = op == 1;
        changed = true;
    }
    probe_control("and/or");
    item_tooltip(
        "How the two masks combine (FlexAttention's and_masks / or_masks): 'and' - a key is "
        "visible when both masks show it ('+' in the spec); 'or' - when either does ('|').");
    changed |= picker_row(e, 1, t);
    changed |= ImGui::Checkbox("alibi", &e.alibi);
    probe_control("alibi");
    item_tooltip(
        "ALiBi (Press et al. 2022): adds -slope_h x |q - k| to every score, a distance penalty "
        "instead of position embeddings. The mask is the same; the probabilities shift toward "
        "near keys. This model was trained with RoPE: an experiment.");
    flow(labelled_width(font * 7, "softcap"));
    ImGui::SetNextItemWidth(font * 7);
    changed |= ImGui::SliderInt("softcap", &e.softcap, 0, 50);
    probe_control("softcap");
    item_tooltip(
        "Soft-capping (Gemma 2): score -> C x tanh(score / C) keeps every score inside (-C, C). "
        "0: off. A small C flattens the attention.");
    flow(checkbox_width("paint"));
    ImGui::Checkbox("paint", &e.paint);
    probe_control("paint");
    item_tooltip(
        "Paint a mask of your own: with this on, a click on a heatmap cell shows or hides that "
        "key for that query. The result is a custom mask (file:PATH, a 0/1 matrix the viewer "
        "writes to the temp folder; plab reads the same file). Every row needs at least one "
        "visible key. A custom mask that shows a later key cannot be cut into chunks there.");
    if (changed) {
        e.text_error.clear();
        const std::string spec = picker_spec(e, t);
        e.synced = spec;
        std::snprintf(e.text, sizeof e.text, "%s", spec.c_str());
        set_mask(state, spec);
    }
    // The spec field: 22 characters' room, less when the panel is narrow.
    const float spec_w = std::clamp(ImGui::GetContentRegionAvail().x - labelled_width(0, "spec") -
                                        ImGui::GetStyle().ItemSpacing.x,
                                    font * 8, font * 22);
    flow(labelled_width(spec_w, "spec"));
    ImGui::SetNextItemWidth(spec_w);
    const bool entered =
        ImGui::InputText("spec", e.text, sizeof e.text, ImGuiInputTextFlags_EnterReturnsTrue);
    probe_control("spec");
    if (entered) {
        try {
            parse_mask_spec(e.text);
            e.text_error.clear();
            set_mask(state, e.text);
        } catch (const Error& err) {
            e.text_error = err.what();
        }
    }
    item_tooltip(
        "The mask as text, in the grammar of plab's --mask (plab mask --help). Copy it: "
        "plab mask " +
        state.mask +
        " --length N draws it in the terminal. Edit it and press Enter: '+' is and, '|' is or; "
        "'+alibi' and '+softcap:30' modify the scores.");
    flow(labelled_width(font * 5, "tile"));
    ImGui::SetNextItemWidth(font * 5);
    if (ImGui::BeginCombo("tile", std::to_string(state.mask_tile).c_str())) {
        for (int size : {4, 8, 16, 32})
            if (ImGui::Selectable(std::to_string(size).c_str(), size == state.mask_tile)) {
                state.mask_tile = size;
                state.dirty.mask = true;
            }
        ImGui::EndCombo();
    }
    probe_control("tile");
    item_tooltip(
        "Tile size of the tile map, in positions. The fast kernels use tiles of 32 keys (by "
        "48 queries on cpu, 32 on gpu); smaller tiles show where a finer kernel could skip "
        "more.");
    if (!e.text_error.empty()) wrapped_text(e.text_error, colour::kBad);
}

// 3. Painting: the mask on screen with one cell toggled, written as a 0/1 file.
void paint_cell(const MaskSnapshot& mask, ViewerState& state, int q, int k) {
    MaskExplorer& e = state.explorer;
    const int t = mask.n_tokens();
    const Mask m = mask.mask.view();
    std::vector<std::string> rows(static_cast<std::size_t>(t), std::string(t, '0'));
    for (int r = 0; r < t; ++r)
        for (int c = 0; c < t; ++c) rows[r][c] = m.visible(r, c) ? '1' : '0';
    rows[q][k] = rows[q][k] == '1' ? '0' : '1';
    if (rows[q].find('1') == std::string::npos) {
        e.text_error = "query " + std::to_string(q) +
                       " would see no key: softmax needs at least one visible key per row";
        return;
    }
    const std::filesystem::path path =
        std::filesystem::temp_directory_path() / "plab-viewer-painted-mask.txt";
    std::ofstream out(path);
    out << "# painted in plab-viewer (from " << mask.mask.spec() << ", cell q" << q << " k" << k
        << " toggled): row q = query q, column k = key k\n";
    for (const std::string& r : rows) out << r << "\n";
    if (!out.good()) {
        e.text_error = "cannot write the painted mask to " + path.string();
        return;
    }
    out.close();
    e.text_error.clear();
    ++e.paint_version;
    e.synced.clear();  // the picker shows no kind for a custom mask: the text says it all
    set_mask(state, "file:" + path.string(), /*force=*/true);
}

// 4. Beside the heatmap: first token, pairs saved, tile map, chunking verdict.
void draw_mask_facts(const MaskSnapshot& mask, ViewerState& state, float width) {
    (void)state;
    const ProbeScope scope("mask facts");  // run_report says whether they are in view
    const float font = ImGui::GetFontSize();
    wrapped_with_tip("mask " + mask.mask.spec(),
                     "The spec the engine ran under (copy it to plab --mask).", 0, width);
    wrapped_with_tip("first token: '" + token_label(mask.first_token) + "'",
                     "The greedy next token after the prompt, under this mask, from backend " +
                         mask.backend +
                         ". The model was trained causal: another mask is an experiment, and the "
                         "token may change.",
                     0, width);
    const double saved =
        mask.causal_pairs > 0 ? 1.0 - double(mask.visible_pairs) / double(mask.causal_pairs) : 0;
    char buf[160];
    std::snprintf(buf, sizeof buf, "pairs: %lld visible of %lld causal (%.0f%% %s)",
                  mask.visible_pairs, mask.causal_pairs, 100.0 * std::fabs(saved),
                  saved >= 0 ? "saved" : "more than causal");
    wrapped_with_tip(buf,
                     "Visible (query, key) pairs under this mask (count_visible_pairs) against "
                     "causal's T(T+1)/2: the attention work a kernel that skips hidden cells "
                     "saves. More than causal: the mask also shows later keys (a bidirectional "
                     "prefix).",
                     0, width);

    // The tile map: one square per (query tile, key tile).
    const int n = mask.tile > 0 ? (mask.n_tokens() + mask.tile - 1) / mask.tile : 0;
    int counts[3] = {0, 0, 0};
    for (TileClass c : mask.tiles) ++counts[static_cast<int>(c)];
    std::snprintf(buf, sizeof buf, "tile map, %d x %d positions: %d full, %d partial, %d empty",
                  mask.tile, mask.tile, counts[2], counts[1], counts[0]);
    wrapped_with_tip(buf,
                     "How a tiled attention kernel sees this mask (tile_map, the fast kernels' "
                     "classify_tile): an empty tile holds no visible key and is skipped; a full "
                     "one needs no per-cell mask test; a partial one is computed and masked cell "
                     "by cell.",
                     0, width);
    if (n > 0) {
        const float cell = std::clamp(std::floor(width / n), 2.0f, font * 1.5f);
        ImDrawList* dl = ImGui::GetWindowDrawList();
        const ImVec2 o = ImGui::GetCursorScreenPos();
        for (int qt = 0; qt < n; ++qt)
            for (int kt = 0; kt < n; ++kt) {
                const TileClass c = mask.tiles[static_cast<std::size_t>(qt) * n + kt];
                const ImU32 fill = c == TileClass::full      ? colour::kTileFull
                                   : c == TileClass::partial ? colour::kTilePartial
                                                             : colour::kTileEmpty;
                const ImVec2 a(o.x + kt * cell, o.y + qt * cell);
                dl->AddRectFilled(a, ImVec2(a.x + cell - 1, a.y + cell - 1), fill);
            }
        ImGui::InvisibleButton("tiles", ImVec2(n * cell, n * cell));
        if (ImGui::IsItemHovered()) {
            const ImVec2 m = ImGui::GetIO().MousePos;
            const int kt = std::clamp(static_cast<int>((m.x - o.x) / cell), 0, n - 1);
            const int qt = std::clamp(static_cast<int>((m.y - o.y) / cell), 0, n - 1);
            const TileClass c = mask.tiles[static_cast<std::size_t>(qt) * n + kt];
            tooltipf("queries %d..%d x keys %d..%d: %s", qt * mask.tile,
                     std::min(mask.n_tokens(), (qt + 1) * mask.tile) - 1, kt * mask.tile,
                     std::min(mask.n_tokens(), (kt + 1) * mask.tile) - 1,
                     c == TileClass::full      ? "full - every key visible, no mask test needed"
                     : c == TileClass::partial ? "partial - computed, then masked cell by cell"
                                               : "empty - no visible key: the kernel skips it");
        }
    }
    // Its legend.
    ImGui::Dummy(ImVec2(0, 0));
    legend_entry(colour::kTileFull, 0, "full",
                 "Every key visible: computed with no per-cell mask test.");
    legend_entry(colour::kTilePartial, 0, "partial",
                 "Some keys visible: computed, then masked per cell.");
    legend_entry(colour::kTileEmpty, 0, "empty", "No key visible: the kernel skips the tile.");
    // The chunking verdict.
    ImGui::Spacing();
    if (!mask.refusal.empty()) {
        const std::string refused = "plan " + mask.asked_plan.to_string() + " refused";
        badge(refused.c_str(), colour::kBad,
              "The chunk plan asked for (chunk size slider or --chunks) is not allowed under "
              "this mask: the engine refuses it rather than return another answer.");
        wrapped_text(mask.refusal, colour::kBad, width);
        wrapped_text("showing plan " + mask.plan.to_string() + " instead", colour::kClose, width);
        item_tooltip(
            "The engine never silently returns another answer: a plan under which a query "
            "would need a key its chunk has not computed yet is refused (check_plan_for_mask), "
            "and this is the nearest plan it accepts (nearest_valid_plan).");
    }
    // The plan inside the badge when it fits the column, else under it (a badge is one line).
    const std::string result = mask.chunked_equals_full ? "bitwise" : "DIFFERS";
    const std::string verdict = "chunked (" + mask.plan.to_string() + ") == full: " + result;
    const bool plan_inside = button_width(verdict.c_str()) <= width;
    badge(plan_inside ? verdict.c_str() : ("chunked == full: " + result).c_str(),
          mask.chunked_equals_full ? colour::kGood : colour::kBad,
          "Every position's logits of this chunk plan against the whole prompt at once, "
          "under this mask, on cpu-ref (a reference backend: its promise is bitwise). It holds "
          "for every mask whose queries find all their keys in their own chunk or before it.");
    if (!plan_inside) wrapped_text("plan " + mask.plan.to_string(), dim_colour(), width);
}

}  // namespace plab::viewer
