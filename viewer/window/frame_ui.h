// One frame of the viewer's UI: the scene tabs, the control bar, the shown scene's
// panel and, in lesson mode, the lesson's text beside it; and the keys that scale it.
//
// What it teaches: nothing about prefill; it is the window's layout, one full-window
// ImGui panel drawn anew every frame (immediate mode, as imgui's examples do). The
// program around it (options, engine, window, frame loop, report) is main.cpp.
#pragma once

#include "app/lesson_pane.h"
#include "app/snapshot.h"
#include "app/viewer_state.h"

namespace plab::viewer {

// One frame of UI: a full-window tab bar, the control bar, the scene's panel (with
// the lesson's text beside it in lesson mode). Returns whether something below the
// tab bar (a lesson's Try button) switched the scene: the next frame selects its tab.
// `lesson`: null outside lesson mode. Called between ImGui::NewFrame and ImGui::Render.
bool draw_frame(const Snapshot& snap, ViewerState& state, bool force_tab, LessonPane* lesson);

// text and scale
// Ctrl + / Ctrl - (also on the keypad) scale the UI by 1.25 within kScaleMin..kScaleMax,
// Ctrl 0 goes back to the launch scale. Returns the scale asked for.
float scale_keys(float scale, float launch);

}  // namespace plab::viewer
