// The viewer's scenes as one table: each row a scene's --scene name, its tab's
// title, the part of the snapshot it draws (alone, and beside several requests on
// one pool), whether that part holds an answer, whether it loads the model, and
// the `plab` command that prints what it shows. --scene, the tab bar, the keys
// 1-7, the refresh of the shown scene and the control bar's command line read it.
// Each row's panel (its draw function) is in window/scene_views.cpp, the one room
// that includes panels/; a static_assert there holds it to this table's order.
//
// Adding a scene: its Scene value and snapshot part (snapshot.h, viewer_state.h's
// Dirty), its refresh and self-check (controller.cpp, checks/), its panel
// (panels/panel_NAME.cpp), its command builder (scene_commands.cpp), its row here
// and in window/scene_views.cpp (viewer/README.md, "Adding a scene").
#pragma once

#include <span>
#include <string>

#include "app/scene_commands.h"
#include "app/snapshot.h"
#include "app/viewer_state.h"

namespace plab::viewer {

struct SceneRow {
    Scene id;
    const char* name;   // --scene NAME, and the self-check lines
    const char* title;  // its tab: "Toy example", "Mask & attention", ...
    bool Dirty::*part;  // the snapshot part it draws
    // With --serving (several requests on one shared pool) the part it draws
    // instead; nullptr: the scene has no such view.
    bool Dirty::*serving_part;
    bool loads_model;                          // false: the toy needs no model file
    bool (*has_result)(const Snapshot& snap);  // its part holds an answer (inputs did not fail)
    SceneCommand command;                      // the `plab` command behind it
};

std::span<const SceneRow> scene_table();
// "toy, mask, kv, ...": every --scene name, in the table's order.
std::string scene_names();
const SceneRow& scene_row(Scene scene);

}  // namespace plab::viewer
