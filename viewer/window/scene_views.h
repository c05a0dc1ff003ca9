// Each scene's panel: the draw column of the scene table (app/scenes.h), kept
// here because only window/ may include panels/.
#pragma once

#include "app/snapshot.h"
#include "app/viewer_state.h"

namespace plab::viewer {

using SceneDraw = void (*)(const Snapshot& snap, ViewerState& state);
// The draw function of `scene`'s panel.
SceneDraw scene_view(Scene scene);

}  // namespace plab::viewer
