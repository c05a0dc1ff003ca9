// plab-viewer: watch prefill happen — causal masks, chunk boundaries, the KV
// cache filling up, full == chunked, and where the time to first token goes.
//
// What it teaches: lessons 1-5 in five panels (toy attention, the KV cache,
// chunked prefill under the causal mask, bitwise equivalence, TTFT is not prefill), and the
// serving lessons in a sixth (a workload replayed by the scheduler, on the virtual clock),
// driven by the engine in src/ and never by math of its own. Left out on purpose: docking,
// saved window layouts, multi-viewport — one window that projects well.
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

#include "capture.h"
#include "controller.h"
#include "core/error.h"
#include "panels.h"
#include "runtime/generate.h"
#include "runtime/mask_spec.h"
#include "ui_common.h"

namespace plab::viewer {
namespace {

struct Options {
    std::string screenshot;  // "" = interactive
    std::string scene = "toy";
    std::string prompt;
    std::string prompt_file;
    std::string chunks;
    std::string model;
    std::string backend = "cpu-ref";
    std::string mask = "causal";  // runtime/mask_spec.h grammar, as `plab --mask`
    int mask_tile = ViewerState{}.mask_tile;
    std::string toy_values, toy_queries, toy_keys, toy_chunks;
    int width = 1280, height = 800;
    int frames = 0;
    bool report_frame_time = false;
    int prompt_tokens = 0;
    int lesson = 0;
    std::string hover;  // "x,y": where the mouse pointer rests in a screenshot
    std::string keys;  // --press "home,right,down": keys pressed one after another (headless tests)
    int step = -1;
    int layer = -1, head = -1;
    int block_size = ViewerState{}.block_size;
    bool serving = false;  // KV and timeline panels: several requests through one engine
    int kv_blocks = 0;     // their pool; 0 = the scenario's default
    std::string prefix_cache = "on";
    // The Serving panel: the names and meanings of `plab serve`'s flags.
    std::string policy = policy_name(ReplayOptions{}.policy);
    double rate = ReplayOptions{}.rate;
    int requests = ReplayOptions{}.requests;
    std::uint64_t seed = ReplayOptions{}.seed;
    int token_budget = ReplayOptions{}.token_budget;
    double network_delay_ms = ReplayOptions{}.network_delay_ms;
    float font_size = 16.0f;
};

std::string glfw_error_text;  // GLFW reports errors through a C callback

void glfw_error_callback(int code, const char* description) {
    glfw_error_text = std::string(description) + " (GLFW error " + std::to_string(code) + ")";
}

std::vector<float> parse_floats(const std::string& text, const char* what) {
    std::vector<float> out;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        try {
            size_t used = 0;
            out.push_back(std::stof(item, &used));
            PLAB_CHECK(used == item.size(), "");
        } catch (const std::exception&) {
            PLAB_CHECK(false,
                       what << ": '" << item << "' is not a number (expected e.g. 2,4,8,10)");
        }
    }
    return out;
}

// CPU time of the whole process (every thread), in milliseconds.
double process_cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Median of a run's frame times, leaving out the first two frames (font atlas,
// texture uploads).
double median_after_warmup(std::vector<double> ms) {
    ms.erase(ms.begin(), ms.begin() + std::min<size_t>(2, ms.size() - 1));
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// Key names for --press -> GLFW key codes (the ImGui 1.86 GLFW backend indexes
// io.KeysDown by them).
std::vector<int> parse_keys(const std::string& text) {
    static const std::pair<const char*, int> kNames[] = {
        {"space", GLFW_KEY_SPACE}, {"right", GLFW_KEY_RIGHT}, {"left", GLFW_KEY_LEFT},
        {"down", GLFW_KEY_DOWN},   {"home", GLFW_KEY_HOME},   {"end", GLFW_KEY_END},
        {"r", GLFW_KEY_R},         {"1", GLFW_KEY_1},         {"2", GLFW_KEY_2},
        {"3", GLFW_KEY_3},         {"4", GLFW_KEY_4},         {"5", GLFW_KEY_5},
        {"6", GLFW_KEY_6}};
    std::vector<int> keys;
    std::stringstream ss(text);
    std::string name;
    while (std::getline(ss, name, ',')) {
        int code = -1;
        for (const auto& [n, c] : kNames)
            if (name == n) code = c;
        PLAB_CHECK(code >= 0, "--press: unknown key '" << name
                                                       << "' (valid: space, right, left, down, "
                                                          "home, end, r, 1-6)");
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
void refresh_scene(Controller& ctrl, ViewerState& state, Snapshot& snap) {
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

// One frame of UI: a full-window tab bar, the control bar, the scene's panel.
void draw_frame(const Snapshot& snap, ViewerState& state, bool force_tab) {
    const ImGuiIO& io = ImGui::GetIO();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(io.DisplaySize);
    ImGui::Begin("Prefill Lab", nullptr,
                 ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                     ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoBringToFrontOnFocus |
                     ImGuiWindowFlags_NoBackground);
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
    draw_controls(snap, state);
    ImGui::Separator();
    ImGui::BeginChild("panel", ImVec2(0, 0), false);
    draw_panel(snap, state);
    ImGui::EndChild();
    ImGui::End();
}

// The panel of each lesson in lessons/ (one numbering: lesson N, --lesson N).
// Lessons 6 (compute vs memory) and 8 (batching decode) are `plab bench`,
// lesson 12 (disaggregated serving) is `plab serve --disaggregate`: no panel.
struct LessonPanel {
    int lesson;
    Scene scene;
    bool serving_view = false;     // the KV panel's shared pool (lesson 7: a reused prefix)
    const char* policy = nullptr;  // the Serving panel's policy, unless --policy is given
    double network_delay_ms = -1;  // and its client delay, unless given
    const char* mask = nullptr;    // the mask scenes' mask, unless --mask is given
};
constexpr LessonPanel kLessonPanels[] = {
    {1, Scene::kToy},
    {2, Scene::kKv},
    {3, Scene::kMask},
    {4, Scene::kEquivalence},
    {5, Scene::kTimeline},
    {7, Scene::kKv, true},
    {9, Scene::kServing, false, "continuous"},
    {10, Scene::kServing, false, "chunked"},
    {11, Scene::kServing, false, "chunked", 2.0},
    {13, Scene::kMask, false, nullptr, -1, "window:8"},
    {14, Scene::kKv},
};

// The options with lesson `lesson`'s panel applied (flags the user gave win).
Options with_lesson(Options o) {
    if (o.lesson == 0) return o;
    const LessonPanel* found = nullptr;
    for (const LessonPanel& p : kLessonPanels)
        if (p.lesson == o.lesson) found = &p;
    PLAB_CHECK(
        found != nullptr,
        "--lesson " << o.lesson
                    << " has no panel (panels: lessons 1-5, 7, 9-11, 13, 14; lessons 6 and 8 are "
                       "`plab bench`, lesson 12 is `plab serve --disaggregate`)");
    o.scene = scene_name(found->scene);
    o.serving = o.serving || found->serving_view;
    const Options defaults;
    if (found->policy != nullptr && o.policy == defaults.policy) o.policy = found->policy;
    if (found->network_delay_ms >= 0 && o.network_delay_ms == defaults.network_delay_ms)
        o.network_delay_ms = found->network_delay_ms;
    if (found->mask != nullptr && o.mask == defaults.mask) o.mask = found->mask;
    return o;
}

int run(const Options& given) {
    // 1. Inputs, checked before any window opens.
    const Options opt = with_lesson(given);
    const std::optional<Scene> scene = parse_scene(opt.scene);
    PLAB_CHECK(scene, "unknown scene '"
                          << opt.scene
                          << "' (valid: toy, mask, kv, equivalence, timeline, serving)");
    PLAB_CHECK(opt.width >= 320 && opt.height >= 240 && opt.width <= 8192 && opt.height <= 8192,
               "window size " << opt.width << "x" << opt.height
                              << " is out of range (320x240 .. 8192x8192)");
    PLAB_CHECK(opt.frames >= 0, "--frames must be >= 0");
    const bool headless = !opt.screenshot.empty();

    ViewerState state;
    state.scene = *scene;
    state.print_checks = headless || opt.frames > 0;
    state.prompt = !opt.prompt_file.empty() ? read_prompt_file(opt.prompt_file)
                   : !opt.prompt.empty()    ? opt.prompt
                                            : plab::kDefaultPrompt;
    PLAB_CHECK(opt.prompt_tokens >= 0, "--prompt-tokens must be >= 0");
    state.prompt_tokens = opt.prompt_tokens;
    if (!opt.chunks.empty()) {
        state.chunks = opt.chunks;
        state.chunk_size = std::atoi(opt.chunks.c_str());
    }
    state.backend = opt.backend;
    // The spec is checked here, before any window opens: the CLI's one line.
    parse_mask_spec(opt.mask);
    state.mask = opt.mask;
    PLAB_CHECK(opt.mask_tile >= 1 && opt.mask_tile <= 256,
               "--mask-tile " << opt.mask_tile << " must be between 1 and 256 positions");
    state.mask_tile = opt.mask_tile;
    state.block_size = opt.block_size;
    state.serving_view = opt.serving;
    PLAB_CHECK(opt.kv_blocks >= 0,
               "--kv-blocks " << opt.kv_blocks << " must be at least 1 (0: the default pool)");
    state.serving_kv_blocks = opt.kv_blocks;
    PLAB_CHECK(opt.prefix_cache == "on" || opt.prefix_cache == "off",
               "--prefix-cache '" << opt.prefix_cache << "' (valid: on, off)");
    state.serving_prefix_cache = opt.prefix_cache == "on";
    state.replay.policy = parse_policy(opt.policy);
    state.replay.rate = opt.rate;
    state.replay.requests = opt.requests;
    state.replay.seed = opt.seed;
    state.replay.token_budget = opt.token_budget;
    state.replay.network_delay_ms = opt.network_delay_ms;
    state.replay.validate();
    if (!opt.toy_values.empty()) state.toy.values = parse_floats(opt.toy_values, "--values");
    if (!opt.toy_queries.empty()) state.toy.queries = parse_floats(opt.toy_queries, "--queries");
    if (!opt.toy_keys.empty()) state.toy.keys = parse_floats(opt.toy_keys, "--keys");
    const int toy_t = state.toy.n_tokens();
    if (opt.toy_queries.empty()) state.toy.queries.assign(toy_t, 1.0f);
    if (opt.toy_keys.empty()) state.toy.keys.assign(toy_t, 1.0f);
    if (!opt.toy_chunks.empty()) state.toy_chunks = opt.toy_chunks;
    state.toy.validate();
    if (opt.step >= 0) state.stage = opt.step;

    Controller ctrl(opt.model);
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
         {&snap.toy.error, &snap.mask.error, &snap.kv.error, &snap.serving.error,
          &snap.equivalence.error, &snap.timeline.error, &snap.replay.error})
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
    const char* font = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
    if (std::filesystem::exists(font)) io.Fonts->AddFontFromFileTTF(font, opt.font_size);
    ImGui_ImplGlfw_InitForOpenGL(window, true);
    ImGui_ImplOpenGL3_Init("#version 330 core");

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
    const int n_frames = headless ? std::max({opt.frames, 4, key_frames}) : opt.frames;
    PLAB_CHECK(!opt.report_frame_time || opt.frames >= 3,
               "--report-frame-time needs --frames 3 or more");
    std::vector<double> frame_ms, frame_cpu_ms;
    Scene forced = state.scene;
    bool force_tab = true;
    auto last = std::chrono::steady_clock::now();
    for (int frame = 0; n_frames == 0 || frame < n_frames; ++frame) {
        if (!headless && glfwWindowShouldClose(window)) break;
        glfwPollEvents();
        refresh_scene(ctrl, state, snap);  // engine time is not frame time
        const auto t0 = std::chrono::steady_clock::now();
        const double cpu0 = process_cpu_ms();
        tick_playback(snap, state, std::chrono::duration<double>(t0 - last).count());
        last = t0;

        ImGui_ImplOpenGL3_NewFrame();
        ImGui_ImplGlfw_NewFrame();
        if (hover) io.MousePos = *hover;  // a resting pointer, for tooltip screenshots
        for (int key : keys) io.KeysDown[key] = false;
        if (frame >= 2 && frame % 2 == 0 && (frame - 2) / 2 < static_cast<int>(keys.size()))
            io.KeysDown[keys[(frame - 2) / 2]] = true;
        ImGui::NewFrame();
        handle_keys(snap, state);
        force_tab = force_tab || state.scene != forced;
        draw_frame(snap, state, force_tab);
        force_tab = false;
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
    }

    // 4. Results.
    if (headless || !keys.empty()) {
        const StepView v = step_view(snap, state);
        std::printf("cursor: %s step %d/%d + %d/%d layers, playing: %s\n", scene_name(state.scene),
                    v.stages_done, v.n_stages, v.layers_done, v.n_layers,
                    state.playing ? "yes" : "no");
    }
    if (target) {
        target->save_png(opt.screenshot);
        std::printf("wrote %s (%dx%d, scene %s)\n", opt.screenshot.c_str(), opt.width, opt.height,
                    scene_name(state.scene));
    }
    if (opt.report_frame_time && !frame_ms.empty()) {
        // Wall time is what a person sees; CPU time (all threads, llvmpipe's
        // rasterizer threads included) is what the frame costs on a busy machine.
        const int t = snap.mask.ready ? snap.mask.n_tokens() : 0;
        std::printf(
            "median frame time: %.2f ms over %zu frames (%dx%d, scene %s, %d prompt "
            "tokens, %s); median CPU time per frame %.2f ms\n",
            median_after_warmup(frame_ms), frame_ms.size() - 2, opt.width, opt.height,
            scene_name(state.scene), t, reinterpret_cast<const char*>(glGetString(GL_RENDERER)),
            median_after_warmup(frame_cpu_ms));
    }
    target.reset();
    release_texture(state.heatmap);
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
    app.add_option("--scene", opt.scene,
                   "Panel to open: toy, mask, kv, equivalence, timeline, serving");
    app.add_option("--lesson", opt.lesson,
                   "Open the panel of lesson N (1 toy, 2 kv, 3 mask, 4 equivalence, 5 timeline, "
                   "7 kv --serving, 9-11 serving, 13 mask --mask window:8, 14 kv)");
    app.add_option("--screenshot", opt.screenshot,
                   "Render headless (no window shown) and write this PNG, then exit");
    app.add_option("--prompt", opt.prompt, "Prompt text for the model panels");
    app.add_option("--prompt-file", opt.prompt_file, "Read the prompt from this file");
    app.add_option("--prompt-tokens", opt.prompt_tokens,
                   "Cut (or repeat) the tokenized prompt to exactly this many tokens");
    app.add_option("--chunks", opt.chunks, "Chunk plan: full, a size (8) or lengths (3,1,4)");
    app.add_option("--model", opt.model, "Model directory (default: $PLAB_MODEL or assets/model)");
    app.add_option("--backend", opt.backend, "Backend: cpu-ref, cpu, gpu-ref, gpu");
    app.add_option("--mask", opt.mask,
                   "Attention mask of the mask, kv and timeline panels, as plab --mask: causal, "
                   "window:8, window:8+sink:2, chunked:16, dilated:4,2, prefix:6, docs:5,7, "
                   "file:m.txt, +alibi, +softcap:30 (grammar: plab mask --help)")
        ->capture_default_str();
    app.add_option("--mask-tile", opt.mask_tile,
                   "Mask panel: tile size of the tile map (the fast kernels use 32)")
        ->capture_default_str();
    app.add_option("--values", opt.toy_values, "Toy example values V (default 2,4,8,10)");
    app.add_option("--queries", opt.toy_queries, "Toy example queries Q (default all 1)");
    app.add_option("--keys", opt.toy_keys, "Toy example keys K (default all 1)");
    app.add_option("--toy-chunks", opt.toy_chunks, "Toy example chunk plan (default 2)");
    app.add_option("--step", opt.step, "Engine calls to show as done (default: all)");
    app.add_option("--layer", opt.layer, "Attention panel: layer (default: the last)");
    app.add_option("--head", opt.head, "Attention panel: head (default 0)");
    app.add_option("--block-size", opt.block_size, "KV panel: positions per cache block");
    app.add_flag("--serving", opt.serving,
                 "KV and timeline panels: four requests through one engine and one shared "
                 "KV pool (prefix sharing, preemption, eviction)");
    app.add_option("--kv-blocks", opt.kv_blocks,
                   "With --serving: blocks in the shared pool (default: just too few)");
    app.add_option("--prefix-cache", opt.prefix_cache, "With --serving: on or off (default on)");
    app.add_option("--policy", opt.policy,
                   "Serving panel: one-at-a-time, static, continuous, chunked (default chunked)");
    app.add_option("--rate", opt.rate, "Serving panel: Poisson arrivals per second")
        ->capture_default_str();
    app.add_option("--requests", opt.requests, "Serving panel: requests in the workload")
        ->capture_default_str();
    app.add_option("--seed", opt.seed, "Serving panel: arrivals, lengths and prompt ids")
        ->capture_default_str();
    app.add_option("--token-budget", opt.token_budget,
                   "Serving panel: tokens per step (chunked policy; the others prefill whole "
                   "prompts)")
        ->capture_default_str();
    app.add_option("--network-delay-ms", opt.network_delay_ms,
                   "Serving panel: one-way delay to the client (each token's delivery)")
        ->capture_default_str();
    app.add_option("--width", opt.width, "Window width in pixels");
    app.add_option("--height", opt.height, "Window height in pixels");
    app.add_option("--font-size", opt.font_size, "Font size in pixels (projectors: 20+)");
    app.add_option("--frames", opt.frames, "Render this many frames, then exit (0: until closed)");
    app.add_option("--hover", opt.hover,
                   "Screenshots: put the mouse pointer at x,y (pixels) to show a tooltip");
    app.add_option("--press", opt.keys,
                   "Press these keys one by one, e.g. home,right,down (space, left, end, r, 1-6)");
    app.add_flag("--report-frame-time", opt.report_frame_time,
                 "Print the median frame time of the run");
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
