// The table of scenes (see scenes.h).
#include "app/scenes.h"

namespace plab::viewer {

namespace {

// clang-format off
const SceneRow kScenes[] = {
    {Scene::kToy, "toy", "Toy example", &Dirty::toy, nullptr, false,
     [](const Snapshot& s) { return s.toy.ready; }, toy_command},
    {Scene::kMask, "mask", "Mask & attention", &Dirty::mask, nullptr, true,
     [](const Snapshot& s) { return s.mask.ready; }, mask_command},
    {Scene::kKv, "kv", "KV cache growth", &Dirty::kv, &Dirty::serving, true,
     [](const Snapshot& s) { return s.kv.ready; }, kv_command},
    {Scene::kEquivalence, "equivalence", "Equivalence", &Dirty::equivalence, nullptr, true,
     [](const Snapshot& s) { return s.equivalence.ready; }, equivalence_command},
    {Scene::kTimeline, "timeline", "Timeline", &Dirty::timeline, &Dirty::serving, true,
     [](const Snapshot& s) { return s.timeline.ready; }, timeline_command},
    {Scene::kServing, "serving", "Serving", &Dirty::replay, nullptr, true,
     [](const Snapshot& s) { return s.replay.ready; }, serving_command},
    {Scene::kFlash, "flash", "FlashAttention", &Dirty::flash, nullptr, false,
     [](const Snapshot& s) { return s.flash.ready; }, flash_command},
};
// clang-format on
static_assert(std::size(kScenes) == kSceneCount, "one row per Scene value");

}  // namespace

std::span<const SceneRow> scene_table() {
    return kScenes;
}

std::string scene_names() {
    std::string out;
    for (const SceneRow& r : kScenes) out += (out.empty() ? "" : ", ") + std::string(r.name);
    return out;
}

const SceneRow& scene_row(Scene scene) {
    for (const SceneRow& r : kScenes)
        if (r.id == scene) return r;
    return kScenes[0];  // unreachable: every Scene value has a row (test_viewer_checks)
}

const char* scene_name(Scene scene) {
    return scene_row(scene).name;
}

const char* scene_title(Scene scene) {
    return scene_row(scene).title;
}

std::optional<Scene> parse_scene(std::string_view name) {
    for (const SceneRow& r : kScenes)
        if (name == r.name) return r.id;
    return std::nullopt;
}

}  // namespace plab::viewer
