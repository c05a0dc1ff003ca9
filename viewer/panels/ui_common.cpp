// Shared drawing helpers and the control bar (see ui_common.h, panels.h).
// Lesson: all of them — this is the frame every panel sits in.
#include "panels/ui_common.h"

#include <GL/gl.h>
#include <GLFW/glfw3.h>
#include <imgui_internal.h>  // FindRenderedTextEnd: a label's shown part
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <iterator>

#include "app/fonts.h"
#include "app/serving_scenario.h"
#include "app/text_utf8.h"
#include "app/view_command.h"
#include "panels/layout_probe.h"
#include "panels/panels.h"

#ifndef GL_CLAMP_TO_EDGE
#define GL_CLAMP_TO_EDGE 0x812F
#endif

namespace plab::viewer {

namespace {
float g_ui_scale = 1.0f;  // see ui_scale(): ImGui's style is one global too
}  // namespace

float ui_scale() {
    return g_ui_scale;
}
void set_ui_scale(float scale) {
    g_ui_scale = scale;
}

ImU32 request_colour(int id) {
    // Apart from the fixed colours above (chunk orange, decode green, shared magenta).
    static constexpr ImU32 kPalette[] = {IM_COL32(70, 130, 220, 255), IM_COL32(40, 175, 165, 255),
                                         IM_COL32(175, 190, 60, 255), IM_COL32(150, 110, 225, 255),
                                         IM_COL32(190, 120, 70, 255)};
    return kPalette[static_cast<std::size_t>(id) % std::size(kPalette)];
}

namespace {

// `text` cut at `lines` (wrap_lines), the lines joined by newlines: as drawn.
std::string joined(const std::string& text,
                   const std::vector<std::pair<std::size_t, std::size_t>>& lines) {
    std::string shown;
    for (std::size_t i = 0; i < lines.size(); ++i)
        shown.append(i ? "\n" : "").append(text, lines[i].first, lines[i].second - lines[i].first);
    return shown;
}

}  // namespace

void tooltip(const std::string& text) {
    ImGui::BeginTooltip();
    // ImGui keeps a tooltip inside the display by moving it, which cannot help one
    // wider than the display: wrap it narrower than that, whatever the scale.
    const ImGuiStyle& st = ImGui::GetStyle();
    const float margin = 2 * (st.DisplaySafeAreaPadding.x + st.WindowPadding.x) + 2;
    const float width =
        std::max(ImGui::GetFontSize() * 8,
                 std::min(ImGui::GetFontSize() * 36.0f, ImGui::GetIO().DisplaySize.x - margin));
    // Wrapped here, by the rules wrapped_text keeps (break_allowed), not by ImGui.
    const auto lines = wrap_lines(text, width);
    const std::string shown = joined(text, lines);
    ImGui::TextUnformatted(shown.c_str(), shown.c_str() + shown.size());
    const ProbeScope scope("tooltip");
    probe_text(text, width, lines);
    ImGui::EndTooltip();
}

void tooltipf(const char* fmt, ...) {
    char buf[1024];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, args);
    va_end(args);
    tooltip(buf);
}

void help_marker(const char* text) {
    // Beside a one-line title when it fits; under a wrapped one.
    if (ImGui::GetItemRectSize().y <= ImGui::GetFrameHeightWithSpacing()) flow(text_width("(?)"));
    line_text("(?)", dim_colour());
    if (ImGui::IsItemHovered()) tooltip(text);
}

void item_tooltip(const std::string& text) {
    // Disabled items explain themselves too (why they cannot be changed).
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) tooltip(text);
}

void text_with_tip(const std::string& text, const std::string& tip) {
    line_text(text);
    item_tooltip(tip);
}

void wrapped_with_tip(const std::string& text, const std::string& tip, ImU32 colour, float width) {
    wrapped_text(text, colour, width);
    item_tooltip(tip);
}

ImU32 dim_colour() {
    return ImGui::GetColorU32(ImGuiCol_TextDisabled);
}

void line_text(const std::string& text, ImU32 colour) {
    if (colour != 0) ImGui::PushStyleColor(ImGuiCol_Text, colour);
    ImGui::TextUnformatted(text.c_str(), text.c_str() + text.size());
    if (colour != 0) ImGui::PopStyleColor();
    probe_text(text);
}

void wrapped_text(const std::string& text, ImU32 colour, float width) {
    // Wrapped here, not by ImGui (which also breaks after '.', ',' and '"': "2./4e-7"), at
    // the content region's right edge (a table cell's in a table), drawn as one item.
    const float avail = ImGui::GetContentRegionAvail().x;
    const float wrap = std::max(1.0f, width > 0 ? std::min(width, avail) : avail);
    const auto lines = wrap_lines(text, wrap);
    const std::string shown = joined(text, lines);
    if (colour != 0) ImGui::PushStyleColor(ImGuiCol_Text, colour);
    ImGui::TextUnformatted(shown.c_str(), shown.c_str() + shown.size());
    if (colour != 0) ImGui::PopStyleColor();
    probe_text(text, wrap, lines);
}

void hint_text(const std::string& text) {
    wrapped_text(text, dim_colour());
}

float text_width(const std::string& text) {
    return ImGui::CalcTextSize(text.c_str(), text.c_str() + text.size()).x;
}

float labelled_width(float frame_w, const char* label) {
    const char* end = ImGui::FindRenderedTextEnd(label);
    const float text = ImGui::CalcTextSize(label, end).x;
    return frame_w + (text > 0 ? ImGui::GetStyle().ItemInnerSpacing.x + text : 0);
}

float button_width(const char* label) {
    return ImGui::CalcTextSize(label, ImGui::FindRenderedTextEnd(label)).x +
           2 * ImGui::GetStyle().FramePadding.x;
}

float checkbox_width(const char* label) {
    return labelled_width(ImGui::GetFrameHeight(), label);
}

bool flow(float w, float spacing) {
    const float sp = spacing >= 0 ? spacing : ImGui::GetStyle().ItemSpacing.x;
    const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    if (ImGui::GetItemRectMax().x + sp + w > right) return false;
    ImGui::SameLine(0, sp);
    return true;
}

void legend_entry(ImU32 fill, ImU32 border, const std::string& text, const std::string& tip,
                  bool hatch, ImU32 under) {
    const float font = ImGui::GetFontSize();
    flow(font + ImGui::GetStyle().ItemInnerSpacing.x + text_width(text), font * 1.2f);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const ImVec2 q(p.x + font, p.y + font);
    if (under != 0) dl->AddRectFilled(p, q, under);
    if (fill != 0) dl->AddRectFilled(p, q, fill);
    if (hatch) draw_hatch(dl, p, q, colour::kHatch, px(5));
    if (border != 0) dl->AddRect(p, q, border, 0, 0, px(2.5f));
    ImGui::Dummy(ImVec2(font, font));
    ImGui::SameLine(0, ImGui::GetStyle().ItemInnerSpacing.x);
    text_with_tip(text, tip);
    probe_legend(fill != 0 ? fill : border, text);
}

void badge(const char* label, ImU32 colour, const std::string& tip) {
    ImGui::PushStyleColor(ImGuiCol_Button, colour);
    ImGui::PushStyleColor(ImGuiCol_ButtonHovered, colour);
    ImGui::PushStyleColor(ImGuiCol_ButtonActive, colour);
    ImGui::SmallButton(label);
    probe_control(label);
    ImGui::PopStyleColor(3);
    item_tooltip(tip);
}

void draw_hatch(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 colour, float spacing) {
    const float w = b.x - a.x, h = b.y - a.y;
    // Lines x + y = d (bottom-left to top-right), clipped to the rectangle.
    for (float d = spacing; d < w + h; d += spacing) {
        const ImVec2 p0(a.x + std::max(0.0f, d - h), a.y + std::min(d, h));
        const ImVec2 p1(a.x + std::min(d, w), a.y + std::max(0.0f, d - w));
        dl->AddLine(p0, p1, colour);
    }
}

ImU32 probability_colour(float p, bool sqrt_scale) {
    // Five stops of the viridis colour map (van der Walt & Smith, matplotlib).
    static constexpr float kStops[5][3] = {
        {68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
    float t = std::clamp(p, 0.0f, 1.0f);
    if (sqrt_scale) t = std::sqrt(t);
    const float x = t * 4.0f;
    const int i = std::min(3, static_cast<int>(x));
    const float f = x - static_cast<float>(i);
    auto mix = [&](int c) { return kStops[i][c] + (kStops[i + 1][c] - kStops[i][c]) * f; };
    return IM_COL32(static_cast<int>(mix(0)), static_cast<int>(mix(1)), static_cast<int>(mix(2)),
                    255);
}

std::string token_label(const std::string& text) {
    return token_display(text, current_font_has_glyph);
}

std::string format_us(double us) {
    char buf[32];
    if (us < 1000)
        std::snprintf(buf, sizeof buf, "%.1f us", us);
    else if (us < 1e6)
        std::snprintf(buf, sizeof buf, "%.2f ms", us / 1000);
    else
        std::snprintf(buf, sizeof buf, "%.2f s", us / 1e6);
    return buf;
}

std::string format_bytes(double bytes) {
    char buf[32];
    if (bytes < 1024)
        std::snprintf(buf, sizeof buf, "%.0f B", bytes);
    else if (bytes < 1024 * 1024)
        std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024);
    else
        std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / (1024 * 1024));
    return buf;
}

// ---- the step cursor ----------------------------------------------------------------
StepView step_view(const Snapshot& snap, const ViewerState& state) {
    StepView v;
    if (state.serving_view && (state.scene == Scene::kKv || state.scene == Scene::kTimeline)) {
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

// ---- the control bar -------------------------------------------------------------------
// The control bar flows like text (flow()): at --scale 2 or --font-size 24 in a narrow
// panel it takes two or three lines instead of running off the edge.

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

void draw_controls(const Snapshot& snap, ViewerState& state) {
    const ProbeScope scope("controls");
    const StepView v = step_view(snap, state);
    const bool model_scene = state.scene != Scene::kToy && state.scene != Scene::kServing;
    const float font = ImGui::GetFontSize();
    const float arrow = ImGui::GetFrameHeight();

    // 1. Step controls (only where there is something to step through).
    ImGui::BeginDisabled(v.n_stages == 0);
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
    if (v.n_stages > 0) {
        const std::string text = step_counter_text(v);
        flow(text_width(text));
        text_with_tip(text,
                      "Engine calls finished so far out of all calls in this scene: one per "
                      "prefill chunk (and one per decode step in the KV panel).");
        probe_step("step counter", v.stages_done, text);
    } else {
        flow(text_width("no steps in this panel"));
        line_text("no steps in this panel", dim_colour());
    }
    ImGui::EndDisabled();

    // 2. Engine inputs shared by the model scenes.
    if (model_scene) {
        flow(labelled_width(font * 12, "chunk size"), font * 2);
        ImGui::SetNextItemWidth(font * 12);
        int size = state.chunk_size;
        if (ImGui::SliderInt("chunk size", &size, 0, 64, size == 0 ? "full" : "%d tokens")) {
            state.chunk_size = size;
            state.chunks = size == 0 ? "full" : std::to_string(size);
            state.dirty.mask = state.dirty.kv = state.dirty.equivalence = state.dirty.timeline =
                true;
        }
        probe_control("chunk size");
        item_tooltip(
            "Tokens per prefill chunk (0 = the whole prompt in one chunk). Moving it "
            "re-runs the prefill at once. Current plan: " +
            state.chunks);
    }
    flow(labelled_width(font * 10, "backend"), font * 2);
    ImGui::SetNextItemWidth(font * 10);
    // The Serving panel's replay keeps its own backend (its times are the virtual clock's).
    const bool replay = state.scene == Scene::kServing;
    ImGui::BeginDisabled(replay);
    const std::string& shown = replay ? snap.replay.backend : state.backend;
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
    item_tooltip(replay ? "The Serving replay always runs on the fast cpu backend: its times are "
                          "the virtual clock's, so a backend changes no number here, and cpu-ref "
                          "would take seconds per re-run. Every token is still computed."
                        : "Where the ops run. cpu-ref and gpu-ref compute every sum in one fixed "
                          "order (bitwise identical results); cpu and gpu are fast paths.");
    ImGui::EndDisabled();
    draw_command_button(snap, state);

    if (model_scene) {
        // The prompt box on a line of its own, as wide as the panel less its label; the
        // model's line below it, wrapped (a projector's scale makes it longer than a line).
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
        wrapped_with_tip(
            model,
            "D model width, L layers, H query heads, Hkv key/value heads, Dh head "
            "dimension, F MLP width, V vocabulary, T longest sequence.\nLoaded from: " +
                snap.model_source);
    }
}

// ---- textures ------------------------------------------------------------------------------
void upload_texture(HeatmapTexture& tex, const std::vector<unsigned char>& rgba, int width,
                    int height) {
    if (tex.id == 0) {
        GLuint id = 0;
        glGenTextures(1, &id);
        tex.id = id;
    }
    glBindTexture(GL_TEXTURE_2D, tex.id);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA, width, height, 0, GL_RGBA, GL_UNSIGNED_BYTE,
                 rgba.data());
    tex.width = width;
    tex.height = height;
}

void release_texture(HeatmapTexture& tex) {
    if (tex.id != 0) {
        GLuint id = tex.id;
        glDeleteTextures(1, &id);
    }
    tex = HeatmapTexture{};
}

void draw_time_axis(ImDrawList* dl, float x0, float width, float axis_y, double t_begin,
                    double span) {
    const float font = ImGui::GetFontSize();
    // As many ticks as leave a gap between labels (at most six). The first and last labels
    // sit inside the axis, beside their ticks, so neighbours of the widest (the span's own)
    // need one and a half of its width apart, and a font of room.
    const float widest = text_width(format_us(span)) * 1.5f + font;
    const int intervals = std::clamp(static_cast<int>(width / std::max(1.0f, widest)), 1, 5);
    ChartProbe axis("time axis", ImVec2(x0, axis_y), ImVec2(x0 + width, axis_y + font * 1.6f),
                    false);
    for (int i = 0; i <= intervals; ++i) {
        const double us = t_begin + span * i / intervals;
        const float x = x0 + static_cast<float>((us - t_begin) / span) * width;
        dl->AddLine(ImVec2(x, axis_y + font * 1.2f), ImVec2(x, axis_y + font * 1.6f),
                    IM_COL32(180, 180, 180, 255));
        const std::string txt = format_us(us - t_begin);
        const float w = text_width(txt);
        // The first label starts at its tick, the last ends at its tick: inside the axis.
        const float tx = i == 0 ? x : i == intervals ? x - w : x - w * 0.5f;
        axis.label(dl, ImVec2(tx, axis_y), IM_COL32(180, 180, 180, 255), txt);
    }
}

}  // namespace plab::viewer
