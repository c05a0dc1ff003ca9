// The UI scale: one number by which the panels' own pixel constants grow with the text.
//
// What it teaches: nothing about prefill; it keeps a projector's --scale 2 (or Ctrl
// +/-/0) from leaving hairlines and tiny gaps beside large text. The scale is --scale
// times the monitor's content scale. Fonts are rasterized and ImGui's style is rebuilt
// at it (main.cpp); a panel's own pixel constants (line widths, gaps, minimum cell
// sizes) go through px(), so everything grows together.
//
// Where the number lives: ViewerState::ui_scale, set only by main(), through
// set_ui_scale. px() is called where no ViewerState is at hand (a legend swatch, main's
// splitter), as ImGui's own style is read; so set_ui_scale also hangs a pointer to that
// field on ImGui's context (ui_context.h), and px() reads the field through it. Not the
// context's io.FontGlobalScale: the fonts are already rasterized at the scale, and
// FontGlobalScale would scale them a second time.
#pragma once

#include "app/viewer_state.h"

namespace plab::viewer {

// state.ui_scale = scale, and ImGui's context pointed at that field (main only).
void set_ui_scale(ViewerState& state, float scale);
// ViewerState::ui_scale as set_ui_scale last set it; 1 before it was called.
float ui_scale();
// v pixels at scale 1 -> pixels now.
inline float px(float v) {
    return v * ui_scale();
}

}  // namespace plab::viewer
