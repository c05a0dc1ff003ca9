// The table of scenes (viewer/app/scenes.h): one row per Scene value, read by
// --scene, the tab bar, the refresh of the shown scene and the command line the
// control bar shows. These cases hold the table and its users to each other;
// the draw column (viewer/window/scene_views.cpp) is held to it by a
// static_assert when plab-viewer compiles.
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "app/options.h"
#include "app/scenes.h"
#include "app/view_command.h"
#include "core/error.h"

namespace plab::viewer {
namespace {

TEST_CASE("the scene table: one row per Scene value and names that parse back", "[viewer]") {
    REQUIRE(scene_table().size() == static_cast<std::size_t>(kSceneCount));
    std::set<std::string> names, titles;
    for (int i = 0; i < kSceneCount; ++i) {
        const Scene s = static_cast<Scene>(i);
        const SceneRow& row = scene_row(s);
        INFO(row.name);
        CHECK(row.id == s);
        CHECK(scene_table()[static_cast<std::size_t>(i)].id == s);  // rows in Scene order
        CHECK(names.insert(row.name).second);
        CHECK(titles.insert(row.title).second);
        CHECK(parse_scene(row.name) == s);
        CHECK(row.part != nullptr);
        CHECK(row.command != nullptr);
        CHECK(row.has_result != nullptr);
    }
    CHECK_FALSE(parse_scene("scenes").has_value());
}

TEST_CASE("the scene table: each row's part is its own flag, and starts dirty", "[viewer]") {
    // Two scenes may share the serving part (the shared pool), but a scene's own
    // part is its alone: clearing it leaves every other scene's part dirty.
    for (const SceneRow& row : scene_table()) {
        INFO(row.name);
        Dirty d;
        CHECK(d.*row.part);  // the first frame asks the engine
        d.*row.part = false;
        for (const SceneRow& other : scene_table())
            if (other.id != row.id) CHECK(d.*other.part);
    }
}

TEST_CASE("the scene table: a scene without an answer has no command, and says which", "[viewer]") {
    const Snapshot empty;  // nothing ready: every part's inputs "failed"
    for (const SceneRow& row : scene_table()) {
        INFO(row.name);
        CHECK_FALSE(row.has_result(empty));
        ViewerState state;
        state.scene = row.id;
        std::string why_not;
        const std::vector<std::string> words = view_command(state, empty, "assets/model", why_not);
        CHECK(words.empty());
        CHECK(why_not.find(std::string("the ") + row.name + " panel has no result") !=
              std::string::npos);
    }
}

TEST_CASE("the scene table's order is the keys' order: 1 toy to 7 flash", "[viewer]") {
    // Key i+1 and tab i+1 open row i (ui_playback.cpp, frame_ui.cpp read the table): the
    // lessons and the READMEs name the keys by this order.
    CHECK(scene_names() == "toy, mask, kv, equivalence, timeline, serving, flash");
    CHECK(scene_row(Scene::kFlash).name == std::string("flash"));
    CHECK_FALSE(scene_row(Scene::kFlash).loads_model);  // the toy's walk needs no model
    CHECK(scene_row(Scene::kFlash).serving_part == nullptr);
}

TEST_CASE("an unknown --scene is refused with the table's names", "[viewer]") {
    Options o;
    o.scene = "tiles";
    try {
        state_from_options(o);
        FAIL("an unknown scene was accepted");
    } catch (const Error& e) {
        CHECK(std::string(e.what()) == "unknown scene 'tiles' (valid: " + scene_names() + ")");
    }
}

}  // namespace
}  // namespace plab::viewer
