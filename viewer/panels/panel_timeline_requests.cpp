// Panel 5, requests view: several requests through one engine, on one time axis.
//
// What it teaches (lessons/05-ttft-is-not-prefill.md, for a serving engine):
// with several requests, a request's time to first token also holds the time
// it waited — for a place in a step's token budget, or for blocks in the pool
// — and its prefill chunks share steps with other requests' decode tokens
// (one forward pass per step, the weights read once for all of them). A
// preempted request computes its tokens again, which its TTFT or its later
// tokens pay for. Spans are the engine's steps (StepRecord times) and what
// each request computed in them ("kv append" trace events); TTFT and finish
// are the Request's own times (serving_scenario.h).
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "panels/layout_probe.h"
#include "panels/panels.h"
#include "panels/ui_axis.h"
#include "panels/ui_colours.h"
#include "panels/ui_format.h"
#include "panels/ui_playback.h"
#include "panels/ui_scale.h"
#include "panels/ui_widgets.h"

namespace plab::viewer {
namespace {

std::string span_kind(const ServingSpan& s) {
    return s.decode ? "decode token" : s.recompute ? "recompute chunk" : "prefill chunk";
}

ImU32 span_colour(const ServingSpan& s) {
    return s.decode ? colour::kDecode : s.recompute ? colour::kRecompute : colour::kChunk;
}

constexpr ImU32 kWaiting = IM_COL32(110, 110, 120, 255);  // a request's line, arrival -> finish
constexpr ImU32 kLater = IM_COL32(15, 15, 18, 150);       // veil over steps after the cursor
constexpr ImU32 kCursor = IM_COL32(255, 255, 255, 140);   // the step in view

// What each mark means (the layout check finds an entry for every colour drawn).
void draw_legend() {
    legend_entry(colour::kChunk, 0, "prefill chunk", "Prompt tokens computed in one engine step.");
    legend_entry(colour::kDecode, 0, "decode token", "One new token in one engine step.");
    legend_entry(colour::kRecompute, 0, "recomputed chunk",
                 "Tokens computed again after a preemption gave the request's blocks back.");
    legend_entry(kWaiting, 0, "in the engine",
                 "The thin line: from the request's arrival to its last token, waiting or "
                 "running.");
    legend_entry(IM_COL32_WHITE, 0, "first token (diamond), finish (bar)",
                 "White diamond: the first new token (its TTFT ends there). White bar: the last "
                 "token; its blocks go back to the pool.");
    legend_entry(colour::kBad, 0, "preempted (cross)",
                 "The pool had no block for a running request: the newest running one gave its "
                 "blocks back and waits.");
    legend_entry(kCursor, 0, "step in view",
                 "The vertical line: the end of the step the counter shows; steps after it are "
                 "dimmed.");
    legend_entry(kLater, 0, "after the step in view (dimmed)",
                 "Steps the right arrow has not reached yet.", false, colour::kChunk);
}

std::string others_in_step(const ServingStage& st, int request) {
    std::string s;
    for (int id : st.record.requests)
        if (id != request) s += (s.empty() ? "" : ", ") + std::to_string(id);
    return s.empty() ? "alone in its step" : "in one forward pass with request(s) " + s;
}

// 1. One row of numbers per request.
void draw_table(const ServingSnapshot& sv) {
    // Columns as wide as their text when the panel has room; else equal shares, each cell
    // wrapped between words (a narrow panel: lesson mode, a projector's scale).
    const char* heads[] = {"request", "prompt",   "prefix hit", "computed",
                           "TTFT",    "ITL mean", "end to end", "preempted"};
    float natural = 0;
    for (const char* h : heads)
        natural += std::max(text_width(h), text_width("99.99 ms")) +
                   2 * ImGui::GetStyle().CellPadding.x + 1;
    const bool fits = natural <= ImGui::GetContentRegionAvail().x;
    if (!ImGui::BeginTable("requests", 8,
                           ImGuiTableFlags_Borders | (fits ? ImGuiTableFlags_SizingFixedFit
                                                           : ImGuiTableFlags_SizingStretchSame)))
        return;
    if (fits) {
        for (const char* h : heads) ImGui::TableSetupColumn(h);
        ImGui::TableHeadersRow();
    } else {
        ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
        for (const char* h : heads) {
            ImGui::TableNextColumn();
            wrapped_text(h);
        }
    }
    auto cell = [&](const std::string& text, const std::string& tip) {
        if (fits)
            text_with_tip(text, tip);
        else
            wrapped_with_tip(text, tip);
    };
    for (std::size_t id = 0; id < sv.requests.size(); ++id) {
        const ServingRequestInfo& r = sv.requests[id];
        ImGui::PushID(static_cast<int>(id));
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        line_text(std::to_string(id), request_colour(static_cast<int>(id)));
        item_tooltip(r.label + ". Output: " + token_label(r.output_text));
        ImGui::TableNextColumn();
        cell(std::to_string(r.n_prompt) + " tokens",
             "Prompt length; " + std::to_string(r.shared_prefix) +
                 " tokens in common with another request's prompt.");
        ImGui::TableNextColumn();
        cell(std::to_string(r.record.cached_tokens) + " tokens",
             "Prompt tokens found in the prefix cache at its first admission (" +
                 std::to_string(r.record.hit_blocks) + " full blocks hit, " +
                 std::to_string(r.record.miss_blocks) +
                 " missed): their K/V were not computed again.");
        ImGui::TableNextColumn();
        cell(std::to_string(r.record.computed_tokens) + " tokens",
             "Tokens run through the model for it, recomputation after a preemption "
             "included (Request::computed_tokens).");
        ImGui::TableNextColumn();
        cell(format_us(r.latency.ttft_ms * 1000),
             "Time to first token: arrival -> first new token, waiting for a place in "
             "a step included.");
        ImGui::TableNextColumn();
        cell(format_us(r.latency.itl_mean_ms * 1000),
             "Mean gap between consecutive new tokens (inter-token latency).");
        ImGui::TableNextColumn();
        cell(format_us(r.latency.e2e_ms * 1000), "Arrival -> last new token.");
        ImGui::TableNextColumn();
        cell(std::to_string(r.record.preemptions) + "x",
             "Times the pool ran out and this request gave its blocks back, to be "
             "computed again from its tokens.");
        ImGui::PopID();
    }
    probe_table("requests");
    ImGui::EndTable();
}

// The time axis and the request lanes of one frame.
struct RequestsChart {
    ImDrawList* dl = nullptr;
    float font = 0;
    ImVec2 o{};                    // top-left: lane names on the left, the axis above
    float label_w = 0, width = 0;  // the lane names' column; the time axis, pixels
    double t_begin = 0, span = 1;  // the first arrival; first arrival to last finish, us
    float top = 0, lane_h = 0;     // the first lane's top; a lane's height
    int stages_done = 0;           // the step in view (the cursor)
    ImVec2 mouse{};                // the pointer

    float x_of(double us) const {
        return o.x + label_w + static_cast<float>((us - t_begin) / span) * width;
    }
};

// One request's lane.
struct RequestLane {
    std::size_t id = 0;
    int rid = 0;                     // id as an int
    float y = 0, mid = 0;            // the lane's top and middle
    std::string* hovered = nullptr;  // the tooltip of what is under the pointer
};

// 2. Time axis: the engine's clock, first arrival to last finish.
RequestsChart requests_chart(const ServingSnapshot& sv) {
    RequestsChart c;
    double t_end = 0;
    c.t_begin = sv.requests.front().record.arrival_us;
    for (const ServingRequestInfo& r : sv.requests) {
        c.t_begin = std::min(c.t_begin, r.record.arrival_us);
        t_end = std::max(t_end, r.record.finish_us);
    }
    c.span = std::max(1.0, t_end - c.t_begin);
    c.font = ImGui::GetFontSize();
    c.label_w = c.font * 6;
    c.o = ImGui::GetCursorScreenPos();
    c.width = ImGui::GetContentRegionAvail().x - c.label_w - c.font;
    c.dl = ImGui::GetWindowDrawList();
    return c;
}

// The request's boxes in engine step k, dimmed after the cursor.
void draw_lane_boxes(const RequestsChart& c, ChartProbe& chart, const ServingStage& st,
                     std::size_t k, const RequestLane& lane) {
    ImDrawList* dl = c.dl;
    const float y = lane.y, lane_h = c.lane_h;
    const ImVec2 mouse = c.mouse;
    const float x0 = c.x_of(st.record.start_us);
    const float x1 = std::max(x0 + 2.0f, c.x_of(st.record.start_us + st.record.us));
    for (const ServingSpan& s : st.spans) {
        if (s.request != lane.rid) continue;
        const ImVec2 a(x0, y + 4), b(x1, y + lane_h - 5);
        dl->AddRectFilled(a, b, span_colour(s));
        chart.mark(span_colour(s));
        if (x1 - x0 >= 6) dl->AddRect(a, b, IM_COL32(20, 20, 20, 200));  // box per step
        if (static_cast<int>(k) > c.stages_done) {
            dl->AddRectFilled(a, b, kLater);  // after the cursor
            chart.mark(kLater);
        }
        if (mouse.x >= x0 && mouse.x <= x1 && mouse.y >= y && mouse.y < y + lane_h)
            *lane.hovered = "request " + std::to_string(lane.id) + ", step " + std::to_string(k) +
                            ": " + span_kind(s) + ", positions " + std::to_string(s.first_pos) +
                            ".." + std::to_string(s.first_pos + s.n_pos - 1) + " (" +
                            std::to_string(s.n_pos) + " tokens), " + others_in_step(st, lane.rid) +
                            "\nstep from " + format_us(st.record.start_us - c.t_begin) +
                            ", lasting " + format_us(st.record.us) + "; the step ran " +
                            std::to_string(st.record.prefill_tokens) + " prefill and " +
                            std::to_string(st.record.decode_tokens) + " decode tokens";
    }
}

// A red cross where engine step k preempted the request.
void draw_lane_preemptions(const RequestsChart& c, ChartProbe& chart, const ServingStage& st,
                           std::size_t k, const RequestLane& lane) {
    ImDrawList* dl = c.dl;
    const float y = lane.y, lane_h = c.lane_h;
    const ImVec2 mouse = c.mouse;
    for (int p : st.record.preempted) {
        if (p != lane.rid) continue;
        const float x = c.x_of(st.record.start_us);
        dl->AddLine(ImVec2(x - px(5), y + 3), ImVec2(x + px(5), y + lane_h - 3), colour::kBad,
                    px(3));
        dl->AddLine(ImVec2(x + px(5), y + 3), ImVec2(x - px(5), y + lane_h - 3), colour::kBad,
                    px(3));
        chart.mark(colour::kBad);
        if (std::abs(mouse.x - x) < 6 && mouse.y >= y && mouse.y < y + lane_h)
            *lane.hovered = "request " + std::to_string(lane.id) + " preempted in step " +
                            std::to_string(k) +
                            ": the pool had no block for a running request, so the newest "
                            "running one gave all its blocks back; it waits and computes its "
                            "tokens again (red boxes).";
    }
}

// The first token (a diamond: its TTFT ends there) and the finish (a bar).
void draw_lane_marks(const RequestsChart& c, ChartProbe& chart, const ServingRequestInfo& r,
                     const RequestLane& lane) {
    ImDrawList* dl = c.dl;
    const float y = lane.y, mid = lane.mid, lane_h = c.lane_h;
    const ImVec2 mouse = c.mouse;
    if (!r.record.token_us.empty()) {
        const float x = c.x_of(r.record.token_us.front());
        dl->AddQuad(ImVec2(x, y + 2), ImVec2(x + px(6), mid), ImVec2(x, y + lane_h - 2),
                    ImVec2(x - 6, mid), IM_COL32_WHITE, px(2.0f));
        chart.mark(IM_COL32_WHITE);
        if (std::abs(mouse.x - x) < 7 && mouse.y >= y && mouse.y < y + lane_h)
            *lane.hovered = "request " + std::to_string(lane.id) + "'s first token at " +
                            format_us(r.record.token_us.front() - c.t_begin) + ": TTFT " +
                            format_us(r.latency.ttft_ms * 1000) +
                            " = waiting for a place in a step + its prefill chunks (fewer with a "
                            "prefix hit) + sampling.";
    }
    const float xf = c.x_of(r.record.finish_us);
    dl->AddLine(ImVec2(xf, y + 2), ImVec2(xf, y + lane_h - 2), IM_COL32_WHITE, px(3.0f));
    if (std::abs(mouse.x - xf) < 5 && mouse.y >= y && mouse.y < y + lane_h)
        *lane.hovered = "request " + std::to_string(lane.id) + " finished at " +
                        format_us(r.record.finish_us - c.t_begin) + " after " +
                        std::to_string(r.record.token_us.size()) +
                        " new tokens; its blocks went back "
                        "to the pool (named ones stay cached).";
}

// 3. One lane per request: waiting line, step boxes, preemptions, first token, finish.
//    Returns the tooltip of what is under the pointer ("" = nothing).
std::string draw_request_lanes(const RequestsChart& c, ChartProbe& chart,
                               const ServingSnapshot& sv) {
    std::string hovered;
    for (std::size_t id = 0; id < sv.requests.size(); ++id) {
        const ServingRequestInfo& r = sv.requests[id];
        RequestLane lane;
        lane.id = id;
        lane.rid = static_cast<int>(id);
        lane.y = c.top + id * c.lane_h;
        lane.mid = lane.y + c.lane_h * 0.5f;
        lane.hovered = &hovered;
        chart.label(c.dl, ImVec2(c.o.x, lane.y + c.font * 0.3f), request_colour(lane.rid),
                    "request " + std::to_string(id));
        c.dl->AddLine(ImVec2(c.x_of(r.record.arrival_us), lane.mid),
                      ImVec2(c.x_of(r.record.finish_us), lane.mid), kWaiting, px(1.0f));
        chart.mark(kWaiting);
        for (std::size_t k = 1; k < sv.stages.size(); ++k) {
            draw_lane_boxes(c, chart, sv.stages[k], k, lane);
            draw_lane_preemptions(c, chart, sv.stages[k], k, lane);
        }
        draw_lane_marks(c, chart, r, lane);
    }
    return hovered;
}

}  // namespace

void draw_timeline_requests(const Snapshot& snap, ViewerState& state) {
    const ServingSnapshot& sv = snap.serving;
    const ProbeScope scope("timeline requests");
    wrapped_text("Timeline of four requests through one engine");
    help_marker(
        "Lesson 5 - TTFT is not prefill (lessons/05-ttft-is-not-prefill.md), for several "
        "requests.\n\nEach lane is one request, on the engine's clock. Boxes are the engine "
        "steps it took part in: orange a prefill chunk, green a decode token, red a chunk "
        "computed again after a preemption. A step runs all its requests in one forward pass. "
        "The diamond is its first token (TTFT from its arrival), the bar its finish. The same "
        "scenario as the KV panel's shared pool.");
    hint_text(
        "Try: turn the prefix cache off in the KV panel's shared pool, then compare the TTFT of "
        "the requests that share the prompt.");
    if (!sv.error.empty()) {
        wrapped_text(sv.error, colour::kBad);
        return;
    }
    if (!sv.ready || sv.stages.size() < 2) return;
    draw_table(sv);
    draw_legend();

    // 2. Time axis: the engine's clock, first arrival to last finish.
    RequestsChart c = requests_chart(sv);
    const float font = c.font;
    const float axis_y = c.o.y + font * 0.4f;
    draw_time_axis(c.dl, c.o.x + c.label_w, c.width, axis_y, c.t_begin, c.span);

    // 3. One lane per request: waiting line, step boxes, first token, finish.
    const StepView step = step_view(snap, state);
    c.stages_done = step.stages_done;
    c.lane_h = font * 2.0f;
    c.top = axis_y + font * 2.0f;
    ChartProbe chart(
        "request lanes", ImVec2(c.o.x, c.top - 4),
        ImVec2(c.o.x + c.label_w + c.width + 8, c.top + sv.requests.size() * c.lane_h + 8), true);
    c.mouse = ImGui::GetIO().MousePos;
    const std::string hovered = draw_request_lanes(c, chart, sv);

    // 4. The step cursor: the end of the step in view.
    const float bottom = c.top + sv.requests.size() * c.lane_h;
    if (step.stages_done > 0 && step.stages_done <= sv.n_steps()) {
        const StepRecord& rec = sv.stages[static_cast<std::size_t>(step.stages_done)].record;
        const float x = c.x_of(rec.start_us + rec.us);
        c.dl->AddLine(ImVec2(x, c.top - 4), ImVec2(x, bottom), kCursor, px(1.5f));
        chart.mark(kCursor);
    }
    ImGui::SetCursorScreenPos(ImVec2(c.o.x, bottom + 6));
    ImGui::Dummy(ImVec2(1, 1));
    if (!hovered.empty() && ImGui::IsWindowHovered()) {
        tooltip(hovered);
    }
    wrapped_text(
        "Hover a box, a diamond (first token), a bar (finish) or a red cross (preemption). "
        "Right arrow: one engine step (the line marks the step in view; later steps are dimmed).");
}

}  // namespace plab::viewer
