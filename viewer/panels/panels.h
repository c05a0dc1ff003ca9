// The seven panels of plab-viewer, one free function each (two views in the KV and
// timeline panels) (see STYLE.md, Viewer).
//
// Each draws one part of the Snapshot into the current ImGui window and may
// change the ViewerState (inputs, marking parts dirty, the step cursor).
#pragma once

#include "app/snapshot.h"
#include "app/viewer_state.h"

namespace plab::viewer {

void draw_toy(const Snapshot& snap, ViewerState& state);   // panel_toy.cpp
void draw_mask(const Snapshot& snap, ViewerState& state);  // panel_mask.cpp
// The Mask panel's explorer (panel_mask_explorer.cpp): the mask picker, sliders and
// spec text above the heatmap; the tile map, pairs saved and chunking verdict beside it.
void draw_mask_picker(const MaskSnapshot& mask, ViewerState& state);
void draw_mask_facts(const MaskSnapshot& mask, ViewerState& state, float width);
// With 'paint' on, a click on cell (q, k) of the heatmap: the current mask with that cell
// toggled becomes a custom mask (file:PATH in the system's temp folder).
void paint_cell(const MaskSnapshot& mask, ViewerState& state, int q, int k);
void draw_kv(const Snapshot& snap, ViewerState& state);           // panel_kv.cpp
void draw_kv_pool(const Snapshot& snap, ViewerState& state);      // panel_kv_pool.cpp
void draw_equivalence(const Snapshot& snap, ViewerState& state);  // panel_equivalence.cpp
void draw_timeline(const Snapshot& snap, ViewerState& state);     // panel_timeline.cpp
void draw_timeline_requests(const Snapshot& snap,
                            ViewerState& state);  // panel_timeline_requests.cpp
// A Poisson workload served on the virtual clock: requests x time, step composition,
// KV pool occupancy, TTFT and ITL distributions; policy and rate re-run live.
void draw_serving(const Snapshot& snap, ViewerState& state);  // panel_serving.cpp
// FlashAttention by hand (lesson 17): one head's score grid, its key tiles by class and
// the step in view, beside each query row's m, l and output so far.
void draw_flash(const Snapshot& snap, ViewerState& state);  // panel_flash.cpp
// KV and timeline panels: one sequence, or several requests through one engine.
void draw_serving_toggle(ViewerState& state);  // ui_controls.cpp

// The bar above every panel: model, backend, play/step controls, chunk slider.
void draw_controls(const Snapshot& snap, ViewerState& state);  // ui_controls.cpp
// Keyboard: space play/pause, right/left one chunk (the flash panel: one tile), down/up one
// layer, Home/R reset, 1-7 scene;
// the mask panel: down/up its shown layer, F fits the heatmap, Esc unpins the query row.
void handle_keys(const Snapshot& snap, ViewerState& state);  // ui_playback.cpp
// Advances the cursor while playing.
void tick_playback(const Snapshot& snap, ViewerState& state, double dt);

}  // namespace plab::viewer
