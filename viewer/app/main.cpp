// plab-viewer: watch prefill happen — causal masks, chunk boundaries, the KV
// cache filling up, full == chunked, and where the time to first token goes.
//
// What it teaches: lessons 1-5 in five panels (toy attention, the KV cache,
// chunked prefill under the causal mask, bitwise equivalence, TTFT is not prefill), and the
// serving lessons in a sixth (a workload replayed by the scheduler, on the virtual clock),
// driven by the engine in src/ and never by math of its own. Lesson mode (--lesson N) puts
// the lesson's text beside its panel, its Try steps as buttons (lesson_pane.h). Left out
// on purpose: docking, saved window layouts, multi-viewport — one window that projects well.
//
// The application skeleton follows Dear ImGui's examples/example_glfw_opengl3
// (v1.86): GLFW window + OpenGL 3.3 core context, ImGui GLFW and OpenGL3
// backends, one NewFrame/Render per loop. Headless: --screenshot renders into
// an offscreen framebuffer and writes a PNG (run under Xvfb without a desktop).
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>
// clang-format off
#include <GL/gl.h>
#include <GLFW/glfw3.h>
// clang-format on
#ifdef __EMSCRIPTEN__
// The web build (viewer/web): the browser's next animation frame (plab_web.js).
extern "C" void plab_web_next_frame();
#endif

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "app/capture.h"
#include "app/controller.h"
#include "app/fonts.h"
#include "app/lesson_pane.h"
#include "app/options.h"
#include "app/run_report.h"
#include "app/serving_scenario.h"
#include "core/error.h"
#include "model/model_io.h"
#include "panels/layout_probe.h"
#include "panels/panels.h"
#include "panels/ui_common.h"

namespace plab::viewer {
namespace {

std::string glfw_error_text;  // GLFW reports errors through a C callback

void glfw_error_callback(int code, const char* description) {
    glfw_error_text = std::string(description) + " (GLFW error " + std::to_string(code) + ")";
}

// CPU time of the whole process (every thread), in milliseconds.
double process_cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// A --press key with Ctrl held (ctrl+plus, ctrl+minus, ctrl+0: the UI scale).
constexpr int kCtrlKey = 1 << 16;

// Key names for --press -> GLFW key codes (the ImGui 1.86 GLFW backend indexes
// io.KeysDown by them).
std::vector<int> parse_keys(const std::string& text) {
    static const std::pair<const char*, int> kNames[] = {{"ctrl+plus", kCtrlKey | GLFW_KEY_EQUAL},
                                                         {"ctrl+minus", kCtrlKey | GLFW_KEY_MINUS},
                                                         {"ctrl+0", kCtrlKey | GLFW_KEY_0},
                                                         {"space", GLFW_KEY_SPACE},
                                                         {"right", GLFW_KEY_RIGHT},
                                                         {"left", GLFW_KEY_LEFT},
                                                         {"down", GLFW_KEY_DOWN},
                                                         {"home", GLFW_KEY_HOME},
                                                         {"end", GLFW_KEY_END},
                                                         {"r", GLFW_KEY_R},
                                                         {"1", GLFW_KEY_1},
                                                         {"2", GLFW_KEY_2},
                                                         {"3", GLFW_KEY_3},
                                                         {"4", GLFW_KEY_4},
                                                         {"5", GLFW_KEY_5},
                                                         {"6", GLFW_KEY_6},
                                                         {"up", GLFW_KEY_UP},
                                                         {"f", GLFW_KEY_F}};
    std::vector<int> keys;
    std::stringstream ss(text);
    std::string name;
    while (std::getline(ss, name, ',')) {
        int code = -1;
        for (const auto& [n, c] : kNames)
            if (name == n) code = c;
        PLAB_CHECK(code >= 0, "--press: unknown key '" << name
                                                       << "' (valid: space, right, left, down, "
                                                          "up, home, end, r, f, 1-6, ctrl+plus, "
                                                          "ctrl+minus, ctrl+0)");
        keys.push_back(code);
    }
    return keys;
}

// The part of the Snapshot a scene draws: the shared-pool scenario when the
// KV or timeline panel shows several requests.
bool& dirty_flag(Dirty& d, Scene s, bool serving_view) {
    if (serving_view && (s == Scene::kKv || s == Scene::kTimeline)) return d.serving;
    switch (s) {
        case Scene::kToy:
            return d.toy;
        case Scene::kMask:
            return d.mask;
        case Scene::kKv:
            return d.kv;
        case Scene::kEquivalence:
            return d.equivalence;
        case Scene::kTimeline:
            return d.timeline;
        case Scene::kServing:
            return d.replay;
    }
    return d.toy;
}

// Asks the engine again for the shown scene, if its inputs changed.
void refresh_dirty_scene(Controller& ctrl, ViewerState& state, Snapshot& snap) {
    bool& flag = dirty_flag(state.dirty, state.scene, state.serving_view);
    if (!flag) return;
    // The equivalence matrix can take seconds (emulated GPU backends): show one
    // frame saying so before the UI waits for it.
    if (state.scene == Scene::kEquivalence && !state.slow_refresh_announced) {
        state.slow_refresh_announced = true;
        return;
    }
    state.slow_refresh_announced = false;
    Dirty only{false, false, false, false, false, false, false};
    dirty_flag(only, state.scene, state.serving_view) = true;
    flag = false;
    ctrl.refresh(state, only, snap, state.print_checks, state.checks_failed);
}

// The shown scene, then the mask panel's shown layer, pinned row and
// second run, asked again when they change, on top of the scene just refreshed.
void refresh_scene(Controller& ctrl, ViewerState& state, Snapshot& snap) {
    refresh_dirty_scene(ctrl, state, snap);
    if (state.scene == Scene::kMask && !state.dirty.mask)
        ctrl.refresh_mask_view(state, snap.mask, state.print_checks, state.checks_failed);
}

void draw_panel(const Snapshot& snap, ViewerState& state) {
    switch (state.scene) {
        case Scene::kToy:
            draw_toy(snap, state);
            break;
        case Scene::kMask:
            draw_mask(snap, state);
            break;
        case Scene::kKv:
            draw_kv(snap, state);
            break;
        case Scene::kEquivalence:
            draw_equivalence(snap, state);
            break;
        case Scene::kTimeline:
            draw_timeline(snap, state);
            break;
        case Scene::kServing:
            draw_serving(snap, state);
            break;
    }
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

// One frame of UI: a full-window tab bar, the control bar, the scene's panel (with
// the lesson's text beside it in lesson mode). Returns whether something below the
// tab bar (a lesson's Try button) switched the scene: the next frame selects its tab.
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

// text and scale -------------------------------------------------------------
// Ctrl + / Ctrl - (also on the keypad) scale the UI by 1.25 within kScaleMin..kScaleMax,
// Ctrl 0 goes back to the launch scale. Returns the scale asked for.
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

// The texts on screen that are not in the fixed glyph ranges' scripts for sure: the
// prompt and what the model wrote (a new character makes the atlas build again).
std::string screen_text(const Snapshot& snap, const ViewerState& state) {
    std::string t = state.prompt + snap.mask.first_token + snap.timeline.output_text;
    for (const ServingRequestInfo& r : snap.serving.requests) t += r.output_text;
    return t;
}

int run(const Options& given) {
    // 1. Inputs, checked before any window opens.
    const Options opt = with_lesson(given);
    PLAB_CHECK(opt.width >= 320 && opt.height >= 240 && opt.width <= 8192 && opt.height <= 8192,
               "window size " << opt.width << "x" << opt.height
                              << " is out of range (320x240 .. 8192x8192)");
    PLAB_CHECK(opt.frames >= 0, "--frames must be >= 0");
    const bool headless = !opt.screenshot.empty();
    const float asked_scale = parse_scale(opt.scale);
    const std::string font_path = opt.font.empty() ? default_font_path() : opt.font;
    check_font_file(font_path, !opt.font.empty());
    const std::string fallback_path = opt.fallback_font.empty()     ? installed_fallback_font()
                                      : opt.fallback_font == "none" ? ""
                                                                    : opt.fallback_font;
    if (!opt.fallback_font.empty() && !fallback_path.empty()) check_font_file(fallback_path, true);
    PLAB_CHECK(opt.font_size >= 6 && opt.font_size <= 72,
               "--font-size " << opt.font_size << " must be between 6 and 72 pixels");

    ViewerState state = state_from_options(opt);
    state.print_checks = headless || opt.frames > 0;
#ifdef __EMSCRIPTEN__
    // A page has no terminal to rerun headless from: its self-check lines always go to
    // the page's log and window.plab (viewer/web/shell.html).
    state.print_checks = true;
#endif
    // Lesson mode: the lesson's text is read and parsed before any window opens.
    std::unique_ptr<LessonPane> lesson;
    if (opt.lesson > 0) lesson = std::make_unique<LessonPane>(make_lesson_pane(given));
    PLAB_CHECK(opt.click_try == 0 || (lesson && headless),
               "--click-try needs --lesson N and --screenshot (it clicks a Try button headless)");

    Controller ctrl(opt.model);
    state.model_dir = opt.model.empty() ? default_model_path() : opt.model;
    Snapshot snap;
    ctrl.fill_model_info(snap);
    PLAB_CHECK(std::find(snap.backend_names.begin(), snap.backend_names.end(), state.backend) !=
                   snap.backend_names.end(),
               "unknown backend '" << state.backend << "'");
    const auto hint = ctrl.head_hint();
    state.attn_layer = opt.layer >= 0 ? opt.layer : hint ? hint->layer : snap.n_layers - 1;
    state.attn_head = opt.head >= 0 ? opt.head : hint ? hint->head : 0;
    if (hint) snap.head_hint = hint->why;
    PLAB_CHECK(state.attn_layer < snap.n_layers && state.attn_head < snap.n_heads,
               "--layer/--head out of range (the model has " << snap.n_layers << " layers and "
                                                             << snap.n_heads << " heads)");

    // The shown scene is computed now, so bad input fails before a window opens.
    state.slow_refresh_announced = true;
    refresh_scene(ctrl, state, snap);
    for (const std::string* err :
         {&snap.toy.error, &snap.mask.error, &snap.mask.view.error, &snap.kv.error,
          &snap.serving.error, &snap.equivalence.error, &snap.timeline.error, &snap.replay.error})
        PLAB_CHECK(!headless || err->empty(), *err);

    // 2. Window and GL context (GL 3.3 core, as in imgui's example_glfw_opengl3).
    glfwSetErrorCallback(glfw_error_callback);
    PLAB_CHECK(glfwInit(),
               "cannot open a window: " << glfw_error_text
                                        << ". Without a display, render headless: xvfb-run -a "
                                           "plab-viewer --screenshot out.png --scene toy");
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GL_TRUE);
    glfwWindowHint(GLFW_VISIBLE, headless ? GLFW_FALSE : GLFW_TRUE);
    GLFWwindow* window = glfwCreateWindow(opt.width, opt.height, "Prefill Lab", nullptr, nullptr);
    if (window == nullptr) {
        glfwTerminate();
        PLAB_CHECK(false, "cannot create an OpenGL 3.3 window: " << glfw_error_text);
    }
    glfwMakeContextCurrent(window);
    glfwSwapInterval(opt.frames > 0 || headless ? 0 : 1);

    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;  // same layout every run: screenshots are reproducible
    ImGui::StyleColorsDark();
    ImGui::GetStyle().FrameRounding = 3.0f;
    // A slider prints its value across its middle: a thin, half-transparent grab
    // leaves the digits under it readable wherever the value puts it.
    ImGui::GetStyle().GrabMinSize = 4.0f;
    for (ImGuiCol c : {ImGuiCol_SliderGrab, ImGuiCol_SliderGrabActive})
        ImGui::GetStyle().Colors[c].w = 0.55f;
    const ImGuiStyle base_style = ImGui::GetStyle();  // the scale-1 style, scaled from here
    // The monitor's content scale (2 on a high-DPI screen; 1 under Xvfb) times --scale.
    float content_x = 1, content_y = 1;
#ifndef __EMSCRIPTEN__  // emscripten's GLFW has no content scale: the page is at 1
    glfwGetWindowContentScale(window, &content_x, &content_y);
#endif
    const float content_scale = std::max(1.0f, std::max(content_x, content_y));
    const float launch_scale = asked_scale * content_scale;
    // Every character of the lesson (—, …, ≤, ², ·), the prompt and the model's output gets
    // a glyph; the lesson adds a bold font for headings and a monospace one for code.
    FontSet fonts(font_path, fallback_path, opt.font_size, lesson != nullptr);
    if (lesson) fonts.add_text(kCodeWrapMarker);
    if (lesson)
        for (const LessonBlock& b : lesson->text.blocks) {
            fonts.add_text(b.text);
            for (const auto& row : b.cells)
                for (const std::string& cell : row) fonts.add_text(cell);
        }
    fonts.add_text(screen_text(snap, state));
    // Fonts rasterized at the new size, the style's sizes scaled, the panels' own pixel
    // constants through ui_scale(): all at once, so nothing is left at the old size.
    float scale = 0;
    auto apply_scale = [&](float s, bool upload) {
        fonts.rebuild(*io.Fonts, s);
        ImGui::GetStyle() = base_style;
        ImGui::GetStyle().ScaleAllSizes(s);
        set_ui_scale(s);
        if (lesson) {
            lesson->mono_font = fonts.mono_font();
            lesson->heading_font = fonts.heading_font();
            lesson->heights_width = -1;  // text heights were measured at the old size
        }
        if (upload) {
            ImGui_ImplOpenGL3_DestroyFontsTexture();
            ImGui_ImplOpenGL3_CreateFontsTexture();
        }
        scale = s;
    };
    // Headless with a scale other than 1: the first frames are drawn at 1 and measured,
    // then the scale changes as Ctrl +/- changes it, and the self-check compares.
    // (Not with scripted keys: those test the Ctrl keys themselves.)
    const bool measure_scale = headless && launch_scale != 1.0f && opt.keys.empty();
    apply_scale(measure_scale ? 1.0f : launch_scale, false);
    float wanted_scale = launch_scale;
    ScaleProbe at_one;
    std::string prompt_ids_key = "\x01";  // the prompt the ids were made from (none yet)
    ImGui_ImplGlfw_InitForOpenGL(window, true);
    // headless runs record what each frame lays out (panels/layout_probe.h);
    // the last frame's record is checked as a reader would read it (check_layout).
    LayoutRecord layout;
    if (state.print_checks) set_layout_record(&layout);
    if (lesson) lesson->draw_all = headless;  // every block laid out, so every block is checked
#ifdef __EMSCRIPTEN__
    ImGui_ImplOpenGL3_Init("#version 300 es");  // WebGL2 is OpenGL ES 3.0
#else
    ImGui_ImplOpenGL3_Init("#version 330 core");
#endif

    const std::vector<int> keys = opt.keys.empty() ? std::vector<int>{} : parse_keys(opt.keys);
    std::optional<ImVec2> hover;
    if (!opt.hover.empty()) {
        const std::vector<float> xy = parse_floats(opt.hover, "--hover");
        PLAB_CHECK(xy.size() == 2, "--hover takes x,y in pixels, e.g. 300,400");
        hover = ImVec2(xy[0], xy[1]);
    }
    std::unique_ptr<OffscreenTarget> target;
    if (headless) target = std::make_unique<OffscreenTarget>(opt.width, opt.height);

    // 3. The frame loop. Headless runs a few frames (ImGui sizes windows over
    //    two frames) and keeps the last one.
    // Scripted keys: key i goes down on frame 2 + 2i and up on the next frame.
    const int key_frames = keys.empty() ? 0 : 4 + 2 * static_cast<int>(keys.size());
    const int n_frames =
        headless ? std::max({opt.frames, measure_scale ? 8 : 4, key_frames}) : opt.frames;
    PLAB_CHECK(!opt.report_frame_time || opt.frames >= 3,
               "--report-frame-time needs --frames 3 or more");
    std::vector<double> frame_ms, frame_cpu_ms;
    Scene forced = state.scene;
    bool force_tab = true;
    // Scripted click (--click-try K): once the pane reports Try button K fully in view,
    // the mouse goes down on it for one frame and up on the next (ImGui presses a button
    // on release); a few frames after, the panel has refreshed and drawn the new state.
    int click_down = -1, click_up = -1;
    const bool clicking = lesson && lesson->click_index >= 0;
    auto more_frames = [&](int frame) {
        if (clicking && frame < 120 && (click_up < 0 || frame < click_up + 4)) return true;
        return n_frames == 0 || frame < n_frames;
    };
    auto last = std::chrono::steady_clock::now();
    for (int frame = 0; more_frames(frame); ++frame) {
        if (!headless && glfwWindowShouldClose(window)) break;
        glfwPollEvents();
        refresh_scene(ctrl, state, snap);  // engine time is not frame time
        // A new scale, or a character the atlas has no glyph for yet: build it again.
        if (measure_scale && frame == 3) {
            at_one = probe_sizes(state);
            wanted_scale = launch_scale;
        } else if (measure_scale && frame < 3) {
            wanted_scale = 1.0f;
        }
        // The prompt's token ids, for the command for this view (--tokens when cut).
        const std::string ids_key = std::to_string(state.prompt_tokens) + "|" + state.prompt;
        if (ids_key != prompt_ids_key || (state.prompt_tokens > 0 && state.prompt_ids.empty())) {
            prompt_ids_key = ids_key;
            state.prompt_ids.clear();
            if (state.prompt_tokens > 0) {
                try {
                    state.prompt_ids = ctrl.encode(state);
                } catch (const Error&) {
                    // Too long a prompt: the panels show the engine's line; no command.
                }
            }
        }
        const bool new_text = fonts.add_text(screen_text(snap, state));
        if (wanted_scale != scale || new_text) apply_scale(wanted_scale, true);
        const auto t0 = std::chrono::steady_clock::now();
        const double cpu0 = process_cpu_ms();
        tick_playback(snap, state, std::chrono::duration<double>(t0 - last).count());
        last = t0;

        ImGui_ImplOpenGL3_NewFrame();
        ImGui_ImplGlfw_NewFrame();
        if (hover) io.MousePos = *hover;  // a resting pointer, for tooltip screenshots
        if (clicking && lesson->click_rect_ready && click_up < 0) {
            const float* r = lesson->click_rect;
            io.MousePos = ImVec2((r[0] + r[2]) / 2, (r[1] + r[3]) / 2);
            io.MouseDown[0] = click_down < 0;
            (click_down < 0 ? click_down : click_up) = frame;
        }
        for (int key : keys) io.KeysDown[key & ~kCtrlKey] = false;
        if (!keys.empty()) io.KeyCtrl = false;
        if (frame >= 2 && frame % 2 == 0 && (frame - 2) / 2 < static_cast<int>(keys.size())) {
            const int key = keys[(frame - 2) / 2];
            io.KeysDown[key & ~kCtrlKey] = true;
            io.KeyCtrl = (key & kCtrlKey) != 0;
        }
        ImGui::NewFrame();
        layout.clear();
        layout.char_width = ImGui::CalcTextSize("abcdefghijklmnopqrstuvwxyz").x / 26;
        if (!measure_scale || frame > 3) wanted_scale = scale_keys(scale, launch_scale);
        if (!io.KeyCtrl) handle_keys(snap, state);  // Ctrl 1..6 are not panel keys
        force_tab = force_tab || state.scene != forced;
        force_tab = draw_frame(snap, state, force_tab, lesson.get());
        forced = state.scene;
        ImGui::Render();

        int fb_w = 0, fb_h = 0;
        glfwGetFramebufferSize(window, &fb_w, &fb_h);
        if (target) {
            target->bind();
        } else {
            glViewport(0, 0, fb_w, fb_h);
        }
        // The full-window panel has no ImGui background: glClear paints it, which a
        // software rasterizer does far faster than shading and blending 1M pixels.
        glClearColor(0.06f, 0.06f, 0.07f, 1.0f);
        glClear(GL_COLOR_BUFFER_BIT);
        ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
        if (target) {
            target->unbind();
        } else {
            glfwSwapBuffers(window);
        }
        if (opt.report_frame_time) glFinish();  // count the rasterizer's work too
        const auto t1 = std::chrono::steady_clock::now();
        frame_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        frame_cpu_ms.push_back(process_cpu_ms() - cpu0);
#ifdef __EMSCRIPTEN__
        // The page shows the canvas and delivers input only while the browser runs:
        // wait here for its next animation frame (Asyncify keeps this loop as it is).
        plab_web_next_frame();
#endif
    }

    // 4. Results: the self-check lines (run_report.h).
    print_run_report({opt, state, snap, lesson.get(), clicking, *io.Fonts->Fonts[0], fonts,
                      headless, measure_scale, scale, content_scale, at_one, layout, !keys.empty(),
                      target.get(), frame_ms, frame_cpu_ms});
    target.reset();
    release_texture(state.heatmap);
    release_texture(state.heatmap_compare);
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    glfwDestroyWindow(window);
    glfwTerminate();
    if (state.checks_failed && state.print_checks) {  // headless runs report failures
        std::fprintf(stderr, "plab-viewer: a self-check failed (see the lines above)\n");
        return 1;
    }
    return 0;
}

}  // namespace
}  // namespace plab::viewer

int main(int argc, char** argv) {
    plab::viewer::Options opt;
    CLI::App app{"plab-viewer: watch LLM prefill step by step (causal mask, chunks, KV cache)"};
    plab::viewer::add_options(app, opt);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "plab-viewer: %s (see --help)\n", e.what());
        return 2;
    }
    try {
        return plab::viewer::run(opt);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "plab-viewer: %s\n", e.what());
        return 1;
    }
}
