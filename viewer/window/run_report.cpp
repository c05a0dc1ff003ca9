#include "window/run_report.h"

#include <imgui_internal.h>  // the layout self-check reads each window's content extent
// clang-format off
#include <GL/gl.h>
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "app/serving_scenario.h"
#include "app/view_command.h"
#include "checks/self_check.h"
#include "panels/panels.h"
#include "panels/ui_playback.h"

namespace plab::viewer {

namespace {

// Median of a run's frame times, leaving out the first two frames (font atlas,
// texture uploads).
double median_after_warmup(std::vector<double> ms) {
    ms.erase(ms.begin(), ms.begin() + std::min<size_t>(2, ms.size() - 1));
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// Every window of the last frame, for the layout self-check (check_layout): inside the
// display, and nothing drawn past its right or bottom edge where it cannot scroll to it
// (asked of ImGui's own windows: their rectangles and the furthest point their items
// reached), and whether it needed a horizontal scrollbar (a panel or the lesson text
// scrolled sideways hides part of itself: a failure too). A child window its parent
// has scrolled partly out of view is the parent's business (the parent scrolls).
void record_windows(LayoutRecord& record, int& sideways) {
    const ImGuiContext& g = *GImGui;
    sideways = 0;
    const float slack = 1.0f;  // sub-pixel rounding of window positions
    const ImRect display(ImVec2(0, 0), g.IO.DisplaySize);
    for (const ImGuiWindow* w : g.Windows) {
        // Tooltips count (one wider than the display would be cut); popups do not.
        if (!w->WasActive || w->Hidden || (w->Flags & ImGuiWindowFlags_Popup)) continue;
        sideways += w->ScrollbarX;
        ImRect r = w->Rect();
        r.Expand(-slack);
        const bool child = (w->Flags & ImGuiWindowFlags_ChildWindow) && w->ParentWindow;
        if (child && !w->ParentWindow->InnerClipRect.Contains(r)) continue;  // scrolled
        LayoutWindow lw;
        lw.name = w->Name;
        lw.outside_display = !child && !display.Contains(r);
        lw.scrolls_sideways = w->ScrollbarX;
        // A lesson's diagram wider than the pane scrolls in its own box (panel_lesson.cpp).
        lw.sideways_allowed = std::strstr(w->Name, "/diagram_") != nullptr;
        const float over_x = w->DC.CursorMaxPos.x - w->InnerClipRect.Max.x;
        const float over_y = w->DC.CursorMaxPos.y - w->InnerClipRect.Max.y;
        if (!w->ScrollbarX) lw.cut_right = std::max(0.0f, over_x);
        if (!w->ScrollbarY && !w->ScrollbarX) lw.cut_bottom = std::max(0.0f, over_y);
        record.windows.push_back(lw);
    }
}

// "font 16 -> 32 px (2.00x)": a size at scale 1 and at `scale`, and whether it grew by
// the scale within `tol` px: ImGuiStyle::ScaleAllSizes floors each padding to whole
// pixels, so a padded size may lose up to a pixel per padding; glyph advances are
// rasterized at the new size and summed, which stays within 1%.
std::string ratio_text(const char* what, float one, float now, float scale, float tol, bool& ok) {
    const bool good = one > 0 && std::abs(now - one * scale) <= tol;
    ok = ok && good;
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s %.1f -> %.1f px (%.2fx)", what, one, now,
                  one > 0 ? now / one : 0.0f);
    return buf;
}

// The lesson pane's line, and with --click-try whether the click pressed its button.
void report_lesson(const RunReport& r) {
    bool ok = false;
    std::printf("%s\n", lesson_self_check(*r.lesson, ok).c_str());
    r.state.checks_failed = r.state.checks_failed || !ok;
    if (!r.clicking) return;
    // The click must have pressed exactly that button, and its command must have
    // changed the panel's inputs (the refreshed self-check lines above show them).
    const bool pressed = r.lesson->presses == 1 && r.lesson->pressed == r.lesson->click_index;
    const bool changed = r.lesson->error.empty() && !r.lesson->changed.empty();
    const std::string what = !pressed  ? "the button was not pressed: NO"
                             : changed ? "set: " + r.lesson->changed
                                       : "nothing changed: NO " + r.lesson->error;
    std::printf("lesson %d: Try %d clicked: %s\n", r.lesson->lesson, r.opt.click_try, what.c_str());
    r.state.checks_failed = r.state.checks_failed || !pressed || !changed;
}

// The prompt's characters asked of the font atlas, one by one.
void report_text(const RunReport& r) {
    bool ok = false;
    std::printf("%s\n", text_self_check(r.font, r.fonts, r.state.prompt, ok).c_str());
    r.state.checks_failed = r.state.checks_failed || !ok;
}

// Sizes at scale 1 against sizes at the launch scale, and nothing cut off.
void report_scale(const RunReport& r) {
    const ScaleProbe now = probe_sizes(r.state);
    bool ok = true;
    const float s = r.scale;
    std::string line =
        "scale: " + std::to_string(s).substr(0, 4) + " (--scale " + r.opt.scale + " x monitor " +
        std::to_string(r.content_scale).substr(0, 4) +
        "): " + ratio_text("font", r.at_one.font, now.font, s, 0.01f, ok) + ", " +
        ratio_text("frame height", r.at_one.frame_h, now.frame_h, s, 2, ok) + ", " +
        ratio_text("text width", r.at_one.text_w, now.text_w, s, 0.01f * s * r.at_one.text_w + 1,
                   ok) +
        ", " +
        (r.at_one.button_w > 0
             ? ratio_text("Reset button width", r.at_one.button_w, now.button_w, s,
                          2 + 0.01f * s * r.at_one.button_w, ok) +
                   ", " + ratio_text("height", r.at_one.button_h, now.button_h, s, 2, ok)
             : std::string("no Reset button in this view (a lesson alone)"));
    int sideways = 0;
    record_windows(r.layout, sideways);
    const std::string clipped = window_failures(r.layout);
    ok = ok && clipped.empty();
    line += "; every window inside the " + std::to_string(r.opt.width) + "x" +
            std::to_string(r.opt.height) + " window, nothing cut off at an edge (" +
            std::to_string(sideways) + " scrolled sideways): " +
            (ok ? "yes" : "NO" + (clipped.empty() ? "" : " (" + clipped + ")"));
    std::printf("%s\n", line.c_str());
    r.state.checks_failed = r.state.checks_failed || !ok;
}

// Every window inside the window at the scale drawn, nothing cut off.
void report_layout(const RunReport& r) {
    int sideways = 0;
    record_windows(r.layout, sideways);
    const std::string clipped = window_failures(r.layout);
    std::printf(
        "layout: every window inside the %dx%d window at scale %.2f, nothing cut off "
        "at an edge (%d scrolled sideways): %s\n",
        r.opt.width, r.opt.height, r.scale, sideways,
        clipped.empty() ? "yes" : ("NO (" + clipped + ")").c_str());
    r.state.checks_failed = r.state.checks_failed || !clipped.empty();
}

// Every text, control, table and chart of the last frame, as read.
void report_readability(const RunReport& r) {
    const CheckResult readable = check_layout(r.layout);
    std::printf("%s\n", readable.line.c_str());
    r.state.checks_failed = r.state.checks_failed || !readable.ok;
}

// The mask panel's point (pairs, tile map, the chunking verdict) must not sit below
// the fold, where a lesson's reader never scrolls.
void report_mask_facts(const RunReport& r) {
    float end = 0;
    int items = 0;
    for (const LayoutText& t : r.layout.texts)
        if (t.where == "mask facts") {
            end = std::max(end, t.rect.y1);
            ++items;
        }
    if (items > 0)
        std::printf(
            "mask facts: %d items, the last ending at y %.0f of the %d-pixel window: "
            "in view: %s\n",
            items, end, r.opt.height, end <= r.opt.height ? "yes" : "NO");
}

// The command for this view, and the numbers it must reproduce.
void report_command(const RunReport& r) {
    std::string why_not;
    const std::vector<std::string> words =
        view_command(r.state, r.snap, r.state.model_dir, why_not);
    std::printf("command: %s\n", words.empty() ? why_not.c_str() : shell_join(words).c_str());
    const std::string numbers = view_numbers(r.state, r.snap);
    if (!numbers.empty()) std::printf("viewer computed: %s\n", numbers.c_str());
}

// The shared pool opens where blocks are shared (opening_stage).
void report_kv_pool(const RunReport& r) {
    const StepView v = step_view(r.snap, r.state);
    const int most = opening_stage(r.snap.serving);
    std::printf(
        "kv pool: step in view %d of %d: %d blocks shared by several requests (the most, "
        "%d, first after step %d)\n",
        v.stages_done, v.n_stages,
        shared_blocks(r.snap.serving.stages[static_cast<std::size_t>(v.stages_done)]),
        shared_blocks(r.snap.serving.stages[static_cast<std::size_t>(most)]), most);
}

// Where the step cursor ended (the scripted keys move it).
void report_cursor(const RunReport& r) {
    const StepView v = step_view(r.snap, r.state);
    std::printf("cursor: %s step %d/%d + %d/%d layers, playing: %s, scale %.4g\n",
                scene_name(r.state.scene), v.stages_done, v.n_stages, v.layers_done, v.n_layers,
                r.state.playing ? "yes" : "no", r.scale);
}

// The last frame, as the PNG --screenshot names.
void save_screenshot(const RunReport& r) {
    r.target->save_png(r.opt.screenshot);
    std::printf("wrote %s (%dx%d, scene %s)\n", r.opt.screenshot.c_str(), r.opt.width, r.opt.height,
                scene_name(r.state.scene));
}

// Wall time is what a person sees; CPU time (all threads, llvmpipe's rasterizer
// threads included) is what the frame costs on a busy machine.
void report_frame_time(const RunReport& r) {
    const int t = r.snap.mask.ready ? r.snap.mask.n_tokens() : 0;
    std::printf(
        "median frame time: %.2f ms over %zu frames (%dx%d, scene %s, %d prompt "
        "tokens, %s); median CPU time per frame %.2f ms\n",
        median_after_warmup(r.frame_ms), r.frame_ms.size() - 2, r.opt.width, r.opt.height,
        scene_name(r.state.scene), t, reinterpret_cast<const char*>(glGetString(GL_RENDERER)),
        median_after_warmup(r.frame_cpu_ms));
}

}  // namespace

constexpr const char* kProbeText = "Prefill Lab: prefill, chunk, KV cache";

ScaleProbe probe_sizes(const ViewerState& state) {
    ScaleProbe p;
    p.font = ImGui::GetFontSize();
    p.frame_h = ImGui::GetFrameHeight();
    p.text_w = ImGui::CalcTextSize(kProbeText).x;
    p.button_w = state.reset_button_w;
    p.button_h = state.reset_button_h;
    return p;
}

void print_run_report(const RunReport& r) {
    if (r.lesson && r.state.print_checks) report_lesson(r);
    if (r.state.print_checks) report_text(r);
    if (r.headless && r.measure_scale) {
        report_scale(r);
    } else if (r.headless || r.opt.frames > 0) {
        report_layout(r);
    }
    if (r.headless || r.opt.frames > 0) report_readability(r);
    if (r.headless && r.state.scene == Scene::kMask) report_mask_facts(r);
    if (r.opt.print_command) report_command(r);
    if (r.headless && r.state.scene == Scene::kKv && r.state.serving_view && r.snap.serving.ready)
        report_kv_pool(r);
    if (r.headless || r.scripted_keys) report_cursor(r);
    if (r.target != nullptr) save_screenshot(r);
    if (r.opt.report_frame_time && !r.frame_ms.empty()) report_frame_time(r);
}

}  // namespace plab::viewer
