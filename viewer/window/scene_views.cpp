// The draw column of the scene table (see scene_views.h): one row per row of
// app/scenes.cpp, in the same order, which the static_assert below checks when
// this file compiles.
#include "window/scene_views.h"

#include <iterator>

#include "panels/panels.h"

namespace plab::viewer {
namespace {

struct SceneView {
    Scene id;
    SceneDraw draw;
};

constexpr SceneView kSceneViews[] = {
    {Scene::kToy, draw_toy},
    {Scene::kMask, draw_mask},
    {Scene::kKv, draw_kv},
    {Scene::kEquivalence, draw_equivalence},
    {Scene::kTimeline, draw_timeline},
    {Scene::kServing, draw_serving},
    {Scene::kFlash, draw_flash},
};

constexpr bool in_scene_order() {
    for (std::size_t i = 0; i < std::size(kSceneViews); ++i)
        if (kSceneViews[i].id != static_cast<Scene>(i)) return false;
    return std::size(kSceneViews) == kSceneCount;
}
static_assert(in_scene_order(), "one panel per Scene value, in the scene table's order");

}  // namespace

SceneDraw scene_view(Scene scene) {
    return kSceneViews[static_cast<int>(scene)].draw;
}

}  // namespace plab::viewer
