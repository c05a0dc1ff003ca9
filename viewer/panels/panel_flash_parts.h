// The FlashAttention panel in two files (lesson 17): panel_flash.cpp lays the panel out
// and draws the toy's walk (4 positions: a number in every cell, every query's row);
// panel_flash_head.cpp draws a model head's (up to 512 positions in tiles of 64: the
// grid baked into a texture, the rows of the step's query tile only). What both draw
// with is declared here.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "app/flash_view.h"
#include "app/snapshot.h"
#include "app/viewer_state.h"

namespace plab::viewer {

// Up to 7 significant digits; -inf as the lessons write it.
std::string flash_num(float x);
// All the digits a float holds, and its 32 bits: for tooltips.
std::string flash_exact(float x);
ImU32 flash_class_colour(TileClass c);
const char* flash_class_name(TileClass c);
// The keys of a step's tile: "keys 2..3" (one key: "key 2").
std::string flash_keys_text(const FlashWalkStep& s);
// "query 2" or "queries 0..3": the rows of a step's query tile.
std::string flash_queries_text(const FlashWalkStep& s);
// The index of the chunk holding position p.
int flash_chunk_of(const FlashWalk& w, int p);
// The last step touching each query (its row is final once that step is taken); -1: none.
std::vector<int> flash_last_steps(const FlashWalk& w);
// A table row's m, l and rescale cells (three columns): its latest row, or "—" before
// its first tile; the rescale highlighted when the step in view (done - 1) made it.
void flash_state_cells(const FlashRowState& r, int q, int done);

// panel_flash_head.cpp. The model head's controls: its layer and head, keys per tile (0:
// the kernel's own), and what was walked.
void flash_head_controls(const Snapshot& snap, ViewerState& state);
// Everything under the controls for a model head, after `done` steps of its walk:
// where its states came from, the grid, the step in view, the rows of its query tile
// and, once complete, the outputs against cpu-ref's whole softmax.
void flash_head_body(const Snapshot& snap, ViewerState& state, int done, bool complete);

}  // namespace plab::viewer
