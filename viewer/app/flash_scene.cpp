// The FlashAttention panel's walk asked of the engine (lesson 17). See controller.h.
//
// What it teaches: FlashAttention is the same attention taken key tile by key tile.
// The toy (the Toy panel's V, Q, K) is walked with tiles of --flash-tile keys under the
// viewer's mask (run_flash_toy, the walk `plab flash` prints), each output compared with
// the whole softmax of cpu-ref (a reference backend: its answer is the one to match bit
// for bit), and laid out as steps in the kernel's order (flash_walk_of) with the Toy
// panel's chunk boundaries. The panel draws that walk; it computes nothing.
// A model head (--layer/--head, or the panel's switch) is walked the same way on a real
// prefill: the model scenes' prompt, chunk plan and mask, on the emulated gpu backend,
// in its kernel's order (run_flash_head, the walk `plab flash --model` prints).
#include <vector>

#include "app/controller.h"
#include "app/flash_view.h"
#include "toy/flash_head.h"
#include "toy/flash_toy.h"
#include "toy/flash_walk.h"

namespace plab::viewer {

void Controller::refresh_flash(const ViewerState& state, FlashSnapshot& out) {
    if (state.flash_model_head) {
        refresh_flash_head(state, out);
        return;
    }
    out = FlashSnapshot{};
    out.key = flash_inputs_key(state);  // kept when the inputs fail: asked again only on a change
    out.input = state.toy;
    out.tile = state.flash_tile;
    out.mask = state.mask;
    out.input.validate();
    // The chunk boundaries drawn are the Toy panel's plan: the tiles do not move with them.
    const ChunkPlan plan = parse_chunk_plan(state.toy_chunks, out.input.n_tokens());
    std::vector<int> starts = plan.starts();
    starts.pop_back();  // the chunks' first positions, not the end
    const FlashToyRun run =
        run_flash_toy(out.input, out.tile, loaded("cpu-ref").backend(), out.mask);
    out.walk = flash_walk_of(run, out.input, starts);
}

void Controller::refresh_flash_head(const ViewerState& state, FlashSnapshot& out) {
    out = FlashSnapshot{};
    out.key = flash_inputs_key(state);
    out.model_head = true;
    out.tile = state.flash_head_tile;
    out.mask = state.mask;
    // 1. What the Mask panel runs: the prompt's tokens, the mask bound to them, and the
    //    chunk plan (a plan the mask refuses replaced by the nearest valid one, said so).
    out.tokens = encode(state);
    const int t = static_cast<int>(out.tokens.size());
    const BoundMask mask = mask_for(state, out.tokens);
    out.plan = allowed_plan(mask.view(), parse_chunk_plan(state.chunks, t), out.refusal);
    // 2. The prefill on the gpu backend, one head of one layer walked in its kernel's order
    //    (its own states read through the emulator's tap at its own tile).
    FlashHeadOptions o;
    o.layer = state.attn_layer;
    o.head = state.attn_head;
    o.tile = state.flash_head_tile;
    o.mask_spec = state.mask;
#ifdef __EMSCRIPTEN__
    // The web page has no gpu backend: cpu-ref's prefill gives the head's q, k and v,
    // and the walk is the port of the gpu kernel's order alone (none of its states read).
    o.backend = "cpu-ref";
#endif
    const FlashHeadRun run = run_flash_head(model_.weights, out.tokens, out.plan, mask, o);
    out.walk = flash_walk_of(run);
    // 3. What the run says of the walk, kept without its (T, Dh) arrays.
    FlashHeadSummary& h = out.head;
    h.layer = run.layer;
    h.head = run.head;
    h.kv_head = run.kv_head;
    h.head_dim = run.head_dim;
    h.backend = run.backend;
    h.kernel_key_tile = run.kernel_key_tile;
    h.recorded = run.recorded;
    h.kernel_states = run.kernel_states;
    h.port_matches_kernel = run.port_matches_kernel;
    h.vs_reference = run.vs_reference;
    h.vs_gpu = run.vs_gpu;
    h.skipped = run.skipped;
    h.unreached = run.unreached;
    h.partial = run.partial;
    h.full = run.full;
}

}  // namespace plab::viewer
