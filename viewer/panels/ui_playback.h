// The step cursor: how far through the engine calls of a scene the panels are drawn, and
// how keys, buttons and playback move it.
//
// What it teaches: prefill is a sequence of engine calls (chunks, then decode steps),
// each one through every layer; the cursor lets a class stop after any call, or any
// layer of one, and see what it changed. A panel draws "stages_done calls plus
// layers_done layers of the next". In the FlashAttention panel a stage is one tile a
// kernel takes (lesson 17): the cursor walks the kernel's order. Keys and playback are declared in panels.h
// (handle_keys, tick_playback) and defined in ui_playback.cpp.
#pragma once

#include "app/snapshot.h"
#include "app/viewer_state.h"

namespace plab::viewer {

// The step cursor of the current scene: stages done and layers done of the next stage.
struct StepView {
    int n_stages = 0;     // engine calls in this scene (chunks, then decode steps)
    int n_layers = 1;     // layer granularity of a stage (1 = not layered)
    int stages_done = 0;  // 0..n_stages
    int layers_done = 0;  // 0..n_layers-1, of stage `stages_done`
    bool complete() const { return stages_done >= n_stages; }
};
StepView step_view(const Snapshot& snap, const ViewerState& state);
// Applies a step: +1/-1 chunk, +1/-1 layer, reset, to the end.
enum class Step { kNextChunk, kPrevChunk, kNextLayer, kPrevLayer, kReset, kEnd };
void apply_step(const Snapshot& snap, ViewerState& state, Step step);

}  // namespace plab::viewer
