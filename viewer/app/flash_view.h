// What the FlashAttention panel lays out from a walk (lesson 17), without ImGui.
//
// What it teaches: a tiled kernel is a list of steps, (query tile × key tile), taken in
// one order; after any step each query row holds a running max m, a running
// denominator l and an output so far, and nothing else. The panel's table is that
// state after the step in view: the latest row each step wrote, read from the walk
// (src/toy/flash_walk.h), never computed here. Kept apart from the panel so the
// self-check (checks/self_check_flash.cpp) and the tests read what the panel reads.
#pragma once

#include <string>
#include <vector>

#include "app/snapshot.h"
#include "app/viewer_state.h"

namespace plab::viewer {

// One query row of the table after some steps.
struct FlashRowState {
    bool reached = false;  // a step has folded a tile into it (else the table shows "—")
    FlashWalkRow row;      // the latest row a step wrote for it
    int step = -1;         // the index of that step in walk.steps
};

// Each query's state after the first `steps_done` steps of `walk` (0..steps.size()).
// (n_queries), indexed by query position.
std::vector<FlashRowState> flash_rows_after(const FlashWalk& walk, int steps_done);

// The step that covers cell (query, key) of the score grid, for each cell: the index
// into walk.steps of the tile holding it, -1 where no step reaches it (a key beyond the
// query's key range: never loaded). (n_queries, n_keys) row-major.
std::vector<int> flash_cell_steps(const FlashWalk& walk);

// The inputs of the flash scene's walk, as text: a snapshot whose key differs was
// asked for other inputs (the toy's values, its chunk plan, the tile, the mask; for a
// model head its layer and head, the prompt, the chunk plan, the tile and the mask).
std::string flash_inputs_key(const ViewerState& state);

}  // namespace plab::viewer
