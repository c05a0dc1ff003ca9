// The control bar above every panel, and the KV and timeline panels' view toggle
// (declared in panels.h).
//
// What it teaches: the inputs every model scene shares, each with a tooltip saying what
// it changes: the step cursor (Reset, one chunk back or forward, Play, one layer), the
// chunk size (lesson 3: the picture does not change), the backend (lesson 4: reference
// backends sum in one fixed order), the prompt, and "Copy command", the `plab` command
// that reproduces the panel's numbers. The bar flows like text (flow()): at --scale 2 or
// --font-size 24 in a narrow panel it takes two or three lines instead of running off
// the edge.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <string>
#include <vector>

#include "app/scenes.h"
#include "app/view_command.h"
#include "panels/layout_probe.h"
#include "panels/panels.h"
#include "panels/ui_playback.h"
#include "panels/ui_widgets.h"

namespace plab::viewer {
namespace {

// "The command for this view" (view_command.h): a button that copies the `plab` command
// reproducing the panel's numbers; its tooltip shows the command before it is copied.
void draw_command_button(const Snapshot& snap, const ViewerState& state) {
    flow(button_width("Copy command"));
    const bool clicked = ImGui::SmallButton("Copy command");
    probe_control("Copy command");
    if (!clicked && !ImGui::IsItemHovered()) return;
    std::string why_not;
    const std::vector<std::string> words = view_command(state, snap, state.model_dir, why_not);
    const std::string line = words.empty() ? why_not : shell_join(words);
    if (clicked && !words.empty()) ImGui::SetClipboardText(line.c_str());
    item_tooltip(
        "The plab command that reproduces this panel's numbers (model, prompt, "
        "backend, chunk plan, mask, block size); a click copies it for your "
        "students:\n\n" +
        line);
}

std::string step_counter_text(const StepView& v) {
    std::string text = "step " + std::to_string(v.stages_done) + "/" + std::to_string(v.n_stages);
    if (v.layers_done > 0)
        text +=
            " + " + std::to_string(v.layers_done) + "/" + std::to_string(v.n_layers) + " layers";
    return text;
}

// 1a. Reset, one chunk back, Play/Pause, one chunk forward, one layer forward. `v` is the
//     cursor as the frame began (a press acts on it, the bar shows it).
void draw_step_buttons(const Snapshot& snap, ViewerState& state, const StepView& v) {
    const float font = ImGui::GetFontSize();
    const float arrow = ImGui::GetFrameHeight();
    if (ImGui::Button("Reset")) apply_step(snap, state, Step::kReset);
    probe_control("Reset");
    state.reset_button_w = ImGui::GetItemRectSize().x;
    state.reset_button_h = ImGui::GetItemRectSize().y;
    item_tooltip("Back to before the first engine call (key: Home or R).");
    flow(arrow);
    if (ImGui::ArrowButton("##back", ImGuiDir_Left)) apply_step(snap, state, Step::kPrevChunk);
    probe_control("back");
    item_tooltip("One chunk back (key: left arrow).");
    flow(font * 3.5f);
    if (ImGui::Button(state.playing ? "Pause" : "Play ", ImVec2(font * 3.5f, 0))) {
        if (v.complete()) apply_step(snap, state, Step::kReset);
        state.playing = !state.playing;
        state.play_clock = state.seconds_per_step;
    }
    probe_control("Play");
    item_tooltip("Step through the engine calls automatically (key: space).");
    flow(arrow);
    if (ImGui::ArrowButton("##chunk", ImGuiDir_Right)) apply_step(snap, state, Step::kNextChunk);
    probe_control("forward");
    item_tooltip("One chunk (or decode step) forward (key: right arrow).");
    flow(arrow);
    ImGui::BeginDisabled(v.n_layers <= 1);
    if (ImGui::ArrowButton("##layer", ImGuiDir_Down)) apply_step(snap, state, Step::kNextLayer);
    probe_control("one layer");
    item_tooltip(
        "One layer forward inside the current chunk (key: down arrow). The forward "
        "pass appends a chunk's K/V layer by layer.");
    ImGui::EndDisabled();
}

// 1b. "step 3/5 + 1/2 layers", or why there is nothing to step through.
void draw_step_counter(const StepView& v, Scene scene) {
    if (v.n_stages > 0) {
        const std::string text = step_counter_text(v);
        flow(text_width(text));
        text_with_tip(text, scene == Scene::kFlash
                                ? "Tiles taken so far out of all the kernel takes, in its "
                                  "order: one step per (query tile x key tile), skipped ones "
                                  "included. The right arrow takes the next."
                                : "Engine calls finished so far out of all calls in this scene: "
                                  "one per prefill chunk (and one per decode step in the KV "
                                  "panel).");
        probe_step("step counter", v.stages_done, text);
    } else {
        flow(text_width("no steps in this panel"));
        line_text("no steps in this panel", dim_colour());
    }
}

// 2a. The chunk size of the model scenes: a change re-runs their prefill.
void draw_chunk_slider(ViewerState& state) {
    const float font = ImGui::GetFontSize();
    flow(labelled_width(font * 12, "chunk size"), font * 2);
    ImGui::SetNextItemWidth(font * 12);
    int size = state.chunk_size;
    if (ImGui::SliderInt("chunk size", &size, 0, 64, size == 0 ? "full" : "%d tokens")) {
        state.chunk_size = size;
        state.chunks = size == 0 ? "full" : std::to_string(size);
        state.dirty.mask = state.dirty.kv = state.dirty.equivalence = state.dirty.timeline = true;
    }
    probe_control("chunk size");
    item_tooltip(
        "Tokens per prefill chunk (0 = the whole prompt in one chunk). Moving it "
        "re-runs the prefill at once. Current plan: " +
        state.chunks);
}

// 2b. The backend the ops run on.
void draw_backend_combo(const Snapshot& snap, ViewerState& state) {
    const float font = ImGui::GetFontSize();
    flow(labelled_width(font * 10, "backend"), font * 2);
    ImGui::SetNextItemWidth(font * 10);
    // The Serving panel's replay keeps its own backend (its times are the virtual clock's);
    // the FlashAttention panel's whole softmax is always cpu-ref's (as `plab flash`).
    const bool replay = state.scene == Scene::kServing;
    const bool flash = state.scene == Scene::kFlash;
    ImGui::BeginDisabled(replay || flash);
    const std::string shown = replay ? snap.replay.backend : flash ? "cpu-ref" : state.backend;
    if (ImGui::BeginCombo("backend", shown.c_str())) {
        for (const std::string& name : snap.backend_names)
            if (ImGui::Selectable(name.c_str(), name == state.backend)) {
                state.backend = name;
                state.dirty.toy = state.dirty.mask = state.dirty.kv = state.dirty.timeline =
                    state.dirty.serving = true;
            }
        ImGui::EndCombo();
    }
    probe_control("backend");
    item_tooltip(replay  ? "The Serving replay always runs on the fast cpu backend: its times are "
                           "the virtual clock's, so a backend changes no number here, and cpu-ref "
                           "would take seconds per re-run. Every token is still computed."
                 : flash ? "The tiles are walked by hand (run_flash_toy) and each output is "
                           "compared with the whole softmax of cpu-ref, the reference backend "
                           "whose answer is the one to match bit for bit (plab flash does the "
                           "same)."
                         : "Where the ops run. cpu-ref and gpu-ref compute every sum in one fixed "
                           "order (bitwise identical results); cpu and gpu are fast paths.");
    ImGui::EndDisabled();
}

// 3. The prompt box on a line of its own, as wide as the panel less its label; the
//    model's line below it, wrapped (a projector's scale makes it longer than a line).
void draw_prompt_and_model(const Snapshot& snap, ViewerState& state) {
    const float font = ImGui::GetFontSize();
    ImGui::SetNextItemWidth(std::max(font * 8, ImGui::GetContentRegionAvail().x -
                                                   labelled_width(0, "prompt") -
                                                   ImGui::GetStyle().ItemSpacing.x));
    ImGui::InputText("prompt", &state.prompt);
    probe_control("prompt");
    if (ImGui::IsItemDeactivatedAfterEdit())
        state.dirty.mask = state.dirty.kv = state.dirty.equivalence = state.dirty.timeline =
            state.dirty.serving = true;
    item_tooltip(
        "The prompt that is prefilled (press Enter to re-run). It is tokenized "
        "first; the model sees token ids, shown on the axes below.");
    const std::string model =
        "model: " + snap.model_summary + (snap.random_model ? " (random weights)" : "");
    wrapped_with_tip(model,
                     "D model width, L layers, H query heads, Hkv key/value heads, Dh head "
                     "dimension, F MLP width, V vocabulary, T longest sequence.\nLoaded from: " +
                         snap.model_source);
}

}  // namespace

void draw_serving_toggle(ViewerState& state) {
    int view = state.serving_view ? 1 : 0;
    bool changed = ImGui::RadioButton("one sequence", &view, 0);
    probe_control("one sequence");
    item_tooltip("One request through a Session: its prefill chunks and decode steps.");
    flow(checkbox_width("four requests, one engine"));
    changed = ImGui::RadioButton("four requests, one engine", &view, 1) || changed;
    probe_control("four requests, one engine");
    item_tooltip(
        "Four requests through one Engine and one shared pool of KV blocks: shared prefix "
        "blocks, cached free blocks, a preemption and evictions, step by step.");
    if (changed) {
        state.serving_view = view == 1;
        state.stage = kOpeningStage;  // a new scene of steps: open where it teaches most
        state.layer = 0;
        state.playing = false;
    }
}

void draw_controls(const Snapshot& snap, ViewerState& state) {
    const ProbeScope scope("controls");
    const StepView v = step_view(snap, state);
    // The scenes of the model's prompt (the toy and flash scenes have no model, the Serving
    // panel a workload of its own).
    const bool model_scene = scene_row(state.scene).loads_model && state.scene != Scene::kServing;

    // 1. Step controls (only where there is something to step through).
    ImGui::BeginDisabled(v.n_stages == 0);
    draw_step_buttons(snap, state, v);
    draw_step_counter(v, state.scene);
    ImGui::EndDisabled();

    // 2. Engine inputs shared by the model scenes.
    if (model_scene) draw_chunk_slider(state);
    draw_backend_combo(snap, state);
    draw_command_button(snap, state);

    // 3. The prompt and the model.
    if (model_scene) draw_prompt_and_model(snap, state);
}

}  // namespace plab::viewer
