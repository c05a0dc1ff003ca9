// plab-viewer: watch prefill happen — causal masks, chunk boundaries, the KV
// cache filling up, full == chunked, and where the time to first token goes.
//
// What it teaches: lessons 1-5 in five panels (toy attention, the KV cache,
// chunked prefill under the causal mask, bitwise equivalence, TTFT is not prefill), and the
// serving lessons in a sixth (a workload replayed by the scheduler, on the virtual clock),
// FlashAttention by hand in a seventh (lesson 17: the toy's softmax walked key tile by key
// tile), driven by the engine in src/ and never by math of its own. Lesson mode (--lesson N) puts
// the lesson's text beside its panel, its Try steps as buttons (lesson_pane.h). Left out
// on purpose: docking, saved window layouts, multi-viewport — one window that projects well.
//
// The application skeleton follows Dear ImGui's examples/example_glfw_opengl3
// (v1.86): GLFW window + OpenGL 3.3 core context, ImGui GLFW and OpenGL3
// backends, one NewFrame/Render per loop. Headless: --screenshot renders into
// an offscreen framebuffer and writes a PNG (run under Xvfb without a desktop).
// What one frame draws (tabs, controls, panel, lesson pane) is frame_ui.h; run() below
// tells the program's story: inputs, the engine's first answer, the window, the frames,
// the report.
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
#include "app/flash_view.h"
#include "app/fonts.h"
#include "app/lesson_pane.h"
#include "app/options.h"
#include "app/scenes.h"
#include "app/serving_scenario.h"
#include "core/error.h"
#include "model/model_io.h"
#include "panels/layout_probe.h"
#include "panels/panels.h"
#include "panels/ui_scale.h"
#include "panels/ui_texture.h"
#include "window/frame_ui.h"
#include "window/run_report.h"

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
                                                         {"7", GLFW_KEY_7},
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
                                                          "up, home, end, r, f, 1-7, ctrl+plus, "
                                                          "ctrl+minus, ctrl+0)");
        keys.push_back(code);
    }
    return keys;
}

// The part of the Snapshot a scene draws (its row of the scene table): the
// shared-pool scenario when the KV or timeline panel shows several requests.
bool& dirty_flag(Dirty& d, Scene s, bool serving_view) {
    const SceneRow& row = scene_row(s);
    return d.*(serving_view && row.serving_part != nullptr ? row.serving_part : row.part);
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
    Dirty only{false, false, false, false, false, false, false, false};
    dirty_flag(only, state.scene, state.serving_view) = true;
    flag = false;
    ctrl.refresh(state, only, snap, state.print_checks, state.checks_failed);
}

// The shown scene, then the mask panel's shown layer, pinned row and
// second run, asked again when they change, on top of the scene just refreshed. The
// flash scene walks the Toy panel's input under the Mask panel's mask: asked again when
// one of them moved since its walk (flash_inputs_key).
void refresh_scene(Controller& ctrl, ViewerState& state, Snapshot& snap) {
    if (state.scene == Scene::kFlash && snap.flash.key != flash_inputs_key(state))
        state.dirty.flash = true;
    refresh_dirty_scene(ctrl, state, snap);
    if (state.scene == Scene::kMask && !state.dirty.mask)
        ctrl.refresh_mask_view(state, snap.mask, state.print_checks, state.checks_failed);
}

// The texts on screen that are not in the fixed glyph ranges' scripts for sure: the
// prompt and what the model wrote (a new character makes the atlas build again).
std::string screen_text(const Snapshot& snap, const ViewerState& state) {
    std::string t = state.prompt + snap.mask.first_token + snap.timeline.output_text;
    for (const ServingRequestInfo& r : snap.serving.requests) t += r.output_text;
    return t;
}

// Inputs ---------------------------------------------------------------------------

// What the command line asks of the window and its text.
struct Launch {
    bool headless = false;      // --screenshot: frames drawn offscreen, the last one saved
    float asked_scale = 1;      // --scale
    std::string font_path;      // the main font
    std::string fallback_path;  // merged in for the characters the main font lacks; "" = none
};

// The window's flags, checked before any window opens.
Launch check_launch(const Options& opt) {
    PLAB_CHECK(opt.width >= 320 && opt.height >= 240 && opt.width <= 8192 && opt.height <= 8192,
               "window size " << opt.width << "x" << opt.height
                              << " is out of range (320x240 .. 8192x8192)");
    PLAB_CHECK(opt.frames >= 0, "--frames must be >= 0");
    Launch l;
    l.headless = !opt.screenshot.empty();
    l.asked_scale = parse_scale(opt.scale);
    l.font_path = opt.font.empty() ? default_font_path() : opt.font;
    check_font_file(l.font_path, !opt.font.empty());
    l.fallback_path = opt.fallback_font.empty()     ? installed_fallback_font()
                      : opt.fallback_font == "none" ? ""
                                                    : opt.fallback_font;
    if (!opt.fallback_font.empty() && !l.fallback_path.empty())
        check_font_file(l.fallback_path, true);
    PLAB_CHECK(opt.font_size >= 6 && opt.font_size <= 72,
               "--font-size " << opt.font_size << " must be between 6 and 72 pixels");
    return l;
}

// The state the flags open, and whether its self-check lines are printed.
ViewerState launch_state(const Options& opt, bool headless) {
    ViewerState state = state_from_options(opt);
    state.print_checks = headless || opt.frames > 0;
#ifdef __EMSCRIPTEN__
    // A page has no terminal to rerun headless from: its self-check lines always go to
    // the page's log and window.plab (viewer/web/shell.html).
    state.print_checks = true;
#endif
    return state;
}

// Lesson mode: the lesson's text is read and parsed before any window opens.
std::unique_ptr<LessonPane> launch_lesson(const Options& opt, const Options& given, bool headless) {
    std::unique_ptr<LessonPane> lesson;
    if (opt.lesson > 0) lesson = std::make_unique<LessonPane>(make_lesson_pane(given));
    PLAB_CHECK(opt.click_try == 0 || (lesson && headless),
               "--click-try needs --lesson N and --screenshot (it clicks a Try button headless)");
    return lesson;
}

// The engine's first answer ---------------------------------------------------------

// The model's facts, the attention head to open on, and the shown scene computed now, so
// bad input fails before a window opens.
Snapshot first_snapshot(Controller& ctrl, const Options& opt, ViewerState& state, bool headless) {
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
    state.slow_refresh_announced = true;
    refresh_scene(ctrl, state, snap);
    for (const std::string* err : {&snap.toy.error, &snap.mask.error, &snap.mask.view.error,
                                   &snap.kv.error, &snap.serving.error, &snap.equivalence.error,
                                   &snap.timeline.error, &snap.replay.error, &snap.flash.error})
        PLAB_CHECK(!headless || err->empty(), *err);
    return snap;
}

// The window ------------------------------------------------------------------------

// Window and GL context (GL 3.3 core, as in imgui's example_glfw_opengl3); hidden headless.
GLFWwindow* open_window(const Options& opt, bool headless) {
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
    return window;
}

// ImGui's context and look. Returns the scale-1 style, which every scale is made from.
ImGuiStyle create_imgui_context() {
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
    return ImGui::GetStyle();
}

// ImGui's platform and renderer backends on the window.
void init_imgui_backends(GLFWwindow* window) {
    ImGui_ImplGlfw_InitForOpenGL(window, true);
#ifdef __EMSCRIPTEN__
    ImGui_ImplOpenGL3_Init("#version 300 es");  // WebGL2 is OpenGL ES 3.0
#else
    ImGui_ImplOpenGL3_Init("#version 330 core");
#endif
}

// The monitor's content scale (2 on a high-DPI screen; 1 under Xvfb).
float monitor_content_scale([[maybe_unused]] GLFWwindow* window) {
    float content_x = 1, content_y = 1;
#ifndef __EMSCRIPTEN__  // emscripten's GLFW has no content scale: the page is at 1
    glfwGetWindowContentScale(window, &content_x, &content_y);
#endif
    return std::max(1.0f, std::max(content_x, content_y));
}

// Every character of the lesson (—, …, ≤, ², ·), the prompt and the model's output gets
// a glyph.
void add_launch_texts(FontSet& fonts, const LessonPane* lesson, const std::string& screen) {
    if (lesson) fonts.add_text(kCodeWrapMarker);
    if (lesson)
        for (const LessonBlock& b : lesson->text.blocks) {
            fonts.add_text(b.text);
            for (const auto& row : b.cells)
                for (const std::string& cell : row) fonts.add_text(cell);
        }
    fonts.add_text(screen);
}

// Everything the window held, given back.
void close_window(GLFWwindow* window, ViewerState& state) {
    release_texture(state.heatmap);
    release_texture(state.heatmap_compare);
    release_texture(state.flash_heatmap);
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    glfwDestroyWindow(window);
    glfwTerminate();
}

// The UI scale ----------------------------------------------------------------------

// The scale the UI is drawn at: --scale times the monitor's, changed by Ctrl +/-/0.
struct UiScale {
    FontSet& fonts;
    ViewerState& state;      // the panels' pixel constants follow the scale (set_ui_scale)
    LessonPane* lesson;      // its fonts and measured text heights follow it too
    ImGuiStyle base_style;   // the scale-1 style, scaled from here
    float content_scale;     // the monitor's
    float launch;            // --scale times content_scale: where Ctrl 0 goes back to
    bool measure = false;    // the headless scale self-check runs (at_one)
    float now = 0;           // the scale of the fonts and the style
    float wanted = 1;        // the scale the next frame asks for
    ScaleProbe at_one = {};  // the sizes measured at scale 1

    // Fonts rasterized at the new size, the style's sizes scaled, the panels' own pixel
    // constants through ui_scale(): all at once, so nothing is left at the old size.
    void apply(float s, bool upload) {
        fonts.rebuild(*ImGui::GetIO().Fonts, s);
        ImGui::GetStyle() = base_style;
        ImGui::GetStyle().ScaleAllSizes(s);
        set_ui_scale(state, s);
        if (lesson) {
            lesson->mono_font = fonts.mono_font();
            lesson->heading_font = fonts.heading_font();
            lesson->heights_width = -1;  // text heights were measured at the old size
        }
        if (upload) {
            ImGui_ImplOpenGL3_DestroyFontsTexture();
            ImGui_ImplOpenGL3_CreateFontsTexture();
        }
        now = s;
    }

    // The scale self-check: frames 0-2 drawn at 1, measured before frame 3, which asks
    // for the launch scale.
    void measure_frame(int frame) {
        if (measure && frame == 3) {
            at_one = probe_sizes(state);
            wanted = launch;
        } else if (measure && frame < 3) {
            wanted = 1.0f;
        }
    }
};

// Scripted input (tests and screenshots) --------------------------------------------

// What a headless run does in place of a person at the screen.
struct ScriptedInput {
    std::vector<int> keys;        // --press: key i goes down on frame 2 + 2i, up on the next
    std::optional<ImVec2> hover;  // --hover: a resting pointer, for tooltip screenshots
    // --click-try K: once the pane reports Try button K fully in view, the mouse goes down
    // on it for one frame and up on the next (ImGui presses a button on release); a few
    // frames after, the panel has refreshed and drawn the new state.
    bool clicking = false;
    int click_down = -1, click_up = -1;  // the frames the mouse went down and up
};

ScriptedInput scripted_input(const Options& opt, const LessonPane* lesson) {
    ScriptedInput in;
    in.keys = opt.keys.empty() ? std::vector<int>{} : parse_keys(opt.keys);
    if (!opt.hover.empty()) {
        const std::vector<float> xy = parse_floats(opt.hover, "--hover");
        PLAB_CHECK(xy.size() == 2, "--hover takes x,y in pixels, e.g. 300,400");
        in.hover = ImVec2(xy[0], xy[1]);
    }
    in.clicking = lesson && lesson->click_index >= 0;
    return in;
}

// The frame's scripted pointer and keys, over what the backends read from GLFW.
void feed_scripted_input(ScriptedInput& in, int frame, const LessonPane* lesson) {
    ImGuiIO& io = ImGui::GetIO();
    if (in.hover) io.MousePos = *in.hover;
    if (in.clicking && lesson->click_rect_ready && in.click_up < 0) {
        const float* r = lesson->click_rect;
        io.MousePos = ImVec2((r[0] + r[2]) / 2, (r[1] + r[3]) / 2);
        io.MouseDown[0] = in.click_down < 0;
        (in.click_down < 0 ? in.click_down : in.click_up) = frame;
    }
    for (int key : in.keys) io.KeysDown[key & ~kCtrlKey] = false;
    if (!in.keys.empty()) io.KeyCtrl = false;
    if (frame >= 2 && frame % 2 == 0 && (frame - 2) / 2 < static_cast<int>(in.keys.size())) {
        const int key = in.keys[(frame - 2) / 2];
        io.KeysDown[key & ~kCtrlKey] = true;
        io.KeyCtrl = (key & kCtrlKey) != 0;
    }
}

// The frame loop --------------------------------------------------------------------

// What the frames work on, made before the first one.
struct FrameLoop {
    GLFWwindow* window;
    OffscreenTarget* target;  // headless: the frames are drawn into it; else null
    Controller& ctrl;
    ViewerState& state;
    Snapshot& snap;
    LessonPane* lesson;  // null outside lesson mode
    UiScale& ui;
    ScriptedInput& script;
    LayoutRecord& layout;   // what the frame lays out (the report checks the last one)
    int n_frames;           // 0: until the window is closed
    bool finish;            // --report-frame-time: each frame waits for the rasterizer
    Scene forced;           // the scene whose tab the last frame selected
    bool force_tab = true;  // select the scene's tab in the next frame
    std::string prompt_ids_key = "\x01";  // the prompt the ids were made from (none yet)
    std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
    std::vector<double> frame_ms = {}, frame_cpu_ms = {};
};

// How many frames a run draws (0: until the window is closed). Headless runs a few
// (ImGui sizes windows over two frames) and keeps the last one.
int frame_count(const Options& opt, bool headless, const UiScale& ui, const ScriptedInput& in) {
    // Scripted keys: key i goes down on frame 2 + 2i and up on the next frame.
    const int key_frames = in.keys.empty() ? 0 : 4 + 2 * static_cast<int>(in.keys.size());
    const int n_frames =
        headless ? std::max({opt.frames, ui.measure ? 8 : 4, key_frames}) : opt.frames;
    PLAB_CHECK(!opt.report_frame_time || opt.frames >= 3,
               "--report-frame-time needs --frames 3 or more");
    return n_frames;
}

// A click runs until the panel has drawn what the click changed.
bool more_frames(const FrameLoop& f, int frame) {
    const ScriptedInput& in = f.script;
    if (in.clicking && frame < 120 && (in.click_up < 0 || frame < in.click_up + 4)) return true;
    return f.n_frames == 0 || frame < f.n_frames;
}

// The prompt's token ids, for the command for this view (--tokens when cut).
void update_prompt_ids(Controller& ctrl, ViewerState& state, std::string& prompt_ids_key) {
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
}

// Before the frame: the engine asked again for what changed, the prompt's ids, and the
// font atlas built again for a new scale or a character it has no glyph for yet.
void prepare_frame(FrameLoop& f, int frame) {
    glfwPollEvents();
    refresh_scene(f.ctrl, f.state, f.snap);  // engine time is not frame time
    f.ui.measure_frame(frame);
    update_prompt_ids(f.ctrl, f.state, f.prompt_ids_key);
    const bool new_text = f.ui.fonts.add_text(screen_text(f.snap, f.state));
    if (f.ui.wanted != f.ui.now || new_text) f.ui.apply(f.ui.wanted, true);
}

// The frame's UI: input (scripted over GLFW's), the keys, the tabs and panels, Render.
void build_frame(FrameLoop& f, int frame) {
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    feed_scripted_input(f.script, frame, f.lesson);
    ImGui::NewFrame();
    f.layout.clear();
    f.layout.char_width = ImGui::CalcTextSize("abcdefghijklmnopqrstuvwxyz").x / 26;
    if (!f.ui.measure || frame > 3) f.ui.wanted = scale_keys(f.ui.now, f.ui.launch);
    if (!ImGui::GetIO().KeyCtrl) handle_keys(f.snap, f.state);  // Ctrl 1..7 are not panel keys
    f.force_tab = f.force_tab || f.state.scene != f.forced;
    f.force_tab = draw_frame(f.snap, f.state, f.force_tab, f.lesson);
    f.forced = f.state.scene;
    ImGui::Render();
}

// The frame's pixels: into the offscreen target (headless) or the window.
void present_frame(GLFWwindow* window, OffscreenTarget* target, bool finish) {
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
    if (finish) glFinish();  // count the rasterizer's work too
}

// One frame, its time counted from the playback tick to its pixels.
void run_frame(FrameLoop& f, int frame) {
    prepare_frame(f, frame);
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = process_cpu_ms();
    tick_playback(f.snap, f.state, std::chrono::duration<double>(t0 - f.last).count());
    f.last = t0;
    build_frame(f, frame);
    present_frame(f.window, f.target, f.finish);
    const auto t1 = std::chrono::steady_clock::now();
    f.frame_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    f.frame_cpu_ms.push_back(process_cpu_ms() - cpu0);
}

int run(const Options& given) {
    // 1. Inputs, checked before any window opens.
    const Options opt = with_lesson(given);
    const Launch launch = check_launch(opt);
    ViewerState state = launch_state(opt, launch.headless);
    const std::unique_ptr<LessonPane> lesson = launch_lesson(opt, given, launch.headless);

    // 2. The engine: the model, and the shown scene's first answer.
    Controller ctrl(opt.model);
    state.model_dir = opt.model.empty() ? default_model_path() : opt.model;
    Snapshot snap = first_snapshot(ctrl, opt, state, launch.headless);

    // 3. Window, ImGui and the fonts at the launch scale; the lesson adds a bold font for
    //    headings and a monospace one for code.
    GLFWwindow* window = open_window(opt, launch.headless);
    const ImGuiStyle base_style = create_imgui_context();
    const float content_scale = monitor_content_scale(window);
    FontSet fonts(launch.font_path, launch.fallback_path, opt.font_size, lesson != nullptr);
    add_launch_texts(fonts, lesson.get(), screen_text(snap, state));
    UiScale ui{fonts,      state,         lesson.get(),
               base_style, content_scale, launch.asked_scale * content_scale};
    // Headless with a scale other than 1: the first frames are drawn at 1 and measured,
    // then the scale changes as Ctrl +/- changes it, and the self-check compares.
    // (Not with scripted keys: those test the Ctrl keys themselves.)
    ui.measure = launch.headless && ui.launch != 1.0f && opt.keys.empty();
    ui.apply(ui.measure ? 1.0f : ui.launch, false);
    ui.wanted = ui.launch;
    init_imgui_backends(window);
    // Headless runs record what each frame lays out (panels/layout_probe.h); the last
    // frame's record is checked as a reader would read it (check_layout).
    LayoutRecord layout;
    if (state.print_checks) set_layout_record(&layout);
    if (lesson) lesson->draw_all = launch.headless;  // every block laid out and checked
    ScriptedInput script = scripted_input(opt, lesson.get());
    std::unique_ptr<OffscreenTarget> target;
    if (launch.headless) target = std::make_unique<OffscreenTarget>(opt.width, opt.height);

    // 4. The frame loop: until the window is closed, or headless a few frames.
    const int n_frames = frame_count(opt, launch.headless, ui, script);
    FrameLoop loop{
        window,   target.get(),          ctrl,       state, snap, lesson.get(), ui, script, layout,
        n_frames, opt.report_frame_time, state.scene};
    for (int frame = 0; more_frames(loop, frame); ++frame) {
        if (!launch.headless && glfwWindowShouldClose(window)) break;
        run_frame(loop, frame);
#ifdef __EMSCRIPTEN__
        // The page shows the canvas and delivers input only while the browser runs:
        // wait here for its next animation frame (Asyncify keeps this loop as it is).
        plab_web_next_frame();
#endif
    }

    // 5. Results: the self-check lines (run_report.h), then the window given back.
    print_run_report({opt, state, snap, lesson.get(), script.clicking,
                      *ImGui::GetIO().Fonts->Fonts[0], fonts, launch.headless, ui.measure, ui.now,
                      ui.content_scale, ui.at_one, layout, !script.keys.empty(), target.get(),
                      loop.frame_ms, loop.frame_cpu_ms});
    target.reset();
    close_window(window, state);
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
