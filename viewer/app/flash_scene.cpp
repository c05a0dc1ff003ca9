// The FlashAttention panel's walk asked of the engine (lesson 17). See controller.h.
//
// What it teaches: FlashAttention is the same attention taken key tile by key tile.
// The toy (the Toy panel's V, Q, K) is walked with tiles of --flash-tile keys under the
// viewer's mask (run_flash_toy, the walk `plab flash` prints), each output compared with
// the whole softmax of cpu-ref (a reference backend: its answer is the one to match bit
// for bit), and laid out as steps in the kernel's order (flash_walk_of) with the Toy
// panel's chunk boundaries. The panel draws that walk; it computes nothing.
#include <vector>

#include "app/controller.h"
#include "app/flash_view.h"
#include "toy/flash_toy.h"
#include "toy/flash_walk.h"

namespace plab::viewer {

void Controller::refresh_flash(const ViewerState& state, FlashSnapshot& out) {
    out = FlashSnapshot{};
    out.key = flash_inputs_key(state);  // kept when the inputs fail: asked again only on a change
    out.input = state.toy;
    out.tile = state.flash_tile;
    out.mask = state.mask;
    out.input.validate();
    // The chunk boundaries drawn are the Toy panel's plan: the tiles do not move with them.
    const ChunkPlan plan = parse_chunk_plan(state.toy_chunks, out.input.n_tokens());
    std::vector<int> starts{0};
    for (std::size_t i = 0; i + 1 < plan.lengths.size(); ++i)
        starts.push_back(starts.back() + plan.lengths[i]);
    const FlashToyRun run =
        run_flash_toy(out.input, out.tile, loaded("cpu-ref").backend(), out.mask);
    out.walk = flash_walk_of(run, out.input, starts);
}

}  // namespace plab::viewer
