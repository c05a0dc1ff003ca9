// Panel 4, equivalence: does the prefill depend on the chunk plan or the backend?
//
// What it teaches (lessons/04-bitwise-equivalence.md): every backend runs every
// chunk plan and is compared with cpu-ref running the whole prompt in one
// chunk, on the last position's logits and on every cached K and V. Reference
// backends compute each sum in one fixed order with no FMA contraction, so they
// match bit for bit; fast backends reorder sums (GEMM blocking, tiles, online
// softmax), and floating-point addition is not associative, so they differ in
// the last bits — by how much is shown. Numbers from compare_snapshots().
#include <imgui.h>

#include <cstdio>
#include <string>

#include "panels/layout_probe.h"
#include "panels/panels.h"
#include "panels/ui_colours.h"
#include "panels/ui_widgets.h"

namespace plab::viewer {
namespace {

std::string plan_title(const std::string& plan, int n_tokens) {
    if (plan == std::to_string(n_tokens)) return "full (" + plan + ")";
    if (plan.size() > 11) return plan.substr(0, 8) + "...";  // one unbreakable word: keep it short
    return plan;
}

// The run's logits digest: a fast row whose cells all show one digest gives the
// same bits whatever the chunking (lesson 16, "Same request, different text?").
void draw_digest(const EquivalenceSnapshot& eq, size_t i) {
    if (i >= eq.digests.size() || eq.digests[i].empty()) return;
    wrapped_with_tip("#" + eq.digests[i],
                     "The first 8 hex digits of the sha256 of this run's last-position logits "
                     "(their float32 bytes). The same digest means the same bits: equal along a "
                     "row, chunking changed nothing. plab generate --prompts FILE "
                     "--logits-digest prints the whole digest per request (lesson 16).",
                     dim_colour());
}

void draw_cell(const EquivalenceSnapshot& eq, size_t row, size_t col) {
    const size_t i = row * eq.plans.size() + col;
    if (!eq.errors[i].empty()) {
        badge("error", colour::kBad, eq.errors[i]);
        return;
    }
    const Difference& d = eq.cells[i];
    if (d.bitwise()) {
        badge("bitwise", colour::kGood,
              "Logits and every K/V value have exactly the same bits as cpu-ref with the whole "
              "prompt in one chunk.");
        draw_digest(eq, i);
        return;
    }
    const bool ref = eq.reference[row];
    // The fast promise: logits within 1e-5 of cpu-ref's max |logit| (see self_check.cpp).
    const double rel = eq.logit_scale > 0 ? d.logits_max_abs / eq.logit_scale : 0;
    const bool kept = rel <= 1e-5 && d.same_argmax;
    badge(ref ? "DIFFERS" : (kept ? "close" : (d.same_argmax ? "> 1e-5" : "argmax!")),
          ref ? colour::kBad : (kept ? colour::kClose : colour::kBad),
          ref    ? "A reference backend must match bit for bit: this is a bug."
          : kept ? "Not bitwise, but within the fast promise (1e-5 of max |logit|) and the "
                   "same most likely next token: the fast path summed in a different order."
          : d.same_argmax ? "More than 1e-5 of max |logit|: more than rounding."
                          : "The most likely next token differs: more than rounding.");
    char buf[64];
    std::snprintf(buf, sizeof buf, "logits %.2e", d.logits_max_abs);
    wrapped_with_tip(buf, "Largest |difference| over the last position's logits (V values).");
    if (!ref) {
        std::snprintf(buf, sizeof buf, "= %.1e of max |logit|", rel);
        wrapped_with_tip(buf, "Relative to cpu-ref's largest |logit|; fast backends promise 1e-5.");
    }
    std::snprintf(buf, sizeof buf, "K/V %.2e", d.kv_max_abs);
    wrapped_with_tip(buf,
                     "Largest |difference| over every cached K and V value: all layers, "
                     "positions, heads and components.");
    draw_digest(eq, i);
}

// Why the fast rows differ, in words that follow the table: whether each fast
// row kept one difference across the chunk plans is read from the snapshot.
std::string equivalence_why(const EquivalenceSnapshot& eq) {
    std::string why =
        "Why fast paths differ a little: (a + b) + c and a + (b + c) round differently in "
        "float, and a fast kernel sums in another order than cpu-ref (vector lanes, tiles, fused "
        "multiply-adds). ";
    why += eq.fast_rows_same_in_every_plan()
               ? "Here that order is fixed by absolute positions, not by the chunk: each fast row "
                 "shows the same difference in every column, so chunking changes no bit on it "
                 "(lesson 15). "
               : "Here a fast row's difference changes from column to column: its kernels sum "
                 "in blocks whose shape depends on the chunk, so different chunk plans add the "
                 "same numbers in different orders. ";
    return why +
           "The reference paths use one order everywhere, so their bits are cpu-ref's in every "
           "plan. Under each cell, # and 8 hex digits of the sha256 of its logits: one digest "
           "along a row is one set of bits (lesson 16).";
}

}  // namespace

void draw_equivalence(const Snapshot& snap, ViewerState& state) {
    const EquivalenceSnapshot& eq = snap.equivalence;
    const ProbeScope scope("equivalence panel");
    wrapped_text(
        "Equivalence: every backend x chunk plan vs cpu-ref with the whole prompt in one chunk");
    help_marker(
        "Lesson 4 - bitwise equivalence (lessons/04-bitwise-equivalence.md).\n\nChunked "
        "prefill must equal full prefill. Reference backends (cpu-ref, gpu-ref) add in "
        "one fixed order with no fused multiply-add, so every cell of their rows is "
        "bitwise. Fast backends (cpu with a vectorised GEMM, gpu with tiled kernels) "
        "reorder sums; float addition is not associative, so they differ from cpu-ref in "
        "the last bits. Their kernels are chunk-invariant (tiles and vector lanes "
        "aligned to position 0), so the difference is the same in every chunk plan: "
        "lesson 15.");
    hint_text(
        "Try: move chunk size. The fast rows keep the same tiny difference; the reference rows "
        "stay bitwise.");
    if (state.dirty.equivalence)
        wrapped_with_tip(
            "Computing: every backend runs every chunk plan (emulated GPU backends take a few "
            "seconds on a CPU)...",
            "Results are kept: moving the chunk-size slider re-runs one column only.",
            colour::kClose);
    if (!eq.error.empty()) {
        wrapped_text(eq.error, colour::kBad);
        return;
    }
    if (!eq.ready) return;
    text_with_tip("prompt: " + std::to_string(eq.n_tokens) + " tokens",
                  "Prompt length T. Columns are chunk plans: 'full' (one chunk), '1' (token by "
                  "token, like decoding), the chunk-size slider, and an uneven plan 3,1,4,1,5,...");
    if (ImGui::BeginTable(
            "equivalence", static_cast<int>(eq.plans.size()) + 1,
            ImGuiTableFlags_Borders | ImGuiTableFlags_SizingStretchSame | ImGuiTableFlags_RowBg)) {
        // Headers drawn as wrapped text (ImGui's own header cuts a long name with "...").
        ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
        ImGui::TableNextColumn();
        wrapped_text("backend \\ chunk plan");
        for (const std::string& p : eq.plans) {
            ImGui::TableNextColumn();
            wrapped_with_tip(plan_title(p, eq.n_tokens), "Chunk plan " + p + ".");
        }
        for (size_t r = 0; r < eq.backends.size(); ++r) {
            ImGui::PushID(static_cast<int>(r));
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            wrapped_with_tip(eq.backends[r],
                             eq.reference[r]
                                 ? "Reference backend: promises bitwise equality with cpu-ref."
                                 : "Fast backend: promises a stated tolerance, not bitwise "
                                   "equality.");
            line_text(eq.reference[r] ? "reference" : "fast", dim_colour());
            for (size_t c = 0; c < eq.plans.size(); ++c) {
                ImGui::TableNextColumn();
                ImGui::PushID(static_cast<int>(c));
                draw_cell(eq, r, c);
                ImGui::PopID();
            }
            ImGui::PopID();
        }
        probe_table("equivalence matrix");
        ImGui::EndTable();
    }
    ImGui::Spacing();
    wrapped_text(equivalence_why(eq));
    ImGui::Spacing();
    // The badges' legend, flowing: each badge with its meaning on one line.
    const float font = ImGui::GetFontSize();
    auto entry = [&](const char* label, ImU32 c, const char* tip, const std::string& text) {
        flow(button_width(label) + ImGui::GetStyle().ItemSpacing.x + text_width(text), font * 2);
        badge(label, c, tip);
        ImGui::SameLine();
        line_text(text);
    };
    ImGui::Dummy(ImVec2(0, 0));
    entry("bitwise", colour::kGood, "Same bits.", "same bits");
    entry("close", colour::kClose, "Rounding differences only.", "rounding only, same next token");
    entry("DIFFERS", colour::kBad, "A reference backend that is not bitwise: a bug.",
          "a reference path that differs (a bug)");
}

}  // namespace plab::viewer
