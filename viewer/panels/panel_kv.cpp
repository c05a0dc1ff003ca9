// Panel 3, KV cache growth: blocks filling chunk by chunk, then one slot per decode step.
//
// What it teaches (lessons/02-prefill-and-the-kv-cache.md): the paged KV cache (PagedAttention,
// Kwon et al. 2023) keeps every position's K and V so that nothing is computed
// twice. Each layer has its own pool of fixed-size blocks; the sequence's block
// table maps logical block i (positions i·B..i·B+B-1) to a physical block.
// Prefill fills a whole chunk of slots per layer at once; each decode step adds
// exactly one slot per layer. Everything drawn is what the engine reported: the
// block table and byte counts after each call, and its "kv append" trace events.
#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "core/kv_layout.h"
#include "panels/layout_probe.h"
#include "panels/panel_kv_verify.h"
#include "panels/panels.h"
#include "panels/ui_colours.h"
#include "panels/ui_format.h"
#include "panels/ui_playback.h"
#include "panels/ui_scale.h"
#include "panels/ui_widgets.h"

namespace plab::viewer {
namespace {

// Positions of one layer that are in the cache at the cursor (a verify step
// in progress: its whole chunk, the roll-back comes after its last layer).
int filled_length(const KvSnapshot& kv, const StepView& step, int layer) {
    if (!step.complete() && layer < step.layers_done) {
        const KvStage& st = kv.stages[step.stages_done];
        return st.verify ? st.first_pos + st.n_pos : st.length;
    }
    return step.stages_done > 0 ? kv.stages[step.stages_done - 1].length : 0;
}

// The engine call (stage) that wrote each position kept in the cache, and for
// a verify step's chunk the positions it wrote past them (rolled back after).
std::vector<int> stage_of_position(const KvSnapshot& kv) {
    std::vector<int> out;
    for (int s = 0; s < static_cast<int>(kv.stages.size()); ++s) {
        const KvStage& st = kv.stages[s];
        out.resize(static_cast<std::size_t>(st.first_pos));
        out.insert(out.end(), st.n_pos, s);
    }
    if (!kv.stages.empty()) out.resize(static_cast<std::size_t>(kv.stages.back().length));
    return out;
}

std::string stage_name(const KvSnapshot& kv, int s) {
    const KvStage& st = kv.stages[s];
    if (st.decode) {
        int n_prefill = 0;
        for (const KvStage& x : kv.stages) n_prefill += x.decode ? 0 : 1;
        return (st.verify ? "verify step " : "decode step ") + std::to_string(s - n_prefill + 1);
    }
    return "prefill chunk " + std::to_string(s);
}

ImU32 stage_colour(const KvSnapshot& kv, int s, int current) {
    if (s == current) return kv.stages[s].decode ? colour::kDecode : colour::kChunk;
    if (kv.stages[s].decode) return IM_COL32(70, 140, 80, 255);
    return s % 2 ? IM_COL32(60, 120, 190, 255) : IM_COL32(45, 95, 160, 255);
}

// The engine call in view: the calls done, and the one whose numbers are shown.
struct KvInView {
    const KvSnapshot& kv;
    StepView step;
    int current = -1;                // the call shown; -1 = none yet
    const KvStage* shown = nullptr;  // kv.stages[current], or null
    // The shown call is a verify step not finished yet: its whole chunk is
    // written, the roll-back not done.
    bool verifying() const { return shown != nullptr && shown->verify && step.layers_done > 0; }
    // The shown call's verify step is done: its rejected guesses rolled back.
    bool rolled_back() const { return shown != nullptr && shown->verify && step.layers_done == 0; }
    // The block table the picture is at.
    const std::vector<int32_t>* table() const {
        if (shown == nullptr) return nullptr;
        return verifying() ? &shown->table_verified : &shown->block_table;
    }
};

// The rows of blocks: one row per layer, a block of B slots per logical block.
struct KvGrid {
    ImDrawList* dl = nullptr;
    float font = 0;
    float gap = 0;                // between blocks
    float slot = 0;               // a slot's width
    float row_h = 0;              // a layer's row
    ImVec2 start{};               // top-left of the rows (layer labels)
    int n_blocks = 0;             // logical blocks: the most any call's table held
    std::vector<int> stage_of{};  // (T) the call that wrote each position kept
};

// One slot of one layer's row.
struct KvSlot {
    int layer = 0, blk = 0, s = 0;  // layer, logical block, offset in the block
    int pos = 0;                    // blk * B + s
    int filled = 0;                 // positions of this layer in the cache
    bool allocated = false, freed = false;
};

void draw_kv_title() {
    wrapped_text("KV cache growth: blocks per layer, filled chunk by chunk");
    help_marker(
        "Lesson 2 - prefill and the KV cache (lessons/02-prefill-and-the-kv-cache.md).\n\nEvery "
        "layer keeps the K "
        "and V of every position in a pool of blocks of B positions (PagedAttention, Kwon "
        "et al. 2023). Prefill writes a whole chunk per layer; each decode step then adds "
        "one position, reusing the cache instead of recomputing the prompt. Right arrow: "
        "one engine call; down arrow: one layer. Hover a slot or a block.\n\nUnder a "
        "window-type mask (--mask window:8, window:8+sink:2, chunked:16, docs:...) the blocks "
        "no later query can see are given back to the pool (drawn as freed): memory stays flat "
        "as the prompt grows.");
    hint_text(
        "Try: press Home, then the right arrow for one engine call or the down arrow for one "
        "layer; watch the blocks fill.");
}

// 1b. Speculative decoding (lesson 18): guesses a decode step verifies, and the
//     prompt lookup that proposes them.
void draw_kv_speculate_inputs(ViewerState& state) {
    flow(labelled_width(ImGui::GetFontSize() * 6, "speculate K"));
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 6);
    if (ImGui::SliderInt("speculate K", &state.speculate, 0, 8)) state.dirty.kv = true;
    probe_control("speculate K");
    item_tooltip(
        "Speculative decoding (lesson 18): each decode step proposes up to K guesses and the "
        "target checks them all in one forward over K+1 positions, a prefill chunk on top of "
        "the cache. 0: plain decode steps.");
    if (state.speculate == 0) return;
    flow(labelled_width(ImGui::GetFontSize() * 6, "draft"));
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 6);
    const std::string shown = "ngram:" + std::to_string(state.draft_ngram);
    if (ImGui::BeginCombo("draft", shown.c_str())) {
        for (int n : {1, 2, 3, 4})
            if (ImGui::Selectable(("ngram:" + std::to_string(n)).c_str(), n == state.draft_ngram)) {
                state.draft_ngram = n;
                state.dirty.kv = true;
            }
        ImGui::EndCombo();
    }
    probe_control("draft");
    item_tooltip(
        "Prompt lookup: find the last N tokens' previous occurrence in the text so far and "
        "propose the tokens that followed it. No second model; it pays off where text "
        "repeats.");
}

// 1. Inputs of this panel: B and the decode steps.
void draw_kv_inputs(const KvSnapshot& kv, ViewerState& state) {
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 6);
    if (ImGui::BeginCombo("block size B", std::to_string(state.block_size).c_str())) {
        for (int b : {1, 2, 4, 8, 16, 32})
            if (ImGui::Selectable(std::to_string(b).c_str(), b == state.block_size)) {
                state.block_size = b;
                state.dirty.kv = true;
            }
        ImGui::EndCombo();
    }
    probe_control("block size B");
    item_tooltip(
        "Positions per cache block. Small blocks waste less memory at the end of a "
        "sequence; large ones need shorter block tables.");
    flow(labelled_width(ImGui::GetFontSize() * 8, "decode steps"));
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 8);
    if (ImGui::SliderInt("decode steps", &state.decode_steps, 0, 16)) state.dirty.kv = true;
    probe_control("decode steps");
    item_tooltip(
        state.speculate > 0
            ? "Verify steps after the prefill: each runs the fed token and its guesses as one "
              "chunk, keeps the accepted ones and rolls the rest back."
            : "Greedy decode steps after the prefill; each appends one position.");
    draw_kv_speculate_inputs(state);
    if (kv.ready && kv.decode_skipped > 0 && !kv.stages.empty()) {
        wrapped_with_tip(
            "(" + std::to_string(kv.decode_skipped) + " skipped: at most " +
                std::to_string(kv.stages.back().length) +
                " positions - the model's max_seq_len or a custom mask's rows)",
            "max_seq_len: the longest sequence the model (and its RoPE table and "
            "cache) accepts. A custom mask (file:) has a row for its own positions only: "
            "decoding stops at its last row.",
            colour::kClose);
    }
}

// 2. Totals at the cursor.
void draw_kv_totals(const KvInView& in) {
    const KvSnapshot& kv = in.kv;
    const KvStage* shown = in.shown;
    const int length = shown ? shown->length : 0;
    text_with_tip("after: " + (shown ? stage_name(kv, in.current) : std::string("nothing yet")),
                  "The engine call the picture is at. Prefill chunks come first, then decode "
                  "steps.");
    // The totals flow like words: as many on a line as fit.
    auto total = [](const std::string& text, const char* tip) {
        flow(text_width(text), ImGui::GetFontSize() * 2);
        text_with_tip(text, tip);
    };
    total("positions cached: " + std::to_string(length),
          "Positions whose K and V are in the cache (in every layer).");
    total("blocks: " + std::to_string(shown ? shown->blocks_in_use : 0) + " of " +
              std::to_string(kv.num_blocks),
          "Physical blocks in use (one block id is used in every layer's pool) out of "
          "the pool's size.");
    total("memory: " + format_bytes(shown ? static_cast<double>(shown->bytes_in_use) : 0),
          "Bytes of the blocks in use, K and V, all layers. A half-full block costs a "
          "whole block.");
    if (!kv.mask.is_causal())
        total("mask " + kv.mask.spec() + ": " + std::to_string(shown ? shown->freed_blocks : 0) +
                  " blocks freed",
              "Blocks this mask lets no present or future query see, given back to the "
              "pool (BlockManager::free_forgotten): their table entries read 'freed'.");
    total(format_bytes(static_cast<double>(kv.bytes_per_token)) + " per token",
          "K and V of one position across all layers: 2 x L x Hkv x Dh floats x 4 bytes.");
    if (!kv.refusal.empty())
        wrapped_text(kv.refusal + " (ran plan " + kv.plan.to_string() + " instead)", colour::kBad);
}

// The rows' geometry: slots as wide as the panel allows (3 to 28 pixels at scale 1).
KvGrid kv_grid(const KvSnapshot& kv) {
    KvGrid g;
    g.stage_of = stage_of_position(kv);
    for (const KvStage& st : kv.stages)
        g.n_blocks = std::max({g.n_blocks, static_cast<int>(st.block_table.size()),
                               static_cast<int>(st.table_verified.size())});
    g.font = ImGui::GetFontSize();
    const float avail = ImGui::GetContentRegionAvail().x - g.font * 5;
    g.gap = px(4);
    g.slot = std::clamp((avail - g.n_blocks * g.gap) / std::max(1, g.n_blocks * kv.block_size),
                        px(3.0f), px(28.0f));
    g.row_h = std::clamp(g.slot * 1.6f, g.font * 1.4f, g.font * 2.2f);
    g.dl = ImGui::GetWindowDrawList();
    g.start = ImVec2(ImGui::GetCursorScreenPos().x, ImGui::GetCursorScreenPos().y + g.font * 1.2f);
    return g;
}

// A slot's tooltip: which call wrote it and where it lives (logical -> physical block).
std::string kv_slot_tip(const KvInView& in, const KvGrid& g, const KvSlot& sl) {
    const KvSnapshot& kv = in.kv;
    std::string tip = "layer " + std::to_string(sl.layer) + ", position " + std::to_string(sl.pos);
    const KvStage* v = in.shown != nullptr && in.shown->verify ? in.shown : nullptr;
    const int row = v != nullptr ? sl.pos - v->first_pos : -1;
    if (v != nullptr && row >= 0 && row < v->n_pos) {
        tip += " '" + token_label(v->chunk_text[static_cast<std::size_t>(row)]) + "'\n" +
               verify_row_verdict(*v, row);
        if (in.rolled_back() && sl.pos >= v->length)
            tip += "\nits K/V were written by " + stage_name(kv, in.current) +
                   ", then rolled back (BlockManager::truncate): the slot holds nothing, and a "
                   "block left with no kept position went back to the pool";
        return tip;
    }
    if (sl.pos < static_cast<int>(kv.token_text.size()))
        tip += " '" + token_label(kv.token_text[sl.pos]) + "'";
    const std::vector<int32_t>& table = *in.table();
    if (sl.freed) {
        tip += "\nwritten by " + stage_name(kv, g.stage_of[sl.pos]) + ", then freed: mask " +
               kv.mask.spec() + " lets no later query see logical block " + std::to_string(sl.blk) +
               ", so its physical block went back to the pool";
    } else if (sl.pos < sl.filled) {
        tip += "\nwritten by " + stage_name(kv, g.stage_of[sl.pos]);
        tip += "\nlogical block " + std::to_string(sl.blk) + " -> physical block " +
               std::to_string(table[sl.blk]) + ", slot " +
               std::to_string(table[sl.blk] * kv.block_size + sl.s) + " = " +
               std::to_string(table[sl.blk]) + " x B + " + std::to_string(sl.s);
    } else if (sl.allocated) {
        tip +=
            "\nreserved but empty: the block is allocated, the position "
            "not written yet";
    } else {
        tip += "\nno block allocated yet";
    }
    return tip;
}

// One block of one layer's row at x0: its slots (each hoverable), its outline, and above
// layer 0 its physical block id.
void draw_kv_block(const KvInView& in, const KvGrid& g, ImVec2 o, float x0, KvSlot sl) {
    const KvSnapshot& kv = in.kv;
    const KvStage* shown = in.shown;
    ImDrawList* dl = g.dl;
    const bool shared = sl.allocated &&
                        static_cast<std::size_t>(sl.blk) < shown->ref_counts.size() &&
                        shown->ref_counts[sl.blk] > 1;
    for (int s = 0; s < kv.block_size; ++s) {
        sl.s = s;
        sl.pos = sl.blk * kv.block_size + s;
        const ImVec2 a(x0 + s * g.slot, o.y), b(a.x + g.slot - 1, o.y + g.row_h);
        ImU32 fill = sl.allocated ? IM_COL32(55, 55, 62, 255) : IM_COL32(32, 32, 36, 255);
        // A verify step's chunk: coloured by the rule's verdict on each row.
        const bool in_chunk = shown != nullptr && shown->verify && sl.pos >= shown->first_pos &&
                              sl.pos < shown->first_pos + shown->n_pos;
        if (sl.pos < sl.filled)
            fill = in_chunk ? verify_row_colour(*shown, sl.pos - shown->first_pos)
                            : stage_colour(kv, g.stage_of[sl.pos], in.current);
        if (in_chunk && in.rolled_back() && sl.pos >= shown->length) fill = colour::kRolledBack;
        if (sl.freed) fill = colour::kFreed;
        dl->AddRectFilled(a, b, fill);
        ImGui::SetCursorScreenPos(a);
        ImGui::PushID(sl.pos);
        ImGui::InvisibleButton("slot", ImVec2(g.slot, g.row_h));
        if (ImGui::IsItemHovered()) tooltip(kv_slot_tip(in, g, sl));
        ImGui::PopID();
    }
    const ImVec2 a(x0, o.y), b(x0 + kv.block_size * g.slot - 1, o.y + g.row_h);
    dl->AddRect(a, b,
                shared ? colour::kShared
                       : (sl.allocated ? IM_COL32(160, 160, 170, 255) : IM_COL32(70, 70, 76, 255)),
                0, 0, px(shared ? 3.0f : 1.0f));
    if (sl.layer == 0 && sl.allocated && !sl.freed && kv.block_size * g.slot > g.font * 1.8f) {
        const std::string id = "#" + std::to_string((*in.table())[sl.blk]);
        dl->AddText(ImVec2(a.x + 2, o.y - g.font * 1.05f), IM_COL32(170, 170, 180, 255),
                    id.c_str());
    }
}

// 3. One row of blocks per layer.
void draw_kv_blocks(const KvInView& in) {
    const KvSnapshot& kv = in.kv;
    const KvGrid g = kv_grid(kv);
    const float font = g.font;
    for (int layer = 0; layer < kv.n_layers; ++layer) {
        ImGui::PushID(layer);
        const int filled = filled_length(kv, in.step, layer);
        const ImVec2 o(g.start.x + font * 4.5f, g.start.y + layer * (g.row_h + px(6)));
        ImGui::SetCursorScreenPos(ImVec2(g.start.x, o.y + (g.row_h - font) * 0.5f));
        text_with_tip("layer " + std::to_string(layer),
                      "Layer " + std::to_string(layer) + "'s pools (one for K, one for V). " +
                          std::to_string(filled) + " positions filled.");
        const std::vector<int32_t>* table = in.table();
        const int table_len = table ? static_cast<int>(table->size()) : 0;
        for (int blk = 0; blk < g.n_blocks; ++blk) {
            KvSlot sl;
            sl.layer = layer;
            sl.blk = blk;
            sl.filled = filled;
            sl.allocated = blk < table_len;
            sl.freed = sl.allocated && (*table)[blk] == kFreedBlock;
            draw_kv_block(in, g, o, o.x + blk * (kv.block_size * g.slot + g.gap), sl);
        }
        ImGui::PopID();
    }
    ImGui::SetCursorScreenPos(ImVec2(g.start.x, g.start.y + kv.n_layers * (g.row_h + px(6)) + 4));
    ImGui::Dummy(ImVec2(1, 4));
}

// 4. Legend.
void draw_kv_legend(bool speculative) {
    auto swatch = [&](ImU32 c, const char* text, const char* tip, bool border) {
        legend_entry(border ? 0 : c, border ? c : 0, text, tip);
    };
    swatch(colour::kChunk, "this prefill chunk", "Slots written by the engine call in view.",
           false);
    swatch(IM_COL32(60, 120, 190, 255), "earlier chunks",
           "Slots written by earlier prefill chunks.", false);
    swatch(colour::kDecode, "decode step", "One slot per layer per decode step.", false);
    swatch(IM_COL32(55, 55, 62, 255), "reserved, empty", "Allocated block, slot not written yet.",
           false);
    swatch(colour::kShared, "shared prefix block",
           "A block used by more than one sequence (prefix-cache hit, reference count > 1). None "
           "here: this session has a single sequence; see 'four requests, one engine' above.",
           true);
    if (speculative) {
        swatch(colour::kAccepted, "accepted guess",
               "Speculative decoding: a guess the target's row agreed with; its K/V stay.", false);
        swatch(colour::kRejected, "rejected guess",
               "The first guess the target refused; the target's own token replaces it. Its "
               "K/V and every later guess's are rolled back.",
               false);
        swatch(colour::kRolledBack, "rolled back",
               "A slot a verify step wrote and its roll-back emptied (BlockManager::truncate).",
               false);
    }
    swatch(colour::kFreed, "freed by the mask",
           "A block the mask lets no present or future query see (a key that slid out of the "
           "window, a chunk or document that ended): given back to the pool, its table entry "
           "marked freed. Causal frees nothing.",
           false);
}

// 5a. The memory chart's title: the most blocks held after a call, and during one.
void draw_kv_memory_title(const KvSnapshot& kv) {
    int most = 0, peak = 0;
    for (const KvStage& st : kv.stages) {
        most = std::max(most, st.blocks_in_use);
        peak = std::max(peak, st.peak_blocks);
    }
    wrapped_with_tip(
        "cache memory after each engine call: at most " + std::to_string(most) +
            " blocks held after a call, " + std::to_string(peak) + " during one",
        "KvCache::bytes_in_use() after each prefill chunk and decode step. It grows by "
        "whole blocks: a block is allocated when the first position lands in it. Under a "
        "window-type mask it stays flat: each call gives back the blocks that slid out. The "
        "white tick is the most the call held before giving them back.");
}

// 5b. Memory after every engine call: a bar per call (hover: its numbers), whole blocks,
//     so it grows in steps of a block; a white tick where a call held more during it.
void draw_kv_memory_bars(const KvInView& in) {
    const KvSnapshot& kv = in.kv;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float font = ImGui::GetFontSize();
    const float bar_w = std::clamp(
        (ImGui::GetContentRegionAvail().x - font) / std::max<size_t>(1, kv.stages.size()), 4.0f,
        font * 2.5f);
    const float h = font * 4;
    double max_bytes = 1.0;  // the most held, during a call included
    for (const KvStage& st : kv.stages)
        max_bytes = std::max(max_bytes,
                             double(st.peak_blocks) * kv.block_size * double(kv.bytes_per_token));
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    for (int s = 0; s < static_cast<int>(kv.stages.size()); ++s) {
        const KvStage& st = kv.stages[s];
        const float bh = static_cast<float>(st.bytes_in_use / max_bytes) * h;
        const ImVec2 a(p0.x + s * bar_w, p0.y + h - bh), b(a.x + bar_w - 2, p0.y + h);
        const bool done = s < in.step.stages_done;
        dl->AddRectFilled(a, b, done ? stage_colour(kv, s, in.current) : IM_COL32(50, 50, 56, 255));
        if (st.peak_blocks > st.blocks_in_use && st.blocks_in_use > 0) {
            const float py = p0.y + h - bh * static_cast<float>(st.peak_blocks) / st.blocks_in_use;
            dl->AddLine(ImVec2(a.x, py), ImVec2(b.x, py), IM_COL32(230, 230, 230, 255), px(2.0f));
        }
        ImGui::SetCursorScreenPos(ImVec2(a.x, p0.y));
        ImGui::PushID(1000 + s);
        ImGui::InvisibleButton("bar", ImVec2(bar_w - 2, h));
        item_tooltip(stage_name(kv, s) + ": " + std::to_string(st.length) + " positions in " +
                     std::to_string(st.blocks_in_use) +
                     " blocks = " + format_bytes(static_cast<double>(st.bytes_in_use)) +
                     (st.freed_blocks > 0
                          ? "; " + std::to_string(st.peak_blocks) + " held during the call, " +
                                std::to_string(st.freed_blocks) + " freed so far"
                          : std::string()));
        ImGui::PopID();
    }
    ImGui::SetCursorScreenPos(ImVec2(p0.x, p0.y + h + 4));
    ImGui::Dummy(ImVec2(1, 1));
}

// 6. The engine's own report of the call in view: its "kv append" trace events.
void draw_kv_appends(const KvInView& in) {
    const KvSnapshot& kv = in.kv;
    const KvStage* shown = in.shown;
    if (shown == nullptr) {
        wrapped_text("before prefill: the cache is empty (press the right arrow)", dim_colour());
        return;
    }
    wrapped_with_tip("trace of " + stage_name(kv, in.current) + ": positions " +
                         std::to_string(shown->first_pos) + ".." +
                         std::to_string(shown->first_pos + shown->n_pos - 1),
                     "The positions this engine call wrote, and below its 'kv append' trace "
                     "events (one per layer) exactly as the engine recorded them.");
    if (!ImGui::BeginTable("appends", 5, ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit))
        return;
    ImGui::TableSetupColumn("event");
    ImGui::TableSetupColumn("layer");
    ImGui::TableSetupColumn("positions");
    ImGui::TableSetupColumn("blocks");
    ImGui::TableSetupColumn("slots");
    ImGui::TableHeadersRow();
    for (size_t i = 0; i < shown->appends.size(); ++i) {
        const TraceEvent& e = shown->appends[i];
        auto arg = [&](const char* k) {
            auto it = e.args.find(k);
            return it == e.args.end() ? std::string("-") : it->second;
        };
        ImGui::PushID(static_cast<int>(i));
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        const bool done = in.step.layers_done == 0 || static_cast<int>(i) < in.step.layers_done;
        if (done)
            text_with_tip(e.name, "Trace event at " + format_us(e.start_us) + ", lasting " +
                                      format_us(e.dur_us) + ".");
        else
            line_text(e.name + " (next)", dim_colour());
        ImGui::TableNextColumn();
        text_with_tip(arg("layer"), "Layer whose pool was written.");
        ImGui::TableNextColumn();
        text_with_tip(arg("positions"), "Positions appended by this call.");
        ImGui::TableNextColumn();
        text_with_tip(arg("blocks"), "Physical blocks the positions went into.");
        ImGui::TableNextColumn();
        text_with_tip(arg("slots"),
                      "Slots written, as runs first-last: slot = physical block x B + "
                      "offset in the block. A chunk that starts inside a block continues "
                      "that block's run.");
        ImGui::PopID();
    }
    probe_table("kv append events");
    ImGui::EndTable();
}

}  // namespace

void draw_kv(const Snapshot& snap, ViewerState& state) {
    draw_serving_toggle(state);
    if (state.serving_view) {
        draw_kv_pool(snap, state);
        return;
    }
    const KvSnapshot& kv = snap.kv;
    draw_kv_title();

    // 1. Inputs of this panel.
    const ProbeScope scope("kv panel");
    draw_kv_inputs(kv, state);
    if (!kv.error.empty()) {
        wrapped_text(kv.error, colour::kBad);
        return;
    }
    if (!kv.ready || kv.stages.empty()) return;

    const StepView step = step_view(snap, state);
    const int current = step.layers_done > 0 ? step.stages_done : step.stages_done - 1;
    const KvInView in{kv, step, current, current >= 0 ? &kv.stages[current] : nullptr};

    // 2. Totals at the cursor; 3. one row of blocks per layer; 4. the legend.
    draw_kv_totals(in);
    draw_kv_blocks(in);
    draw_kv_legend(kv.speculate > 0);
    // 4b. A verify step in view: its rows on the mask grid, what was kept.
    if (in.shown != nullptr && in.shown->verify) {
        ImGui::Separator();
        draw_kv_verify(kv, *in.shown, stage_name(kv, in.current), in.rolled_back());
    }

    // 5. Memory after every engine call: whole blocks, so it grows in steps of a block.
    ImGui::Separator();
    draw_kv_memory_title(kv);
    draw_kv_memory_bars(in);

    // 6. The engine's own report of this call: its "kv append" trace events.
    ImGui::Separator();
    draw_kv_appends(in);
}

}  // namespace plab::viewer
