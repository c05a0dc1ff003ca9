// Panel 1, the toy example: attention you can check by hand, full vs chunked.
//
// What it teaches (lessons/01-toy-example.md): one head with head dimension
// 1 and four positions. With every query and key equal to 1, all visible
// scores are equal, so the causal output at position p is the mean of values
// 0..p: V = 2,4,8,10 gives 2, 3, 14/3, 6. Cutting the prompt into chunks
// changes nothing — a chunk's queries read the earlier keys from the KV cache —
// and the outputs match bit for bit. Everything shown comes from run_toy().
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/mask.h"
#include "panels/layout_probe.h"
#include "panels/panels.h"
#include "panels/ui_colours.h"
#include "panels/ui_playback.h"
#include "panels/ui_scale.h"
#include "panels/ui_widgets.h"

namespace plab::viewer {
namespace {

constexpr int kMaxToyPositions = 8;

std::string float_bits(float x) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &x, sizeof bits);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g  (bits 0x%08X)", x, bits);
    return buf;
}

// 1. The editable inputs: one row each for V, Q, K.
void draw_inputs(ViewerState& state) {
    ToyInput& in = state.toy;
    const int t = in.n_tokens();
    if (ImGui::BeginTable("toy inputs", t + 1, ImGuiTableFlags_SizingFixedFit)) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        line_text("position", dim_colour());
        for (int p = 0; p < t; ++p) {
            ImGui::TableNextColumn();
            line_text("p" + std::to_string(p));
            item_tooltip("Position " + std::to_string(p) + " of the toy prompt.");
        }
        struct Row {
            const char* name;
            std::vector<float>* v;
            const char* tip;
        };
        const Row rows[] = {
            {"V (value)", &in.values, "What each position contributes to the output."},
            {"Q (query)", &in.queries, "What position p is looking for. Score = q_p * k_j."},
            {"K (key)", &in.keys,
             "What position j offers. Equal keys = equal scores = a plain mean."}};
        for (const Row& r : rows) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            line_text(r.name);
            item_tooltip(r.tip);
            for (int p = 0; p < t; ++p) {
                ImGui::TableNextColumn();
                ImGui::PushID(r.name);
                ImGui::PushID(p);
                ImGui::SetNextItemWidth(ImGui::GetFontSize() * 3.5f);
                if (ImGui::InputFloat("##v", &(*r.v)[p], 0, 0, "%g")) state.dirty.toy = true;
                probe_control(r.name);
                item_tooltip(std::string(r.name) + " at position " + std::to_string(p) +
                             ". Edit it: the engine re-runs at once.");
                ImGui::PopID();
                ImGui::PopID();
            }
        }
        probe_table("toy inputs");
        ImGui::EndTable();
    }
    ImGui::BeginDisabled(t >= kMaxToyPositions);
    if (ImGui::Button("+ position")) {
        in.values.push_back(in.values.back() + 2);
        in.queries.push_back(1);
        in.keys.push_back(1);
        state.dirty.toy = true;
    }
    probe_control("+ position");
    ImGui::EndDisabled();
    flow(button_width("- position"));
    ImGui::BeginDisabled(t <= 1);
    if (ImGui::Button("- position")) {
        in.values.pop_back();
        in.queries.pop_back();
        in.keys.pop_back();
        state.dirty.toy = true;
    }
    probe_control("- position");
    ImGui::EndDisabled();
    flow(button_width("defaults"));
    if (ImGui::Button("defaults")) {
        in = ToyInput{};
        state.dirty.toy = true;
    }
    probe_control("defaults");
    item_tooltip("V = 2,4,8,10 with Q = K = 1: outputs 2, 3, 14/3, 6.");

    // Chunking presets plus free text.
    flow(labelled_width(ImGui::GetFontSize() * 8, "chunking"), ImGui::GetFontSize() * 2);
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 8);
    if (ImGui::BeginCombo("chunking", state.toy_chunks.c_str())) {
        for (const char* preset : {"full", "1", "2", "3", "1,3", "3,1", "2,1,1", "1,2,1"})
            if (ImGui::Selectable(preset, state.toy_chunks == preset)) {
                state.toy_chunks = preset;
                state.dirty.toy = true;
            }
        ImGui::EndCombo();
    }
    probe_control("chunking");
    item_tooltip(
        "How the toy prompt is cut into prefill chunks: 'full' (one chunk), a size "
        "('2' = chunks of 2) or lengths ('1,3').");
    flow(ImGui::GetFontSize() * 6);
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 6);
    ImGui::InputText("##plan", &state.toy_chunks);
    probe_control("plan");
    if (ImGui::IsItemDeactivatedAfterEdit()) state.dirty.toy = true;
    item_tooltip("Type any plan, e.g. 1,1,2. Lengths must add up to the number of positions.");
}

// 2. The mask grid: rows are queries, columns keys; the chunk in view is outlined.
void draw_grid(const ToySnapshot& toy, const StepView& step, float text_w) {
    const int t = toy.input.n_tokens();
    const float cell = ImGui::GetFontSize() * 3.2f;
    const float label = ImGui::GetFontSize() * 2.5f;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const ImVec2 grid(origin.x + label, origin.y + ImGui::GetFontSize() * 1.5f);
    const std::vector<int> starts = toy.chunked.plan.starts();
    const int done_rows = starts[step.stages_done];
    const int current = step.stages_done > 0 ? step.stages_done - 1 : -1;

    for (int k = 0; k < t; ++k) {
        const std::string s = "k" + std::to_string(k);
        dl->AddText(ImVec2(grid.x + k * cell + cell * 0.35f, origin.y), IM_COL32_WHITE, s.c_str());
    }
    for (int q = 0; q < t; ++q) {
        const std::string s = "q" + std::to_string(q);
        dl->AddText(ImVec2(origin.x, grid.y + q * cell + cell * 0.35f), IM_COL32_WHITE, s.c_str());
        for (int k = 0; k < t; ++k) {
            const ImVec2 a(grid.x + k * cell, grid.y + q * cell);
            const ImVec2 b(a.x + cell - 2, a.y + cell - 2);
            const bool visible = Mask{}.visible(q, k);  // the engine's one causal rule
            const float p = toy.chunked.probs[static_cast<size_t>(q) * t + k];
            std::string tip;
            if (!visible) {
                dl->AddRectFilled(a, b, colour::kMasked);
                draw_hatch(dl, a, b, colour::kHatch, px(8.0f));
                tip = "Masked: key k" + std::to_string(k) + " is in the future of query q" +
                      std::to_string(q) +
                      ". The causal mask lets position p see keys 0..p only, "
                      "so this cell is never read (probability 0).";
            } else if (q >= done_rows) {
                dl->AddRectFilled(a, b, colour::kPending);
                tip = "Not computed yet: query q" + std::to_string(q) +
                      " belongs to a later chunk. Step forward (right arrow).";
            } else {
                dl->AddRectFilled(a, b, probability_colour(p, false));
                char buf[16];
                std::snprintf(buf, sizeof buf, "%.3f", p);
                dl->AddText(ImVec2(a.x + 4, a.y + cell * 0.35f),
                            p > 0.6f ? IM_COL32(0, 0, 0, 255) : IM_COL32_WHITE, buf);
                tip = "Attention probability of query q" + std::to_string(q) + " on key k" +
                      std::to_string(k) + ": " + float_bits(p) +
                      ", from the engine's attention_probs. Equal scores give 1/(p+1) each.";
            }
            ImGui::SetCursorScreenPos(a);
            ImGui::PushID(q * 64 + k);
            ImGui::InvisibleButton("cell", ImVec2(cell - 2, cell - 2));
            item_tooltip(tip);
            ImGui::PopID();
        }
    }
    // Chunk outline: the current chunk's query rows over every key they may read;
    // keys before the chunk come from the KV cache (blue), its own keys are new (orange).
    if (current >= 0) {
        const int r0 = starts[current], r1 = starts[current + 1];
        if (r0 > 0)
            dl->AddRect(ImVec2(grid.x - 1, grid.y + r0 * cell - 1),
                        ImVec2(grid.x + r0 * cell - 1, grid.y + r1 * cell - 1), colour::kCached, 0,
                        0, px(3.0f));
        dl->AddRect(ImVec2(grid.x + r0 * cell - 1, grid.y + r0 * cell - 1),
                    ImVec2(grid.x + r1 * cell - 1, grid.y + r1 * cell - 1), colour::kChunk, 0, 0,
                    px(3.0f));
    }
    ImGui::SetCursorScreenPos(ImVec2(origin.x, grid.y + t * cell + 6));
    if (current >= 0) {
        const int r0 = starts[current], r1 = starts[current + 1];
        std::string text = "chunk " + std::to_string(current) + ": queries q" + std::to_string(r0) +
                           "..q" + std::to_string(r1 - 1);
        if (r0 > 0) text += " read cached keys k0..k" + std::to_string(r0 - 1) + " (blue)";
        text += " + their own keys (orange)";
        wrapped_text(text, colour::kChunk, text_w);
    } else {
        wrapped_text("before prefill: nothing computed, the cache is empty", dim_colour(), text_w);
    }
}

// The outputs table's width on one line a cell: its widest text per column, padded.
float outputs_width(const ToySnapshot& toy) {
    const ImGuiStyle& style = ImGui::GetStyle();
    float w[5] = {text_width("position"), text_width("full prefill"),
                  text_width("chunked " + toy.chunked.plan.to_string()), text_width("exact"),
                  button_width("bitwise")};
    for (std::size_t p = 0; p < toy.exact.size(); ++p) {
        w[3] = std::max(w[3], text_width(toy.exact[p]));
        w[1] = std::max(w[1], text_width("-0.0000000e+00"));
    }
    w[2] = std::max(w[2], w[1]);
    float sum = 0;
    for (float x : w) sum += x + 2 * style.CellPadding.x + 1;
    return sum;
}

// 3. Outputs: full and chunked side by side, bitwise compared.
void draw_outputs(const ToySnapshot& toy, const StepView& step) {
    const int t = toy.input.n_tokens();
    const std::vector<int> starts = toy.chunked.plan.starts();
    const int done_rows = starts[step.stages_done];
    if (ImGui::BeginTable("toy outputs", 5,
                          ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit)) {
        ImGui::TableSetupColumn("position");
        ImGui::TableSetupColumn("full prefill");
        ImGui::TableSetupColumn(("chunked " + toy.chunked.plan.to_string()).c_str());
        ImGui::TableSetupColumn("exact");
        ImGui::TableSetupColumn("match");
        ImGui::TableHeadersRow();
        for (int p = 0; p < t; ++p) {
            ImGui::PushID(p);
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            text_with_tip("p" + std::to_string(p),
                          "Output of attention at position " + std::to_string(p) + ".");
            ImGui::TableNextColumn();
            char buf[32];
            std::snprintf(buf, sizeof buf, "%.7g", toy.full.outputs[p]);
            text_with_tip(buf, "Whole prompt in one chunk: " + float_bits(toy.full.outputs[p]));
            ImGui::TableNextColumn();
            if (p < done_rows) {
                std::snprintf(buf, sizeof buf, "%.7g", toy.chunked.outputs[p]);
                text_with_tip(buf, "Chunk by chunk: " + float_bits(toy.chunked.outputs[p]));
            } else {
                text_with_tip("...", "Its chunk has not run yet.");
            }
            ImGui::TableNextColumn();
            text_with_tip(toy.exact[p].empty() ? "-" : toy.exact[p],
                          "The exact answer by hand, when all visible scores are equal (the "
                          "mean of the visible values).");
            ImGui::TableNextColumn();
            if (p < done_rows) {
                if (toy.bitwise[p])
                    badge("bitwise", colour::kGood, "Same 32 bits as the full prefill.");
                else
                    badge("differs", colour::kBad,
                          "Not the same bits as the full prefill: " +
                              float_bits(toy.chunked.outputs[p] - toy.full.outputs[p]));
            }
            ImGui::PopID();
        }
        probe_table("toy outputs");
        ImGui::EndTable();
    }
}

}  // namespace

void draw_toy(const Snapshot& snap, ViewerState& state) {
    wrapped_text("Toy example: one head, head dimension 1, causal attention by hand");
    help_marker(
        "Lesson 1 - attention you can do by hand (lessons/01-toy-example.md).\n\nEvery query and "
        "key is "
        "1, so all visible scores are equal and the output at position p is the mean of "
        "values 0..p: V = 2,4,8,10 gives 2, 3, 14/3, 6. Cut the prompt into chunks: a "
        "chunk's queries read earlier keys from the KV cache, so the outputs do not "
        "change - not even in the last bit. Edit V, Q or K; pick a chunking; step with "
        "the right arrow.");
    hint_text(
        "Try: press Home, then the right arrow to run one chunk at a time; pick chunking 1,3; "
        "set V to 1,2,3,4.");
    draw_inputs(state);
    const ToySnapshot& toy = snap.toy;
    if (!toy.error.empty()) {
        wrapped_text(toy.error, colour::kBad);
        return;
    }
    if (!toy.ready) return;
    ImGui::Spacing();
    if (toy.all_bitwise)
        badge("chunked == full: bitwise match", colour::kGood,
              "Every output of the chunked prefill has exactly the same bits as the full "
              "prefill (backend " +
                  toy.backend + ").");
    else
        badge("chunked != full", colour::kBad,
              "Some output differs in its bits. Reference backends must match exactly; fast ones "
              "may differ in the last bits.");
    const std::string ran = "backend " + toy.backend + ", plan " + toy.chunked.plan.to_string();
    flow(text_width(ran));
    line_text(ran, dim_colour());
    item_tooltip("The backend that ran the toy and the chunk plan being compared with 'full'.");
    ImGui::Separator();
    const StepView step = step_view(snap, state);
    // The grid and the outputs side by side when both fit, else the outputs below.
    const float font = ImGui::GetFontSize();
    const float grid_w = font * (2.5f + 3.2f * toy.input.n_tokens());
    const bool beside = grid_w + font * 3 + outputs_width(toy) <= ImGui::GetContentRegionAvail().x;
    ImGui::BeginGroup();
    wrapped_text("Causal mask: attention probabilities (rows = queries)", 0, beside ? grid_w : 0);
    draw_grid(toy, step, beside ? grid_w : 0);
    ImGui::EndGroup();
    if (beside) ImGui::SameLine(0, font * 3);
    ImGui::BeginGroup();
    wrapped_text("Outputs: full vs chunked");
    draw_outputs(toy, step);
    ImGui::EndGroup();
}

}  // namespace plab::viewer
