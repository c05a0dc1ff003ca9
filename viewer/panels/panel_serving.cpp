// Panel 6: Serving — a Poisson workload replayed by plab::serve on the virtual clock.
//
// What it teaches (the serving lessons: continuous batching, chunked prefill
// next to other requests' decodes, the metrics and where each clock starts
// and stops): one time axis for everything a server does. Each request's row
// shows its queued time, every step it was in (a prompt chunk or one decode
// token), its first token, its preemptions and — with a network delay — each
// token on its way to the client, overlapping the engine's next step. Below,
// each step's tokens against the token budget and the KV pool's blocks; on
// the right, the TTFT and ITL distributions with the percentiles the report
// states. Changing the policy, the rate or the budget re-runs the replay.
// Every number is the ServeReport's (serving_replay.h); nothing is re-derived.
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
#include "panels/ui_scale.h"
#include "panels/ui_widgets.h"

namespace plab::viewer {
namespace {

constexpr ImU32 kQueued = IM_COL32(150, 150, 165, 255);     // waiting for its first step
constexpr ImU32 kDelivery = IM_COL32(90, 170, 255, 110);    // a token on the wire
constexpr ImU32 kTokenMark = IM_COL32(255, 255, 255, 255);  // first token sampled
constexpr ImU32 kClientMark = IM_COL32(90, 200, 255, 255);  // first token at the client
constexpr ImU32 kAxis = IM_COL32(180, 180, 180, 255);
constexpr ImU32 kBudget = IM_COL32(230, 230, 230, 255);

std::string ms(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f ms", v);
    return buf;
}

// Maps engine time (us) to screen x.
struct Axis {
    float x0 = 0, width = 1;
    double end_us = 1;
    float x(double us) const { return x0 + static_cast<float>(us / end_us) * width; }
};

bool hovered(ImVec2 a, ImVec2 b) {
    return ImGui::IsMouseHoveringRect(a, b, false);
}

// 1. The inputs: policy, rate, budget, delay, requests. A change re-runs the
// replay when the slider is let go (a re-run takes about 0.1-0.4 s, too long
// for every frame of a drag).
// "The scheduling policy (--policy). NAME: what it does. ..." from the one table.
std::string policy_tooltip() {
    std::string s = "The scheduling policy (--policy).";
    for (const PolicyRow& p : kPolicies) s += std::string(" ") + p.name + ": " + p.what + ".";
    return s;
}

void draw_inputs(const ReplaySnapshot& rp, ViewerState& state) {
    ReplayOptions& o = state.replay;
    bool changed = false;
    const float em = ImGui::GetFontSize();
    ImGui::SetNextItemWidth(em * 8);
    if (ImGui::BeginCombo("policy", policy_name(o.policy).c_str())) {
        for (const PolicyRow& p : kPolicies)
            if (ImGui::Selectable(p.name, p.policy == o.policy)) {
                o.policy = p.policy;
                changed = true;
            }
        ImGui::EndCombo();
    }
    probe_control("policy");
    item_tooltip(policy_tooltip());
    flow(labelled_width(em * 9, "rate /s"));
    ImGui::SetNextItemWidth(em * 9);
    float rate = static_cast<float>(o.rate);
    if (ImGui::SliderFloat("rate /s", &rate, 10.f, 1000.f, "%.0f", ImGuiSliderFlags_Logarithmic))
        o.rate = rate;
    probe_control("rate /s");
    changed = changed || ImGui::IsItemDeactivatedAfterEdit();
    item_tooltip(
        "Requests per second arriving (--rate): Poisson arrivals, exponential gaps, the same "
        "seed. A higher rate means more requests in flight at once: longer queues, fuller "
        "steps, a fuller KV pool.");
    flow(labelled_width(em * 8, "token budget"));
    ImGui::BeginDisabled(!policy_row(o.policy).chunks_prompts);
    ImGui::SetNextItemWidth(em * 8);
    ImGui::SliderInt("token budget", &o.token_budget, 8, 256);
    probe_control("token budget");
    changed = changed || ImGui::IsItemDeactivatedAfterEdit();
    ImGui::EndDisabled();
    item_tooltip(
        "Token budget (--token-budget, vLLM's max_num_batched_tokens): the most tokens one "
        "step computes, decode tokens first, then prompt chunks in what is left. Only the "
        "chunked policy splits a prompt; the others prefill whole prompts (budget = the "
        "model's max_seq_len).");
    flow(labelled_width(em * 7, "network ms"));
    ImGui::SetNextItemWidth(em * 7);
    float delay = static_cast<float>(o.network_delay_ms);
    if (ImGui::SliderFloat("network ms", &delay, 0.f, 10.f, "%.1f")) o.network_delay_ms = delay;
    probe_control("network ms");
    changed = changed || ImGui::IsItemDeactivatedAfterEdit();
    item_tooltip(
        "One-way network delay to the client (--network-delay-ms). A token sampled by the "
        "engine reaches the client this much later; the engine does not wait for it, so the "
        "delivery overlaps its next step. The client's TTFT = the engine's TTFT + this delay.");
    flow(labelled_width(em * 6, "requests"));
    ImGui::SetNextItemWidth(em * 6);
    ImGui::SliderInt("requests", &o.requests, 1, 32);
    probe_control("requests");
    changed = changed || ImGui::IsItemDeactivatedAfterEdit();
    item_tooltip("Requests in the generated workload (--requests), one row each.");
    const std::string rerun = "re-run " + ms(rp.rerun_ms);
    flow(text_width(rerun));
    text_with_tip(rerun,
                  "Wall time of the last replay: generating the workload and serving it on the "
                  "virtual clock (every token computed by the real engine, backend " +
                      rp.backend +
                      "). The times drawn are the virtual clock's, not this: on it the backend "
                      "changes no time, so the replay uses the fast cpu backend.");
    help_marker(
        "Serving (lessons: continuous batching, chunked prefill, the metrics).\n"
        "Each row is one request: grey = queued (arrival -> its first step), orange = a "
        "prompt chunk, green = a decode token, red = a prompt chunk computed again after a "
        "preemption (red x). White tick: first token sampled (the engine's TTFT). Blue lane: "
        "each token on its way to the client; blue tick: the client has the first token.\n"
        "Times come from the virtual clock: each step costs what the cost model says, so a "
        "replay is the same to the byte for the same inputs.");
    if (changed) state.dirty.replay = true;
}

// 2. The summary numbers, each explained (flowing: as many on a line as fit).
void draw_summary(const ReplaySnapshot& rp) {
    const ServeSummary& s = rp.report.summary;
    auto item = [](const std::string& text, const std::string& tip, bool first = false) {
        if (!first) flow(text_width(text), ImGui::GetFontSize());
        text_with_tip(text, tip);
    };
    item("TTFT p50/p90/p99 " + ms(s.ttft_ms.p50) + " / " + ms(s.ttft_ms.p90) + " / " +
             ms(s.ttft_ms.p99),
         "Time to first token: from the request's arrival at the engine to its first "
         "new token sampled (queue + prefill), plus the network delay when one is set "
         "(the client's clock).",
         true);
    item("ITL " + ms(s.itl_ms.p50) + " / " + ms(s.itl_ms.p90) + " / " + ms(s.itl_ms.p99),
         "Inter-token latency: the gaps between consecutive new tokens of one request. A "
         "long prompt computed whole in one step stretches the gap of every request "
         "decoding beside it; chunked prefill keeps that step short.");
    item("TPOT p50 " + ms(s.tpot_ms.p50),
         "Time per output token after the first: (e2e - TTFT) / (new tokens - 1), the "
         "mean of one request's ITLs.");
    char buf[128];
    std::snprintf(buf, sizeof buf, "%.0f tok/s, %d steps, %lld preempted", s.output_tokens_per_s,
                  s.steps, s.preemptions);
    item(buf, "Workload: " + rp.workload +
                  ".\nOutput tokens per second over the run; engine steps (one forward pass over "
                  "every scheduled request each); preemptions (a request's KV blocks given back "
                  "when the pool was full, its tokens computed again later).");
}

// 2b. What each colour means (the layout check finds an entry for every colour drawn).
void draw_legend(const ReplaySnapshot& rp) {
    legend_entry(kQueued, 0, "queued", "Arrival at the engine -> its first step.");
    legend_entry(colour::kChunk, 0, "prompt chunk", "Prompt tokens computed in one step.");
    legend_entry(colour::kDecode, 0, "decode token",
                 "One new token in one step; in the charts on the right, the sorted values.");
    legend_entry(colour::kRecompute, 0, "recomputed chunk",
                 "Prompt tokens computed again after a preemption.");
    legend_entry(colour::kBad, 0, "preempted (x)", "Its KV blocks went back to the pool.");
    legend_entry(kTokenMark, 0, "first token sampled", "The engine's TTFT ends here.");
    if (rp.network_delay_ms > 0) {
        legend_entry(kDelivery, 0, "token to the client",
                     "Each token on the wire, overlapping the engine's next step.");
        legend_entry(kClientMark, 0, "first token at the client", "The client's TTFT ends here.");
    }
    legend_entry(colour::kCached, 0, "KV blocks in use", "Blocks held by running requests.");
    legend_entry(colour::kCachedFree, 0, "cached free blocks",
                 "Free to take, and a prefix-cache hit while they last.");
    legend_entry(kBudget, 0, "budget / pool size", "The token budget (dashed) and the pool size.");
    legend_entry(colour::kClose, 0, "p50 / p90 / p99",
                 "The report's percentiles, marked on the sorted values.");
}

// 3a. Requests x time: one row each. What one row's parts share: where the row is and
//     the chart its marks are recorded in.
struct ReplayLane {
    ImDrawList* dl = nullptr;
    ChartProbe* chart = nullptr;
    const ReplayRow* row = nullptr;
    float top = 0;     // the row's top
    float lane_b = 0;  // the bottom of its step lane (the delivery lane is under it)
    float row_h = 0;
};

// The row's label ("3: 120p"), its tooltip, and the queued bar: arrival at the engine ->
// its first step began.
void draw_replay_queued(const ReplayLane& l, const Axis& ax, float label_x) {
    const ReplayRow& row = *l.row;
    const float top = l.top, lane_b = l.lane_b;
    char label[48];
    std::snprintf(label, sizeof label, "%d: %dp", row.id, row.prompt_tokens);
    l.chart->label(l.dl, ImVec2(label_x, top), request_colour(row.id), label);
    if (hovered(ImVec2(label_x, top), ImVec2(ax.x0, top + l.row_h)))
        tooltipf(
            "request %d: prompt %d tokens (%d found in the prefix cache), %d new tokens, "
            "%d tokens computed, %d preemption(s)",
            row.id, row.prompt_tokens, row.cached_tokens, row.new_tokens, row.computed_tokens,
            row.preemptions);
    const float qa = ax.x(row.arrival_us), qb = ax.x(row.first_scheduled_us);
    const float mid = (top + lane_b) * 0.5f;
    l.dl->AddRectFilled(ImVec2(qa, mid - 1.5f), ImVec2(std::max(qb, qa + 1), mid + 1.5f), kQueued);
    l.chart->mark(kQueued);
    if (hovered(ImVec2(qa, top), ImVec2(std::max(qb, qa + 2), lane_b)))
        tooltipf(
            "request %d queued %.3f ms: from its arrival at the engine until its first "
            "step began (waiting for room in a step's token budget, a running slot or KV "
            "blocks). The queue is part of its TTFT.",
            row.id, (row.first_scheduled_us - row.arrival_us) / 1e3);
}

// Its steps, each a prompt chunk or a decode token (StepRecord.decode); a chunk after a
// preemption is computed again.
void draw_replay_spans(const ReplayLane& l, const Axis& ax) {
    const ReplayRow& row = *l.row;
    const float top = l.top, lane_b = l.lane_b;
    std::size_t next_preempt = 0;
    bool after_preemption = false;
    for (const ReplaySpan& s : row.spans) {
        while (next_preempt < row.preempted_us.size() &&
               row.preempted_us[next_preempt] <= s.start_us) {
            after_preemption = true;
            ++next_preempt;
        }
        const bool recompute = !s.decode && after_preemption;
        const ImU32 c = s.decode    ? colour::kDecode
                        : recompute ? colour::kRecompute
                                    : colour::kChunk;
        const float a = ax.x(s.start_us), b = std::max(ax.x(s.start_us + s.us), a + 1);
        l.dl->AddRectFilled(ImVec2(a, top + 1), ImVec2(b, lane_b), c);
        l.chart->mark(c);
        if (hovered(ImVec2(a, top), ImVec2(b, lane_b)))
            tooltipf("request %d, step %d: %s of %d token(s), %.3f ms on the virtual clock.\n%s",
                     row.id, s.step,
                     s.decode    ? "a decode token"
                     : recompute ? "a prompt chunk computed again after a preemption"
                                 : "a prompt chunk",
                     s.tokens, s.us / 1e3,
                     s.decode ? "Decode: its newest token fed back to sample the next one."
                              : "Prefill: prompt tokens computed into the KV cache; the step's "
                                "token budget decides how many.");
    }
}

// Preemptions (its blocks went back to the pool at the start of that step), and the
// first token sampled (the engine's TTFT ends there).
void draw_replay_marks(const ReplayLane& l, const Axis& ax) {
    const ReplayRow& row = *l.row;
    const float top = l.top, lane_b = l.lane_b;
    for (double t : row.preempted_us) {
        const float x = ax.x(t);
        l.dl->AddLine(ImVec2(x - px(4), top + 1), ImVec2(x + px(4), lane_b), colour::kBad, px(2.f));
        l.dl->AddLine(ImVec2(x - px(4), lane_b), ImVec2(x + px(4), top + 1), colour::kBad, px(2.f));
        l.chart->mark(colour::kBad);
        if (hovered(ImVec2(x - 5, top), ImVec2(x + 5, lane_b)))
            tooltipf(
                "request %d preempted: the pool had no free block for a running request, "
                "so the newest one gave its KV blocks back and waits at the front of the "
                "queue; its tokens are computed again (recompute).",
                row.id);
    }
    if (!row.token_us.empty()) {
        const float x = ax.x(row.token_us.front());
        l.dl->AddLine(ImVec2(x, top), ImVec2(x, lane_b + 1), kTokenMark, px(2.f));
        l.chart->mark(kTokenMark);
        if (hovered(ImVec2(x - 3, top), ImVec2(x + 3, lane_b)))
            tooltipf(
                "request %d: first token sampled at %.3f ms. TTFT at the engine = %.3f ms "
                "(arrival -> sampled: queue + prefill).",
                row.id, row.token_us.front() / 1e3, (row.token_us.front() - row.arrival_us) / 1e3);
    }
}

// Delivery: sampled -> at the client, overlapping the engine's next steps.
void draw_replay_delivery(const ReplayLane& l, const Axis& ax, double network_delay_ms) {
    const ReplayRow& row = *l.row;
    const double delay_us = network_delay_ms * 1e3;
    const float da = l.lane_b + 1, db = l.top + l.row_h - 1;
    for (double t : row.token_us)
        l.dl->AddRectFilled(ImVec2(ax.x(t), da), ImVec2(ax.x(t + delay_us), db), kDelivery);
    l.chart->mark(kDelivery);
    const float x = ax.x(row.client_first_token_us);
    l.dl->AddLine(ImVec2(x, da - 2), ImVec2(x, db + 1), kClientMark, px(2.f));
    l.chart->mark(kClientMark);
    if (hovered(ImVec2(ax.x(row.token_us.front()), da), ImVec2(x + 3, db)))
        tooltipf(
            "request %d: each token travels %.1f ms to the client while the engine "
            "already computes its next step (the stages overlap). The client has the "
            "first token at %.3f ms: its TTFT = %.3f ms.",
            row.id, network_delay_ms, row.client_first_token_us / 1e3,
            (row.client_first_token_us - row.arrival_us) / 1e3);
}

// The rows, one per request, from y0 down.
void draw_requests(ImDrawList* dl, const ReplaySnapshot& rp, const Axis& ax, float y0,
                   float row_h) {
    const float label_x = ax.x0 - ImGui::GetFontSize() * 4.2f;
    ChartProbe chart("requests x time", ImVec2(label_x, y0),
                     ImVec2(ax.x0 + ax.width + 1, y0 + row_h * rp.rows.size()), true);
    const bool delivery = rp.network_delay_ms > 0;
    for (const ReplayRow& row : rp.rows) {
        ReplayLane l;
        l.dl = dl;
        l.chart = &chart;
        l.row = &row;
        l.top = y0 + row.id * row_h;
        l.lane_b = l.top + row_h * (delivery ? 0.58f : 0.8f);
        l.row_h = row_h;
        draw_replay_queued(l, ax, label_x);
        draw_replay_spans(l, ax);
        draw_replay_marks(l, ax);
        if (delivery) draw_replay_delivery(l, ax, rp.network_delay_ms);
    }
}

// A chart's title on the line above it, shortened to the words that fit the axis.
void draw_title(ChartProbe& chart, ImDrawList* dl, const Axis& ax, float y,
                const std::string& title) {
    std::string t = title;
    while (text_width(t) > ax.width && t.find(' ') != std::string::npos)
        t = t.substr(0, t.rfind(' '));
    if (text_width(t) <= ax.width) chart.label(dl, ImVec2(ax.x0, y), kBudget, t);
}

// 3b. Each step's tokens, decode below prefill, against the token budget.
void draw_steps(ImDrawList* dl, const ReplaySnapshot& rp, const Axis& ax, float title_y, float y0,
                float h) {
    ChartProbe chart("tokens per step", ImVec2(ax.x0 - ImGui::GetFontSize() * 4.2f, title_y),
                     ImVec2(ax.x0 + ax.width + 1, y0 + h), true);
    int largest = 1;
    for (const StepRecord& s : rp.report.steps)
        largest = std::max(largest, s.prefill_tokens + s.decode_tokens);
    // The scale: the budget when steps come near it, else the largest step
    // (a budget of max_seq_len would flatten every bar); the line is drawn if in range.
    const double top_tokens = std::max(largest, std::min(rp.token_budget, largest * 2));
    auto y = [&](double tokens) { return y0 + h - static_cast<float>(tokens / top_tokens) * h; };
    for (const StepRecord& s : rp.report.steps) {
        const float a = ax.x(s.start_us), b = std::max(ax.x(s.start_us + s.us), a + 1);
        dl->AddRectFilled(ImVec2(a, y(s.decode_tokens)), ImVec2(b, y0 + h), colour::kDecode);
        dl->AddRectFilled(ImVec2(a, y(s.decode_tokens + s.prefill_tokens)),
                          ImVec2(b, y(s.decode_tokens)), colour::kChunk);
        chart.mark(colour::kDecode);
        chart.mark(colour::kChunk);
        if (hovered(ImVec2(a, y0), ImVec2(b, y0 + h)))
            tooltipf(
                "step %d: %d decode + %d prefill tokens = %d of a token budget of %d, %zu "
                "request(s) in one forward pass, %.3f ms.\nDecode tokens are scheduled first, "
                "then prompt chunks in what is left of the budget.",
                s.index, s.decode_tokens, s.prefill_tokens, s.decode_tokens + s.prefill_tokens,
                rp.token_budget, s.requests.size(), s.us / 1e3);
    }
    // Titles above the bars, where no bar or line reaches.
    const bool budget_shown = rp.token_budget <= top_tokens;
    const std::string label =
        "tokens per step" +
        (budget_shown ? ", token budget " + std::to_string(rp.token_budget) + " (dashed)"
                      : ", token budget " + std::to_string(rp.token_budget) + " (off scale)");
    if (budget_shown) {
        const float by = y(rp.token_budget);
        for (float x = ax.x0; x < ax.x0 + ax.width; x += 8)
            dl->AddLine(ImVec2(x, by), ImVec2(std::min(x + 4, ax.x0 + ax.width), by), kBudget);
        chart.mark(kBudget);
    }
    chart.label(dl, ImVec2(ax.x0 - ImGui::GetFontSize() * 4.2f, title_y), kAxis, "tokens");
    draw_title(chart, dl, ax, title_y, label);
}

// 3c. The KV pool after each step: blocks in use, cached free blocks, its size.
void draw_pool(ImDrawList* dl, const ReplaySnapshot& rp, const Axis& ax, float title_y, float y0,
               float h) {
    ChartProbe chart("KV pool per step", ImVec2(ax.x0 - ImGui::GetFontSize() * 4.2f, title_y),
                     ImVec2(ax.x0 + ax.width + 1, y0 + h), true);
    const double n = std::max(1, rp.pool_blocks);
    auto y = [&](double blocks) { return y0 + h - static_cast<float>(blocks / n) * h; };
    for (const StepRecord& s : rp.report.steps) {
        const float a = ax.x(s.start_us), b = std::max(ax.x(s.start_us + s.us), a + 1);
        dl->AddRectFilled(ImVec2(a, y(s.blocks_in_use)), ImVec2(b, y0 + h), colour::kCached);
        dl->AddRectFilled(ImVec2(a, y(s.blocks_in_use + s.cached_free_blocks)),
                          ImVec2(b, y(s.blocks_in_use)), colour::kCachedFree);
        chart.mark(colour::kCached);
        if (s.cached_free_blocks > 0) chart.mark(colour::kCachedFree);
        if (hovered(ImVec2(a, y0), ImVec2(b, y0 + h)))
            tooltipf(
                "after step %d: %d blocks in use, %d cached free, of %d in the pool (a block "
                "holds the K/V of %d positions in every layer). Cached free blocks hold K/V "
                "nobody uses now: free to take, and a prefix-cache hit while they last.",
                s.index, s.blocks_in_use, s.cached_free_blocks, rp.pool_blocks, rp.block_size);
    }
    dl->AddLine(ImVec2(ax.x0, y0), ImVec2(ax.x0 + ax.width, y0), kBudget);
    chart.mark(kBudget);
    const std::string label =
        "KV blocks after each step, of a pool of " + std::to_string(rp.pool_blocks) + " (top line)";
    chart.label(dl, ImVec2(ax.x0 - ImGui::GetFontSize() * 4.2f, title_y), kAxis, "blocks");
    draw_title(chart, dl, ax, title_y, label);
}

// 3d. A distribution as its sorted values (a CDF), with p50/p90/p99 marked. The marks'
//     labels sit in a band above the plot, one row each unless they fit side by side, so
//     no line of the plot crosses them and none leaves the frame.
void draw_cdf(ImDrawList* dl, const char* name, const std::vector<double>& v, const Percentiles& p,
              ImVec2 a, ImVec2 b, const char* tip) {
    const float font = ImGui::GetFontSize();
    ChartProbe chart(name, a, b, true);
    dl->AddRect(a, b, IM_COL32(90, 90, 100, 255));
    chart.label(dl, ImVec2(a.x + 4, a.y + 2), kAxis, name);
    if (v.empty()) return;
    const double hi = std::max(v.back(), 1e-9);
    const float x0 = a.x + 4, x1 = b.x - 4;
    auto x = [&](double val) { return x0 + static_cast<float>(val / hi) * (x1 - x0); };
    // 1. The labels' places: right of their mark, or left of it at the frame's edge; the
    //    first row where they touch no label already placed.
    const std::pair<const char*, double> marks[] = {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}};
    const float band = a.y + font * 1.4f;
    std::vector<LayoutBox> placed;
    std::vector<std::pair<ImVec2, std::string>> labels;
    int rows = 1;
    for (const auto& [what, value] : marks) {
        char buf[48];
        std::snprintf(buf, sizeof buf, "%s %.2f", what, value);
        const float w = text_width(buf), mx = x(value);
        const float lx = mx + 2 + w <= b.x - 2 ? mx + 2 : std::max(a.x + 2, mx - 2 - w);
        int row = 0;
        for (;; ++row) {
            const LayoutBox box{lx, band + row * font, lx + w, band + (row + 1) * font};
            if (std::none_of(placed.begin(), placed.end(),
                             [&](const LayoutBox& o) { return o.overlaps(box); })) {
                placed.push_back(box);
                break;
            }
        }
        rows = std::max(rows, row + 1);
        labels.emplace_back(ImVec2(lx, band + row * font), buf);
    }
    for (const auto& [pos, text] : labels) chart.label(dl, pos, colour::kClose, text);
    // 2. The plot under the band: the sorted values, the marks, the axis ends below it.
    const float y0 = band + rows * font + font * 0.3f, y1 = b.y - font * 1.3f;
    std::vector<ImVec2> pts;
    for (std::size_t i = 0; i < v.size(); ++i) {
        const float yy = y1 - (y1 - y0) * static_cast<float>(i + 1) / static_cast<float>(v.size());
        pts.push_back(ImVec2(x(v[i]), pts.empty() ? y1 : pts.back().y));
        pts.push_back(ImVec2(x(v[i]), yy));
    }
    dl->AddPolyline(pts.data(), static_cast<int>(pts.size()), colour::kDecode, 0, px(2.f));
    chart.mark(colour::kDecode);
    for (std::size_t i = 1; i < pts.size(); ++i) chart.record_line(pts[i - 1], pts[i], "curve");
    for (const auto& [what, value] : marks) {
        const float mx = x(value);
        chart.line(dl, ImVec2(mx, y0), ImVec2(mx, y1), colour::kClose, px(1.5f),
                   std::string(what) + " mark");
    }
    chart.mark(colour::kClose);
    char end[32];
    std::snprintf(end, sizeof end, "%.2f ms", hi);
    chart.label(dl, ImVec2(x1 - text_width(end), y1 + font * 0.15f), kAxis, end);
    chart.label(dl, ImVec2(x0, y1 + font * 0.15f), kAxis, "0");
    if (hovered(a, b))
        tooltipf(
            "%s\n%zu values; p50 %.3f ms, p90 %.3f ms, p99 %.3f ms (nearest rank: "
            "the report's summary).",
            tip, v.size(), p.p50, p.p90, p.p99);
}

}  // namespace

void draw_serving(const Snapshot& snap, ViewerState& state) {
    const ReplaySnapshot& rp = snap.replay;
    const ProbeScope scope("serving panel");
    if (!rp.error.empty()) {
        wrapped_text(rp.error, colour::kBad);
        draw_inputs(rp, state);
        return;
    }
    if (!rp.ready) {
        line_text("replaying the workload...", dim_colour());
        return;
    }
    draw_inputs(rp, state);
    draw_summary(rp);
    draw_legend(rp);

    // The time charts on the left, the distributions on their right when the panel is
    // wide enough for both (40 fonts), else under the time axis.
    const float font = ImGui::GetFontSize();
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const bool cdf_right = avail.x >= font * 40;
    const float right_w = cdf_right ? std::max(font * 14, avail.x * 0.26f) : 0;
    Axis ax;
    ax.x0 = origin.x + font * 4.5f;
    ax.width = std::max(50.f, avail.x - right_w - font * (cdf_right ? 5.5f : 4.5f) - 2);
    ax.end_us = std::max(rp.end_us, 1.0);
    const float steps_h = font * 6.0f, pool_h = font * 5.0f, gap = font * 0.6f;
    const float title_h = font * 1.2f;  // a chart's title line, above it
    // One label a row, a row a line at least (the panel scrolls down rather than overlap).
    const float n_rows = static_cast<float>(std::max<std::size_t>(1, rp.rows.size()));
    const float rows_h = std::max(n_rows * font * 1.2f,
                                  avail.y - steps_h - pool_h - 2 * title_h - 3 * gap - font * 2);
    const float row_h = std::min(font * 2.4f, rows_h / n_rows);
    const float y_rows = origin.y;
    const float y_steps_title = y_rows + row_h * n_rows + gap;
    const float y_steps = y_steps_title + title_h;
    const float y_pool_title = y_steps + steps_h + gap;
    const float y_pool = y_pool_title + title_h;
    const float y_axis = y_pool + pool_h + gap * 0.5f;

    draw_requests(dl, rp, ax, y_rows, row_h);
    draw_steps(dl, rp, ax, y_steps_title, y_steps, steps_h);
    draw_pool(dl, rp, ax, y_pool_title, y_pool, pool_h);
    draw_time_axis(dl, ax.x0, ax.width, y_axis, 0, ax.end_us);
    float bottom = y_axis + font * 1.8f;

    // The distributions: right of the time charts, or below them (side by side when two
    // fit, else one above the other).
    const char* ttft_tip =
        "TTFT of each request: arrival at the engine -> first token sampled (+ the network "
        "delay: the client's clock). Left to right the requests from fastest to slowest; "
        "the height is the share of requests at or below that time.";
    const char* itl_tip =
        "Inter-token latency: every gap between two consecutive new tokens of one request, "
        "all requests together. A step that prefills a long prompt whole stretches the "
        "gaps of every request decoding beside it.";
    ImVec2 t0, t1, i0, i1;
    if (cdf_right) {
        const float rx = ax.x0 + ax.width + font, rw = origin.x + avail.x - rx;
        const float dh = (bottom - y_rows - gap) * 0.5f;
        t0 = ImVec2(rx, y_rows), t1 = ImVec2(rx + rw, y_rows + dh);
        i0 = ImVec2(rx, y_rows + dh + gap), i1 = ImVec2(rx + rw, y_rows + 2 * dh + gap);
    } else {
        const float h = font * 10, y = bottom + gap;
        if (avail.x >= font * 29) {
            const float w = (avail.x - font) * 0.5f;
            t0 = ImVec2(origin.x, y), t1 = ImVec2(origin.x + w, y + h);
            i0 = ImVec2(origin.x + w + font, y), i1 = ImVec2(origin.x + avail.x, y + h);
        } else {
            t0 = ImVec2(origin.x, y), t1 = ImVec2(origin.x + avail.x, y + h);
            i0 = ImVec2(origin.x, y + h + gap), i1 = ImVec2(origin.x + avail.x, y + 2 * h + gap);
        }
        bottom = i1.y;
    }
    draw_cdf(dl, "TTFT (ms), sorted", rp.ttft_ms, rp.ttft_pct, t0, t1, ttft_tip);
    draw_cdf(dl, "ITL (ms), sorted", rp.itl_ms, rp.itl_pct, i0, i1, itl_tip);
    ImGui::Dummy(ImVec2(avail.x, bottom - origin.y));
}

}  // namespace plab::viewer
