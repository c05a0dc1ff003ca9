// One frame of the viewer's UI (see frame_ui.h).
#include "window/frame_ui.h"

#include <imgui.h>
// clang-format off
#include <GL/gl.h>
#include <GLFW/glfw3.h>
// clang-format on

#include <algorithm>
#include <string>

#include "app/options.h"
#include "panels/layout_probe.h"
#include "panels/panels.h"
#include "panels/ui_colours.h"
#include "panels/ui_scale.h"
#include "panels/ui_widgets.h"
#include "window/scene_views.h"

namespace plab::viewer {
namespace {

void draw_panel(const Snapshot& snap, ViewerState& state) {
    scene_view(state.scene)(snap, state);
}

// The control bar and the scene's panel, in the space left.
void draw_panel_side(const Snapshot& snap, ViewerState& state) {
    draw_controls(snap, state);
    ImGui::Separator();
    const ProbeScope scope(std::string(scene_name(state.scene)) + " panel");
    // A panel wider than the window (a projector's scale on a small screen) scrolls
    // sideways instead of being cut off.
    ImGui::BeginChild("panel", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
    draw_panel(snap, state);
    ImGui::EndChild();
}

// Lesson mode: the lesson's text on the left, a splitter to drag, the panel on the right.
void draw_lesson_and_panel(const Snapshot& snap, ViewerState& state, LessonPane& lesson) {
    const float avail = ImGui::GetContentRegionAvail().x;
    const float splitter = px(6.0f);
    const float pane_w = lesson.width_fraction * avail;
    ImGui::BeginChild("lesson", ImVec2(pane_w, 0), true);
    const ImVec2 pa = ImGui::GetWindowPos(), ps = ImGui::GetWindowSize();
    draw_lesson(snap, state, lesson);
    ImGui::EndChild();
    ImGui::SameLine(0, 0);
    // The splitter: an invisible button the width of the gap, dragged sideways.
    ImGui::InvisibleButton("splitter", ImVec2(splitter, ImGui::GetContentRegionAvail().y));
    if (ImGui::IsItemActive())
        lesson.width_fraction =
            std::clamp(lesson.width_fraction + ImGui::GetIO().MouseDelta.x / avail, 0.2f, 0.8f);
    if (ImGui::IsItemHovered() || ImGui::IsItemActive())
        ImGui::SetMouseCursor(ImGuiMouseCursor_ResizeEW);
    ImGui::SameLine(0, 0);
    ImGui::BeginChild("panel_side", ImVec2(0, 0), false);
    const ImVec2 qa = ImGui::GetWindowPos(), qs = ImGui::GetWindowSize();
    draw_panel_side(snap, state);
    ImGui::EndChild();
    LessonLayout& l = lesson.layout;
    l.pane[0] = pa.x, l.pane[1] = pa.y, l.pane[2] = pa.x + ps.x, l.pane[3] = pa.y + ps.y;
    l.panel[0] = qa.x, l.panel[1] = qa.y, l.panel[2] = qa.x + qs.x, l.panel[3] = qa.y + qs.y;
}

// Lesson mode for a lesson no panel teaches (6, 8, 12): its command named on top,
// the text filling the window (no tabs: no panel belongs to it).
void draw_lesson_alone(const Snapshot& snap, ViewerState& state, LessonPane& lesson) {
    wrapped_text("Lesson " + std::to_string(lesson.lesson) + " has no panel: it is taught by `" +
                     lesson.taught_by +
                     "`. Run it in a terminal; the lesson shows what it prints and what to read "
                     "in it.",
                 colour::kClose);
    ImGui::Separator();
    ImGui::BeginChild("lesson", ImVec2(0, 0), true);
    const ImVec2 pa = ImGui::GetWindowPos(), ps = ImGui::GetWindowSize();
    draw_lesson(snap, state, lesson);
    ImGui::EndChild();
    LessonLayout& l = lesson.layout;
    l.pane[0] = pa.x, l.pane[1] = pa.y, l.pane[2] = pa.x + ps.x, l.pane[3] = pa.y + ps.y;
    for (float& v : l.panel) v = 0;
}

}  // namespace

bool draw_frame(const Snapshot& snap, ViewerState& state, bool force_tab, LessonPane* lesson) {
    const ImGuiIO& io = ImGui::GetIO();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(io.DisplaySize);
    ImGui::Begin("Prefill Lab", nullptr,
                 ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                     ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoBringToFrontOnFocus |
                     ImGuiWindowFlags_NoBackground);
    if (lesson != nullptr && !lesson->taught_by.empty()) {
        draw_lesson_alone(snap, state, *lesson);
        ImGui::End();
        return false;
    }
    if (ImGui::BeginTabBar("scenes")) {
        for (int i = 0; i < kSceneCount; ++i) {
            const Scene s = static_cast<Scene>(i);
            const std::string label = std::to_string(i + 1) + " " + scene_title(s);
            const ImGuiTabItemFlags flags =
                force_tab && s == state.scene ? ImGuiTabItemFlags_SetSelected : 0;
            if (ImGui::BeginTabItem(label.c_str(), nullptr, flags)) {
                if (!force_tab) state.scene = s;
                ImGui::EndTabItem();
            }
        }
        ImGui::EndTabBar();
    }
    const Scene tab_scene = state.scene;
    if (lesson != nullptr) {
        draw_lesson_and_panel(snap, state, *lesson);
    } else {
        draw_panel_side(snap, state);
    }
    ImGui::End();
    return state.scene != tab_scene;
}

float scale_keys(float scale, float launch) {
    const ImGuiIO& io = ImGui::GetIO();
    if (!io.KeyCtrl) return scale;
    auto pressed = [](int key) { return ImGui::IsKeyPressed(key, false); };
    // The monitor's content scale may put the launch scale past the range: keep it reachable.
    const float lo = std::min(kScaleMin, launch), hi = std::max(kScaleMax, launch);
    if (pressed(GLFW_KEY_EQUAL) || pressed(GLFW_KEY_KP_ADD)) scale = std::min(hi, scale * 1.25f);
    if (pressed(GLFW_KEY_MINUS) || pressed(GLFW_KEY_KP_SUBTRACT))
        scale = std::max(lo, scale / 1.25f);
    if (pressed(GLFW_KEY_0) || pressed(GLFW_KEY_KP_0)) scale = launch;
    return scale;
}

}  // namespace plab::viewer
