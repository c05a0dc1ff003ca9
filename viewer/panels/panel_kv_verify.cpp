// A verify step drawn (lessons/18-speculative-decoding.md): verification is a
// prefill. The fed token and K guesses run as one chunk of K+1 rows on top of
// the KV cache; under the causal mask row i sees every cached key and the
// chunk's first i+1 keys, exactly the keys plain decoding would have given
// that position. Row i's logits judge guess i+1: the longest agreeing prefix
// is kept, the first refused guess is replaced by the target's own token, and
// the rows after it were computed for nothing — their K/V are rolled back.
#include "panels/panel_kv_verify.h"

#include <algorithm>

#include "panels/ui_colours.h"
#include "panels/ui_format.h"
#include "panels/ui_scale.h"
#include "panels/ui_widgets.h"

namespace plab::viewer {

ImU32 verify_row_colour(const KvStage& st, int row) {
    if (row == 0) return colour::kDecode;
    if (row <= st.accepted) return colour::kAccepted;
    return row == st.accepted + 1 ? colour::kRejected : colour::kDiscarded;
}

std::string verify_row_verdict(const KvStage& st, int row) {
    if (row == 0) return "the fed token: the last one the target made, its K/V kept";
    const std::string guess = "guess " + std::to_string(row);
    if (row <= st.accepted)
        return guess + ": accepted (row " + std::to_string(row - 1) +
               "'s distribution agreed), its K/V kept";
    if (row == st.accepted + 1)
        return guess + ": rejected (row " + std::to_string(row - 1) + " chose '" +
               token_label(st.target_text) + "'), its K/V rolled back";
    return guess + ": after a rejected guess, computed for nothing; its K/V rolled back";
}

namespace {

// The chunk's rows over the keys they see: the last few cached keys, then the chunk's.
void draw_verify_rows(const KvSnapshot& kv, const KvStage& st) {
    const float font = ImGui::GetFontSize();
    const int rows = st.n_pos;
    const int k0 = std::max(0, st.first_pos - 8);  // the cached keys shown before the chunk
    const int keys = st.first_pos + rows - k0;
    const float label_w = font * 11;
    const float cell =
        std::clamp((ImGui::GetContentRegionAvail().x - label_w - font * 12) / std::max(1, keys),
                   px(6.0f), font * 1.2f);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    const Mask mask = kv.mask.view();
    for (int r = 0; r < rows; ++r) {
        const int q = st.first_pos + r;
        const float y = p0.y + r * (cell + px(2));
        const std::string label = (r == 0 ? "fed '" : "guess " + std::to_string(r) + " '") +
                                  token_label(st.chunk_text[static_cast<std::size_t>(r)]) + "'";
        ImGui::SetCursorScreenPos(ImVec2(p0.x, y));
        line_text(label);
        for (int k = k0; k < st.first_pos + rows; ++k) {
            const ImVec2 a(p0.x + label_w + (k - k0) * cell, y), b(a.x + cell - 1, y + cell - 1);
            ImU32 fill = colour::kMasked;  // a later position: the mask forbids it
            if (mask.visible(q, k))
                fill = k < st.first_pos ? colour::kCached : verify_row_colour(st, k - st.first_pos);
            dl->AddRectFilled(a, b, fill);
        }
        // What the row's logits decided: the next guess's fate, or the target's token.
        const float xr = p0.x + label_w + keys * cell + font * 0.5f;
        ImGui::SetCursorScreenPos(ImVec2(xr, y));
        std::string decided;
        if (r < st.accepted) {
            decided = "-> agrees with guess " + std::to_string(r + 1);
        } else if (r == st.accepted) {
            decided = "-> target: '" + token_label(st.target_text) + "'";
        } else {
            decided = "(unused)";
        }
        line_text(decided, r > st.accepted ? dim_colour() : 0);
        ImGui::SetCursorScreenPos(ImVec2(p0.x, y));
        ImGui::InvisibleButton(("row" + std::to_string(r)).c_str(),
                               ImVec2(label_w + keys * cell, cell));
        item_tooltip("row " + std::to_string(r) + ", position " + std::to_string(q) + ": " +
                     verify_row_verdict(st, r) + ".\nIt sees keys 0.." + std::to_string(q) +
                     " (cached in blue, the chunk's own in colour): the keys a plain decode "
                     "step at this position would see, so its logits are that step's.");
    }
    ImGui::SetCursorScreenPos(ImVec2(p0.x, p0.y + rows * (cell + px(2)) + px(4)));
    ImGui::Dummy(ImVec2(1, 1));
}

}  // namespace

void draw_kv_verify(const KvSnapshot& kv, const KvStage& st, const std::string& name,
                    bool rolled_back) {
    const int guesses = st.n_pos - 1;
    wrapped_with_tip(
        name + ": one forward over " + std::to_string(st.n_pos) + " positions " +
            std::to_string(st.first_pos) + ".." + std::to_string(st.first_pos + st.n_pos - 1) +
            " (the fed token and " + std::to_string(guesses) + " guesses of prompt lookup, " +
            kv.draft + ")",
        "Verification is a prefill: the chunk runs through the same forward pass as a "
        "prefill chunk, on top of the KV cache. Row i's logits are the target's "
        "distribution after the chunk's token i, the very row a decode step would make "
        "(lesson 16: a row's bits do not depend on its chunk).");
    draw_verify_rows(kv, st);
    const int rejected = guesses - st.accepted;
    wrapped_with_tip(
        "kept: the fed token and " + std::to_string(st.accepted) + " accepted guesses; " +
            std::to_string(st.emitted.size()) + " tokens made by one target forward; " +
            (rejected > 0 ? std::to_string(rejected) + (rejected == 1 ? " guess" : " guesses") +
                                " rolled back"
                          : "no roll-back"),
        "Each accepted guess is a token made without a target forward of its own; the "
        "target's own token (the replacement of the first rejected guess, or a bonus token "
        "when all were accepted) comes from the last kept row.");
    if (st.blocks_verified != st.blocks_in_use || rejected > 0) {
        wrapped_with_tip(
            "blocks: " + std::to_string(st.blocks_verified) + " while verifying -> " +
                std::to_string(st.blocks_in_use) + " after the roll-back" +
                (rolled_back ? "" : " (press the right arrow to finish the step)"),
            "The chunk reserved room for every guess; the roll-back (BlockManager::truncate) "
            "gives back each block left with no kept position, and the sequence's length "
            "drops to the kept positions. The prefix cache never names a block that held a "
            "rejected guess.",
            st.blocks_verified > st.blocks_in_use ? colour::kClose : 0);
    }
}

}  // namespace plab::viewer
