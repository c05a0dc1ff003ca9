// Panel 5, timeline: one request from arrival to its last token.
//
// What it teaches (lessons/05-ttft-is-not-prefill.md): time to first token
// (TTFT) runs from the request's arrival to the delivery of its first token —
// tokenization, copies, every prefill chunk, sampling, delivery. Prefill is
// only one part of it, and decode steps come after. The spans are the engine's
// Trace of generate(); TTFT and prefill time are its GenerateResult numbers.
#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "panels/layout_probe.h"
#include "panels/panels.h"
#include "panels/ui_axis.h"
#include "panels/ui_colours.h"
#include "panels/ui_format.h"
#include "panels/ui_scale.h"
#include "panels/ui_widgets.h"

namespace plab::viewer {
namespace {

// Lanes in the order a request passes through them; unknown names go last.
std::vector<std::string> lanes_of(const std::vector<TraceEvent>& events) {
    std::vector<std::string> lanes = {
        "request", "queue",         "tokenize",   "allocate KV cache",
        "prefill", "prefill chunk", "kv append",  "copy logits to host",
        "sample",  "deliver",       "decode step"};
    std::vector<std::string> used;
    for (const std::string& l : lanes)
        if (std::any_of(events.begin(), events.end(),
                        [&](const TraceEvent& e) { return e.name == l; }))
            used.push_back(l);
    for (const TraceEvent& e : events)
        if (std::find(used.begin(), used.end(), e.name) == used.end()) used.push_back(e.name);
    return used;
}

constexpr ImU32 kRequestLane = IM_COL32(130, 130, 150, 255);
constexpr ImU32 kOtherLane = IM_COL32(200, 120, 200, 255);  // tokenize, copies, sample, ...
constexpr ImU32 kTtftBar = IM_COL32(255, 110, 110, 255);

ImU32 lane_colour(const std::string& name) {
    if (name == "prefill" || name == "prefill chunk") return colour::kChunk;
    if (name == "kv append") return colour::kCached;
    if (name == "decode step") return colour::kDecode;
    if (name == "request") return kRequestLane;
    return kOtherLane;
}

// What each colour of the lanes and the brackets means (recorded: the layout check
// finds an entry for every colour the chart drew).
void draw_legend() {
    legend_entry(kRequestLane, 0, "the whole request",
                 "From its arrival to its last token (the request span).");
    legend_entry(colour::kChunk, 0, "prefill (and its chunks)",
                 "The prefill span and each prefill chunk inside it; also the prefill bracket.");
    legend_entry(colour::kCached, 0, "kv append",
                 "K and V of a chunk's positions written into the cache, one event per layer.");
    legend_entry(colour::kDecode, 0, "decode step", "One new token each, after the first.");
    legend_entry(kOtherLane, 0, "other stages",
                 "Queue, tokenize, allocate, copy logits, sample, deliver: in the way of the "
                 "first token, but not prefill.");
    legend_entry(kTtftBar, 0, "TTFT bracket",
                 "Arrival -> first token delivered: longer than the prefill inside it.");
}

std::string event_tip(const TraceEvent& e) {
    std::string tip = e.name + " (" + e.category + ")\nstart " + format_us(e.start_us) +
                      ", duration " + format_us(e.dur_us);
    for (const auto& [k, v] : e.args) tip += "\n" + k + ": " + v;
    return tip;
}

// The time axis and the lanes of one frame: x of a time, y of a lane.
struct TimelineChart {
    ImDrawList* dl = nullptr;
    float font = 0;
    ImVec2 o{};                    // top-left: lane names on the left, the axis above the lanes
    float label_w = 0;             // the lane names' column
    float width = 0;               // the time axis, pixels
    double t_begin = 0, span = 1;  // the request's arrival; the time shown, us
    float top = 0, lane_h = 0;     // the first lane's top; a lane's height

    float x_of(double us) const {
        return o.x + label_w + static_cast<float>((us - t_begin) / span) * width;
    }
};

void draw_timeline_title() {
    wrapped_text("Timeline of one request: TTFT is not prefill time");
    help_marker(
        "Lesson 5 - TTFT is not prefill (lessons/05-ttft-is-not-prefill.md).\n\nTime to "
        "first token runs from the request's arrival until its first token is delivered: "
        "tokenizing, copying in, every prefill chunk, sampling, delivery. Prefill is one "
        "span inside it. Decode steps (one token each) come after. Hover a span for its "
        "times and arguments; the same trace opens in Perfetto (plab generate --trace).");
    hint_text(
        "Try: set chunk size 1 (one token per chunk) and watch prefill grow inside TTFT; zoom to "
        "the first token.");
}

void draw_timeline_inputs(ViewerState& state) {
    const float em = ImGui::GetFontSize();
    ImGui::SetNextItemWidth(em * 8);
    if (ImGui::SliderInt("new tokens", &state.new_tokens, 1, 32)) state.dirty.timeline = true;
    probe_control("new tokens");
    item_tooltip(
        "Tokens the request generates: the first from the prefill, the rest by decode "
        "steps.");
    flow(checkbox_width("zoom to first token"));
    ImGui::Checkbox("zoom to first token", &state.timeline_to_first_token);
    probe_control("zoom to first token");
    item_tooltip("Show only the request's start up to the first token's delivery.");
}

// 1. The two numbers, and what lies between them (flowing: as many on a line as fit);
//    the output text under them.
void draw_timeline_numbers(const TimelineSnapshot& tl) {
    const float em = ImGui::GetFontSize();
    auto number = [&](const std::string& text, const char* tip, bool first = false) {
        if (!first) flow(text_width(text), em * 2);
        text_with_tip(text, tip);
    };
    number("TTFT " + format_us(tl.ttft_us),
           "Time to first token: request arrival -> first token delivered (engine's "
           "GenerateResult::ttft_us).",
           true);
    number("prefill " + format_us(tl.prefill_us),
           "Wall time of the prefill chunks only (GenerateResult::prefill_us).");
    number("TTFT - prefill = " + format_us(tl.ttft_us - tl.prefill_us),
           "Everything in the first token's way that is not prefill: tokenizing, copies, "
           "sampling, delivery.");
    number(std::to_string(tl.n_prompt) + " prompt tokens, plan " + tl.plan,
           "Prompt length in tokens and the chunk plan of its prefill.");
    // The output word by word (each shown as token_label shows it), so it wraps between words.
    std::string output = "output:";
    for (std::size_t i = 0; i <= tl.output_text.size();) {
        std::size_t j = tl.output_text.find(' ', i);
        if (j == std::string::npos) j = tl.output_text.size();
        if (j > i) output += " " + token_label(tl.output_text.substr(i, j - i));
        i = j + 1;
    }
    wrapped_with_tip(output, "The generated text (greedy), on backend " + tl.backend + ".",
                     dim_colour());
}

// 2. The time axis: from the request's arrival to the last span's end (or, zoomed, a
//    little past the first token), the lane names' column as wide as the longest name.
TimelineChart timeline_chart(const TimelineSnapshot& tl, const ViewerState& state,
                             const std::vector<std::string>& lanes) {
    TimelineChart c;
    double t_end = 0;
    for (const TraceEvent& e : tl.events) t_end = std::max(t_end, e.start_us + e.dur_us);
    if (const auto it = std::find_if(tl.events.begin(), tl.events.end(),
                                     [](const TraceEvent& e) { return e.name == "request"; });
        it != tl.events.end())
        c.t_begin = it->start_us;
    if (state.timeline_to_first_token) t_end = c.t_begin + tl.ttft_us * 1.08;
    c.span = std::max(1.0, t_end - c.t_begin);
    const float font = ImGui::GetFontSize();
    c.font = font;
    c.label_w = font * 6;  // the longest lane name, and a gap
    for (const std::string& l : lanes) c.label_w = std::max(c.label_w, text_width(l) + font);
    for (const char* l : {"TTFT", "prefill"}) c.label_w = std::max(c.label_w, text_width(l) + font);
    c.o = ImGui::GetCursorScreenPos();
    c.width = ImGui::GetContentRegionAvail().x - c.label_w - font;
    c.dl = ImGui::GetWindowDrawList();
    return c;
}

// 3. One lane per kind of span, each span a box. Returns the span under the pointer, or -1.
int draw_timeline_lanes(const TimelineChart& c, ChartProbe& chart, const TimelineSnapshot& tl,
                        const std::vector<std::string>& lanes) {
    ImDrawList* dl = c.dl;
    const ImVec2 o = c.o;
    const float top = c.top, lane_h = c.lane_h;
    dl->PushClipRect(ImVec2(o.x, top - 2),
                     ImVec2(o.x + c.label_w + c.width + 2, top + lanes.size() * lane_h + 2), true);
    for (size_t l = 0; l < lanes.size(); ++l) {
        const float y = top + l * lane_h;
        chart.label(dl, ImVec2(o.x, y + c.font * 0.25f), IM_COL32_WHITE, lanes[l]);
        dl->AddLine(ImVec2(o.x + c.label_w, y + lane_h - 1),
                    ImVec2(o.x + c.label_w + c.width, y + lane_h - 1), IM_COL32(60, 60, 66, 255));
    }
    int hovered = -1;
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    for (size_t i = 0; i < tl.events.size(); ++i) {
        const TraceEvent& e = tl.events[i];
        const size_t l = std::find(lanes.begin(), lanes.end(), e.name) - lanes.begin();
        const float y = top + l * lane_h;
        const float x0 = c.x_of(e.start_us);
        const float x1 = std::max(x0 + 2.0f, c.x_of(e.start_us + e.dur_us));
        dl->AddRectFilled(ImVec2(x0, y + 3), ImVec2(x1, y + lane_h - 4), lane_colour(e.name));
        chart.mark(lane_colour(e.name));
        dl->AddRect(ImVec2(x0, y + 3), ImVec2(x1, y + lane_h - 4), IM_COL32(20, 20, 20, 160));
        if (mouse.x >= x0 && mouse.x <= x1 && mouse.y >= y && mouse.y < y + lane_h)
            hovered = static_cast<int>(i);
    }
    dl->PopClipRect();
    return hovered;
}

// 4. TTFT and prefill brackets from `y` down, as two different spans. Returns the y
//    under them.
float draw_timeline_brackets(const TimelineChart& c, ChartProbe& chart, const TimelineSnapshot& tl,
                             float y) {
    auto bracket = [&](double from, double to, ImU32 col, const std::string& text) {
        const float x0 = c.x_of(from), x1 = std::min(c.x_of(to), c.o.x + c.label_w + c.width);
        c.dl->AddLine(ImVec2(x0, y), ImVec2(x1, y), col, px(3.0f));
        c.dl->AddLine(ImVec2(x0, y - px(6)), ImVec2(x0, y + px(6)), col, px(3.0f));
        c.dl->AddLine(ImVec2(x1, y - px(6)), ImVec2(x1, y + px(6)), col, px(3.0f));
        chart.label(c.dl, ImVec2(c.o.x, y - c.font * 0.5f), col, text);
        chart.mark(col);
        y += c.font * 1.5f;
    };
    bracket(c.t_begin, c.t_begin + tl.ttft_us, kTtftBar, "TTFT");
    if (const auto p = std::find_if(tl.events.begin(), tl.events.end(),
                                    [](const TraceEvent& e) { return e.name == "prefill"; });
        p != tl.events.end())
        bracket(p->start_us, p->start_us + p->dur_us, colour::kChunk, "prefill");
    return y;
}

}  // namespace

void draw_timeline(const Snapshot& snap, ViewerState& state) {
    draw_serving_toggle(state);
    if (state.serving_view) {
        draw_timeline_requests(snap, state);
        return;
    }
    const TimelineSnapshot& tl = snap.timeline;
    const ProbeScope scope("timeline panel");
    draw_timeline_title();
    draw_timeline_inputs(state);
    if (!tl.error.empty()) {
        wrapped_text(tl.error, colour::kBad);
        return;
    }
    if (!tl.ready || tl.events.empty()) return;
    if (tl.mask != "causal") {
        text_with_tip("mask " + tl.mask,
                      "The request ran under this attention mask (--mask, or the Mask panel).");
        if (!tl.refusal.empty())
            wrapped_text(tl.refusal + " (ran plan " + tl.plan + " instead)", colour::kBad);
    }

    // 1. The numbers, the output and the legend.
    draw_timeline_numbers(tl);
    draw_legend();

    // 2. Time axis.
    const std::vector<std::string> lanes = lanes_of(tl.events);
    TimelineChart c = timeline_chart(tl, state, lanes);
    const float font = c.font;
    const float axis_y = c.o.y + font * 0.2f;
    draw_time_axis(c.dl, c.o.x + c.label_w, c.width, axis_y, c.t_begin, c.span);

    // 3. One lane per kind of span.
    c.lane_h = font * 1.6f;
    c.top = axis_y + font * 2.0f;
    ChartProbe chart(
        "timeline lanes", ImVec2(c.o.x, c.top - 2),
        ImVec2(c.o.x + c.label_w + c.width + 2, c.top + lanes.size() * c.lane_h + font * 4), true);
    const int hovered = draw_timeline_lanes(c, chart, tl, lanes);

    // 4. TTFT and prefill brackets under the lanes, as two different spans.
    const float y =
        draw_timeline_brackets(c, chart, tl, c.top + lanes.size() * c.lane_h + font * 0.6f);
    ImGui::SetCursorScreenPos(ImVec2(c.o.x, y));
    ImGui::Dummy(ImVec2(1, 1));
    if (hovered >= 0 && ImGui::IsWindowHovered()) tooltip(event_tip(tl.events[hovered]));
    wrapped_text(
        "Hover a span for its start, duration and arguments (kv append: layer, positions, "
        "blocks). The TTFT bar starts at the request's arrival; the prefill bar covers only "
        "the chunks.");
}

}  // namespace plab::viewer
