// The step cursor, the keyboard and playback (see ui_playback.h, panels.h).
#include "panels/ui_playback.h"

#include <GLFW/glfw3.h>  // key codes: F, R, 1..7
#include <imgui.h>

#include <algorithm>

#include "app/scenes.h"
#include "app/serving_scenario.h"
#include "panels/panels.h"

namespace plab::viewer {

StepView step_view(const Snapshot& snap, const ViewerState& state) {
    StepView v;
    if (state.serving_view && scene_row(state.scene).serving_part != nullptr) {
        // Several requests: one stage per engine step, no layer granularity.
        v.n_stages = snap.serving.ready ? std::max(0, snap.serving.n_steps()) : 0;
        // The KV panel's pool opens where blocks are shared; the timeline at its end.
        const int opening = !snap.serving.ready         ? 0
                            : state.scene == Scene::kKv ? opening_stage(snap.serving)
                                                        : v.n_stages;
        v.stages_done =
            std::clamp(state.stage == kOpeningStage ? opening : state.stage, 0, v.n_stages);
        v.layers_done = 0;
        return v;
    }
    switch (state.scene) {
        case Scene::kToy:
            v.n_stages =
                snap.toy.ready ? static_cast<int>(snap.toy.chunked.plan.lengths.size()) : 0;
            break;
        case Scene::kMask:
            v.n_stages = snap.mask.ready ? static_cast<int>(snap.mask.plan.lengths.size()) : 0;
            break;
        case Scene::kKv:
            v.n_stages = snap.kv.ready ? static_cast<int>(snap.kv.stages.size()) : 0;
            v.n_layers = std::max(1, snap.kv.n_layers);
            break;
        case Scene::kFlash:  // one stage per (query tile x key tile), in the kernel's order
            v.n_stages = snap.flash.ready ? static_cast<int>(snap.flash.walk.steps.size()) : 0;
            break;
        default:
            break;
    }
    v.stages_done =
        state.stage == kOpeningStage ? v.n_stages : std::clamp(state.stage, 0, v.n_stages);
    v.layers_done = v.complete() ? 0 : std::clamp(state.layer, 0, v.n_layers - 1);
    return v;
}

void apply_step(const Snapshot& snap, ViewerState& state, Step step) {
    const StepView v = step_view(snap, state);
    state.stage = v.stages_done;
    state.layer = v.layers_done;
    switch (step) {
        case Step::kNextChunk:
            state.stage = std::min(v.n_stages, v.stages_done + 1);
            state.layer = 0;
            break;
        case Step::kPrevChunk:
            if (v.layers_done > 0)
                state.layer = 0;
            else
                state.stage = std::max(0, v.stages_done - 1);
            break;
        case Step::kNextLayer:
            if (v.complete()) break;
            if (++state.layer >= v.n_layers) {
                state.stage += 1;
                state.layer = 0;
            }
            break;
        case Step::kPrevLayer:  // (s, 0) -> the previous call with all but its last layer
            if (v.layers_done > 0) {
                state.layer = v.layers_done - 1;
            } else if (v.stages_done > 0) {
                state.stage = v.stages_done - 1;
                state.layer = v.n_layers - 1;
            }
            break;
        case Step::kReset:
            state.stage = 0;
            state.layer = 0;
            state.playing = false;
            break;
        case Step::kEnd:
            state.stage = v.n_stages;
            state.layer = 0;
            break;
    }
}

void tick_playback(const Snapshot& snap, ViewerState& state, double dt) {
    if (!state.playing) return;
    state.play_clock += dt;
    if (state.play_clock < state.seconds_per_step) return;
    state.play_clock = 0;
    const StepView v = step_view(snap, state);
    if (v.complete()) {
        state.playing = false;
        return;
    }
    apply_step(snap, state, v.n_layers > 1 ? Step::kNextLayer : Step::kNextChunk);
}

void handle_keys(const Snapshot& snap, ViewerState& state) {
    const ImGuiIO& io = ImGui::GetIO();
    if (io.WantTextInput) return;
    auto pressed = [](int key) { return ImGui::IsKeyPressed(key, true); };
    if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Space), false)) {
        if (step_view(snap, state).complete()) apply_step(snap, state, Step::kReset);
        state.playing = !state.playing;
        state.play_clock = state.seconds_per_step;  // the first step comes at once
    }
    if (pressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow))) apply_step(snap, state, Step::kNextChunk);
    if (pressed(ImGui::GetKeyIndex(ImGuiKey_LeftArrow))) apply_step(snap, state, Step::kPrevChunk);
    // one layer at a time in every panel where layers matter. The mask panel
    // shows one layer's attention: down/up show the next/previous layer; F fits the
    // heatmap, Esc unpins its query row. The KV panel steps the forward pass.
    if (state.scene == Scene::kMask) {
        const int last = std::max(0, snap.mask.n_layers - 1);
        if (pressed(ImGui::GetKeyIndex(ImGuiKey_DownArrow)))
            state.attn_layer = std::min(last, state.attn_layer + 1);
        if (pressed(ImGui::GetKeyIndex(ImGuiKey_UpArrow)))
            state.attn_layer = std::max(0, state.attn_layer - 1);
        if (ImGui::IsKeyPressed(GLFW_KEY_F, false)) {
            state.heatmap_view = HeatmapView{};  // sized again at zoom 1: the whole prompt
            state.zoom = 1;
            state.zoom_q = state.zoom_k = -1;
        }
        if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape), false))
            state.pinned_query = -1;
    } else {
        if (pressed(ImGui::GetKeyIndex(ImGuiKey_DownArrow)))
            apply_step(snap, state, Step::kNextLayer);
        if (pressed(ImGui::GetKeyIndex(ImGuiKey_UpArrow)))
            apply_step(snap, state, Step::kPrevLayer);
    }
    if (pressed(ImGui::GetKeyIndex(ImGuiKey_Home)) || ImGui::IsKeyPressed(GLFW_KEY_R, false))
        apply_step(snap, state, Step::kReset);
    if (pressed(ImGui::GetKeyIndex(ImGuiKey_End))) apply_step(snap, state, Step::kEnd);
    for (int i = 0; i < kSceneCount; ++i)
        if (ImGui::IsKeyPressed(GLFW_KEY_1 + i, false)) state.scene = static_cast<Scene>(i);
}

}  // namespace plab::viewer
