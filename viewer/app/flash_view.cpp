// What the FlashAttention panel lays out from a walk (see flash_view.h).
#include "app/flash_view.h"

#include <algorithm>
#include <sstream>

namespace plab::viewer {

std::vector<FlashRowState> flash_rows_after(const FlashWalk& walk, int steps_done) {
    std::vector<FlashRowState> rows(static_cast<std::size_t>(std::max(0, walk.n_queries)));
    const int n = std::clamp(steps_done, 0, static_cast<int>(walk.steps.size()));
    for (int s = 0; s < n; ++s)
        for (const FlashWalkRow& r : walk.steps[static_cast<std::size_t>(s)].rows) {
            if (r.query < 0 || r.query >= walk.n_queries) continue;
            FlashRowState& state = rows[static_cast<std::size_t>(r.query)];
            state.reached = true;
            state.row = r;
            state.step = s;
        }
    return rows;
}

std::vector<int> flash_cell_steps(const FlashWalk& walk) {
    const int nq = std::max(0, walk.n_queries), nk = std::max(0, walk.n_keys);
    std::vector<int> cells(static_cast<std::size_t>(nq) * static_cast<std::size_t>(nk), -1);
    for (std::size_t s = 0; s < walk.steps.size(); ++s) {
        const FlashWalkStep& st = walk.steps[s];
        for (int q = std::max(0, st.query_lo); q <= std::min(nq - 1, st.query_hi); ++q)
            for (int k = std::max(0, st.key_lo); k <= std::min(nk - 1, st.key_hi); ++k)
                cells[static_cast<std::size_t>(q) * static_cast<std::size_t>(nk) +
                      static_cast<std::size_t>(k)] = static_cast<int>(s);
    }
    return cells;
}

std::string flash_inputs_key(const ViewerState& state) {
    std::ostringstream key;
    if (state.flash_model_head) {  // a model head: the model scenes' inputs and the head's
        key << "head|" << state.attn_layer << "|" << state.attn_head << "|" << state.flash_head_tile
            << "|" << state.chunks << "|" << state.mask << "|" << state.prompt_tokens << "|"
            << state.prompt;
        return key.str();
    }
    key.precision(9);  // float round-trips through 9 significant digits
    for (const std::vector<float>* v : {&state.toy.values, &state.toy.queries, &state.toy.keys}) {
        for (float x : *v) key << x << ",";
        key << "|";
    }
    key << state.toy_chunks << "|" << state.flash_tile << "|" << state.mask;
    return key.str();
}

}  // namespace plab::viewer
