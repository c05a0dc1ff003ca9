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

#include "panels/panels.h"
#include "panels/ui_common.h"

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
void draw_inputs(const ReplaySnapshot& rp, ViewerState& state) {
    ReplayOptions& o = state.replay;
    bool changed = false;
    const float em = ImGui::GetFontSize();
    ImGui::SetNextItemWidth(em * 8);
    if (ImGui::BeginCombo("policy", policy_name(o.policy).c_str())) {
        for (Policy p :
             {Policy::one_at_a_time, Policy::static_batch, Policy::continuous, Policy::chunked})
            if (ImGui::Selectable(policy_name(p).c_str(), p == o.policy)) {
                o.policy = p;
                changed = true;
            }
        ImGui::EndCombo();
    }
    item_tooltip(
        "The scheduling policy (--policy). one-at-a-time: a request runs alone to its end. "
        "static: a batch is admitted only when the last one has finished. continuous: the "
        "group changes every step, whole prompts. chunked: continuous, and a long prompt is "
        "split across steps within the token budget, beside other requests' decode tokens.");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(em * 9);
    float rate = static_cast<float>(o.rate);
    if (ImGui::SliderFloat("rate /s", &rate, 10.f, 1000.f, "%.0f", ImGuiSliderFlags_Logarithmic))
        o.rate = rate;
    changed = changed || ImGui::IsItemDeactivatedAfterEdit();
    item_tooltip(
        "Requests per second arriving (--rate): Poisson arrivals, exponential gaps, the same "
        "seed. A higher rate means more requests in flight at once: longer queues, fuller "
        "steps, a fuller KV pool.");
    ImGui::SameLine();
    ImGui::BeginDisabled(o.policy != Policy::chunked);
    ImGui::SetNextItemWidth(em * 8);
    ImGui::SliderInt("token budget", &o.token_budget, 8, 256);
    changed = changed || ImGui::IsItemDeactivatedAfterEdit();
    ImGui::EndDisabled();
    item_tooltip(
        "Token budget (--token-budget, vLLM's max_num_batched_tokens): the most tokens one "
        "step computes, decode tokens first, then prompt chunks in what is left. Only the "
        "chunked policy splits a prompt; the others prefill whole prompts (budget = the "
        "model's max_seq_len).");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(em * 7);
    float delay = static_cast<float>(o.network_delay_ms);
    if (ImGui::SliderFloat("network ms", &delay, 0.f, 10.f, "%.1f")) o.network_delay_ms = delay;
    changed = changed || ImGui::IsItemDeactivatedAfterEdit();
    item_tooltip(
        "One-way network delay to the client (--network-delay-ms). A token sampled by the "
        "engine reaches the client this much later; the engine does not wait for it, so the "
        "delivery overlaps its next step. The client's TTFT = the engine's TTFT + this delay.");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(em * 6);
    ImGui::SliderInt("requests", &o.requests, 1, 32);
    changed = changed || ImGui::IsItemDeactivatedAfterEdit();
    item_tooltip("Requests in the generated workload (--requests), one row each.");
    ImGui::SameLine();
    text_with_tip("re-run " + ms(rp.rerun_ms),
                  "Wall time of the last replay: generating the workload and serving it on the "
                  "virtual clock (every token computed by the real engine, backend " +
                      rp.backend +
                      "). The times drawn are the virtual clock's, not this: on it the backend "
                      "changes no time, so the replay uses the fast cpu backend.");
    ImGui::SameLine();
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

// 2. The summary numbers, each explained.
void draw_summary(const ReplaySnapshot& rp) {
    const ServeSummary& s = rp.report.summary;
    text_with_tip("TTFT p50/p90/p99 " + ms(s.ttft_ms.p50) + " / " + ms(s.ttft_ms.p90) + " / " +
                      ms(s.ttft_ms.p99),
                  "Time to first token: from the request's arrival at the engine to its first "
                  "new token sampled (queue + prefill), plus the network delay when one is set "
                  "(the client's clock).");
    ImGui::SameLine();
    text_with_tip("ITL " + ms(s.itl_ms.p50) + " / " + ms(s.itl_ms.p90) + " / " + ms(s.itl_ms.p99),
                  "Inter-token latency: the gaps between consecutive new tokens of one request. A "
                  "long prompt computed whole in one step stretches the gap of every request "
                  "decoding beside it; chunked prefill keeps that step short.");
    ImGui::SameLine();
    text_with_tip("TPOT p50 " + ms(s.tpot_ms.p50),
                  "Time per output token after the first: (e2e - TTFT) / (new tokens - 1), the "
                  "mean of one request's ITLs.");
    ImGui::SameLine();
    char buf[128];
    std::snprintf(buf, sizeof buf, "%.0f tok/s, %d steps, %lld preempted", s.output_tokens_per_s,
                  s.steps, s.preemptions);
    text_with_tip(
        buf, "Workload: " + rp.workload +
                 ".\nOutput tokens per second over the run; engine steps (one forward pass over "
                 "every scheduled request each); preemptions (a request's KV blocks given back "
                 "when the pool was full, its tokens computed again later).");
}

// 3a. Requests x time: one row each.
void draw_requests(ImDrawList* dl, const ReplaySnapshot& rp, const Axis& ax, float y0,
                   float row_h) {
    const float label_x = ax.x0 - ImGui::GetFontSize() * 4.2f;
    const bool delivery = rp.network_delay_ms > 0;
    const double delay_us = rp.network_delay_ms * 1e3;
    for (const ReplayRow& row : rp.rows) {
        const float top = y0 + row.id * row_h;
        const float lane_b = top + row_h * (delivery ? 0.58f : 0.8f);
        char label[48];
        std::snprintf(label, sizeof label, "%d: %dp", row.id, row.prompt_tokens);
        dl->AddText(ImVec2(label_x, top), request_colour(row.id), label);
        if (hovered(ImVec2(label_x, top), ImVec2(ax.x0, top + row_h)))
            ImGui::SetTooltip(
                "request %d: prompt %d tokens (%d found in the prefix cache), %d new tokens, "
                "%d tokens computed, %d preemption(s)",
                row.id, row.prompt_tokens, row.cached_tokens, row.new_tokens, row.computed_tokens,
                row.preemptions);
        // Queued: arrival at the engine -> its first step began.
        const float qa = ax.x(row.arrival_us), qb = ax.x(row.first_scheduled_us);
        const float mid = (top + lane_b) * 0.5f;
        dl->AddRectFilled(ImVec2(qa, mid - 1.5f), ImVec2(std::max(qb, qa + 1), mid + 1.5f),
                          kQueued);
        if (hovered(ImVec2(qa, top), ImVec2(std::max(qb, qa + 2), lane_b)))
            ImGui::SetTooltip(
                "request %d queued %.3f ms: from its arrival at the engine until its first "
                "step began (waiting for room in a step's token budget, a running slot or KV "
                "blocks). The queue is part of its TTFT.",
                row.id, (row.first_scheduled_us - row.arrival_us) / 1e3);
        // Its steps, each a prompt chunk or a decode token (StepRecord.decode).
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
            dl->AddRectFilled(ImVec2(a, top + 1), ImVec2(b, lane_b), c);
            if (hovered(ImVec2(a, top), ImVec2(b, lane_b)))
                ImGui::SetTooltip(
                    "request %d, step %d: %s of %d token(s), %.3f ms on the virtual clock.\n%s",
                    row.id, s.step,
                    s.decode    ? "a decode token"
                    : recompute ? "a prompt chunk computed again after a preemption"
                                : "a prompt chunk",
                    s.tokens, s.us / 1e3,
                    s.decode ? "Decode: its newest token fed back to sample the next one."
                             : "Prefill: prompt tokens computed into the KV cache; the step's "
                               "token budget decides how many.");
        }
        // Preemptions: its blocks went back to the pool at the start of that step.
        for (double t : row.preempted_us) {
            const float x = ax.x(t);
            dl->AddLine(ImVec2(x - px(4), top + 1), ImVec2(x + px(4), lane_b), colour::kBad,
                        px(2.f));
            dl->AddLine(ImVec2(x - px(4), lane_b), ImVec2(x + px(4), top + 1), colour::kBad,
                        px(2.f));
            if (hovered(ImVec2(x - 5, top), ImVec2(x + 5, lane_b)))
                ImGui::SetTooltip(
                    "request %d preempted: the pool had no free block for a running request, "
                    "so the newest one gave its KV blocks back and waits at the front of the "
                    "queue; its tokens are computed again (recompute).",
                    row.id);
        }
        // First token sampled: the engine's TTFT ends here.
        if (!row.token_us.empty()) {
            const float x = ax.x(row.token_us.front());
            dl->AddLine(ImVec2(x, top), ImVec2(x, lane_b + 1), kTokenMark, px(2.f));
            if (hovered(ImVec2(x - 3, top), ImVec2(x + 3, lane_b)))
                ImGui::SetTooltip(
                    "request %d: first token sampled at %.3f ms. TTFT at the engine = %.3f ms "
                    "(arrival -> sampled: queue + prefill).",
                    row.id, row.token_us.front() / 1e3,
                    (row.token_us.front() - row.arrival_us) / 1e3);
        }
        // Delivery: sampled -> at the client, overlapping the engine's next steps.
        if (delivery) {
            const float da = lane_b + 1, db = top + row_h - 1;
            for (double t : row.token_us)
                dl->AddRectFilled(ImVec2(ax.x(t), da), ImVec2(ax.x(t + delay_us), db), kDelivery);
            const float x = ax.x(row.client_first_token_us);
            dl->AddLine(ImVec2(x, da - 2), ImVec2(x, db + 1), kClientMark, px(2.f));
            if (hovered(ImVec2(ax.x(row.token_us.front()), da), ImVec2(x + 3, db)))
                ImGui::SetTooltip(
                    "request %d: each token travels %.1f ms to the client while the engine "
                    "already computes its next step (the stages overlap). The client has the "
                    "first token at %.3f ms: its TTFT = %.3f ms.",
                    row.id, rp.network_delay_ms, row.client_first_token_us / 1e3,
                    (row.client_first_token_us - row.arrival_us) / 1e3);
        }
    }
}

// 3b. Each step's tokens, decode below prefill, against the token budget.
void draw_steps(ImDrawList* dl, const ReplaySnapshot& rp, const Axis& ax, float y0, float h) {
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
        if (hovered(ImVec2(a, y0), ImVec2(b, y0 + h)))
            ImGui::SetTooltip(
                "step %d: %d decode + %d prefill tokens = %d of a token budget of %d, %zu "
                "request(s) in one forward pass, %.3f ms.\nDecode tokens are scheduled first, "
                "then prompt chunks in what is left of the budget.",
                s.index, s.decode_tokens, s.prefill_tokens, s.decode_tokens + s.prefill_tokens,
                rp.token_budget, s.requests.size(), s.us / 1e3);
    }
    const std::string label = "token budget " + std::to_string(rp.token_budget);
    if (rp.token_budget <= top_tokens) {
        const float by = y(rp.token_budget);
        for (float x = ax.x0; x < ax.x0 + ax.width; x += 8)
            dl->AddLine(ImVec2(x, by), ImVec2(std::min(x + 4, ax.x0 + ax.width), by), kBudget);
    }
    dl->AddText(ImVec2(ax.x0 - ImGui::GetFontSize() * 4.2f, y0), kAxis, "tokens");
    dl->AddText(ImVec2(ax.x0 + 4, y0), kBudget, label.c_str());
}

// 3c. The KV pool after each step: blocks in use, cached free blocks, its size.
void draw_pool(ImDrawList* dl, const ReplaySnapshot& rp, const Axis& ax, float y0, float h) {
    const double n = std::max(1, rp.pool_blocks);
    auto y = [&](double blocks) { return y0 + h - static_cast<float>(blocks / n) * h; };
    for (const StepRecord& s : rp.report.steps) {
        const float a = ax.x(s.start_us), b = std::max(ax.x(s.start_us + s.us), a + 1);
        dl->AddRectFilled(ImVec2(a, y(s.blocks_in_use)), ImVec2(b, y0 + h), colour::kCached);
        dl->AddRectFilled(ImVec2(a, y(s.blocks_in_use + s.cached_free_blocks)),
                          ImVec2(b, y(s.blocks_in_use)), colour::kCachedFree);
        if (hovered(ImVec2(a, y0), ImVec2(b, y0 + h)))
            ImGui::SetTooltip(
                "after step %d: %d blocks in use, %d cached free, of %d in the pool (a block "
                "holds the K/V of %d positions in every layer). Cached free blocks hold K/V "
                "nobody uses now: free to take, and a prefix-cache hit while they last.",
                s.index, s.blocks_in_use, s.cached_free_blocks, rp.pool_blocks, rp.block_size);
    }
    dl->AddLine(ImVec2(ax.x0, y0), ImVec2(ax.x0 + ax.width, y0), kBudget);
    const std::string label = "KV pool: " + std::to_string(rp.pool_blocks) + " blocks";
    dl->AddText(ImVec2(ax.x0 - ImGui::GetFontSize() * 4.2f, y0), kAxis, "blocks");
    dl->AddText(ImVec2(ax.x0 + 4, y0 + 2), kBudget, label.c_str());
}

// 3d. A distribution as its sorted values (a CDF), with p50/p90/p99 marked.
void draw_cdf(ImDrawList* dl, const char* name, const std::vector<double>& v, const Percentiles& p,
              ImVec2 a, ImVec2 b, const char* tip) {
    const float font = ImGui::GetFontSize();
    dl->AddRect(a, b, IM_COL32(90, 90, 100, 255));
    dl->AddText(ImVec2(a.x + 4, a.y + 2), kAxis, name);
    if (v.empty()) return;
    const double hi = std::max(v.back(), 1e-9);
    const float x0 = a.x + 4, x1 = b.x - 4, y0 = a.y + font * 1.4f, y1 = b.y - font * 1.3f;
    auto x = [&](double val) { return x0 + static_cast<float>(val / hi) * (x1 - x0); };
    std::vector<ImVec2> pts;
    for (std::size_t i = 0; i < v.size(); ++i) {
        const float yy = y1 - (y1 - y0) * static_cast<float>(i + 1) / static_cast<float>(v.size());
        pts.push_back(ImVec2(x(v[i]), pts.empty() ? y1 : pts.back().y));
        pts.push_back(ImVec2(x(v[i]), yy));
    }
    dl->AddPolyline(pts.data(), static_cast<int>(pts.size()), colour::kDecode, 0, px(2.f));
    const std::pair<const char*, double> marks[] = {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}};
    for (int i = 0; i < 3; ++i) {
        const float mx = x(marks[i].second);
        dl->AddLine(ImVec2(mx, y0), ImVec2(mx, y1), colour::kClose, px(1.5f));
        char buf[48];
        std::snprintf(buf, sizeof buf, "%s %.2f", marks[i].first, marks[i].second);
        const float w = ImGui::CalcTextSize(buf).x;
        dl->AddText(ImVec2(std::min(mx + 2, b.x - w - 2), y0 + i * font), colour::kClose, buf);
    }
    char end[32];
    std::snprintf(end, sizeof end, "%.2f ms", hi);
    dl->AddText(ImVec2(x1 - ImGui::CalcTextSize(end).x, y1), kAxis, end);
    dl->AddText(ImVec2(x0, y1), kAxis, "0");
    if (hovered(a, b))
        ImGui::SetTooltip(
            "%s\n%zu values; p50 %.3f ms, p90 %.3f ms, p99 %.3f ms (nearest rank: "
            "the report's summary).",
            tip, v.size(), p.p50, p.p90, p.p99);
}

}  // namespace

void draw_serving(const Snapshot& snap, ViewerState& state) {
    const ReplaySnapshot& rp = snap.replay;
    if (!rp.error.empty()) {
        ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "%s", rp.error.c_str());
        draw_inputs(rp, state);
        return;
    }
    if (!rp.ready) {
        ImGui::TextDisabled("replaying the workload...");
        return;
    }
    draw_inputs(rp, state);
    draw_summary(rp);

    const float font = ImGui::GetFontSize();
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float right_w = std::max(font * 14, avail.x * 0.26f);
    Axis ax;
    ax.x0 = origin.x + font * 4.5f;
    ax.width = std::max(50.f, avail.x - right_w - font * 5.5f);
    ax.end_us = std::max(rp.end_us, 1.0);
    const float steps_h = font * 6.0f, pool_h = font * 5.0f, gap = font * 0.6f;
    const float rows_h = std::max(font * 4, avail.y - steps_h - pool_h - 3 * gap - font * 2);
    const float row_h = std::min(font * 2.4f, rows_h / std::max<std::size_t>(1, rp.rows.size()));
    const float y_rows = origin.y;
    const float y_steps = y_rows + row_h * static_cast<float>(rp.rows.size()) + gap;
    const float y_pool = y_steps + steps_h + gap;
    const float y_axis = y_pool + pool_h + gap * 0.5f;

    draw_requests(dl, rp, ax, y_rows, row_h);
    draw_steps(dl, rp, ax, y_steps, steps_h);
    draw_pool(dl, rp, ax, y_pool, pool_h);
    draw_time_axis(dl, ax.x0, ax.width, y_axis, 0, ax.end_us);

    // The distributions, right of the time axis.
    const float rx = ax.x0 + ax.width + font, rw = origin.x + avail.x - rx;
    const float dh = (y_axis + font * 1.6f - y_rows - gap) * 0.5f;
    draw_cdf(dl, "TTFT (ms), sorted", rp.ttft_ms, rp.ttft_pct, ImVec2(rx, y_rows),
             ImVec2(rx + rw, y_rows + dh),
             "TTFT of each request: arrival at the engine -> first token sampled (+ the network "
             "delay: the client's clock). Left to right the requests from fastest to slowest; "
             "the height is the share of requests at or below that time.");
    draw_cdf(dl, "ITL (ms), sorted", rp.itl_ms, rp.itl_pct, ImVec2(rx, y_rows + dh + gap),
             ImVec2(rx + rw, y_rows + 2 * dh + gap),
             "Inter-token latency: every gap between two consecutive new tokens of one request, "
             "all requests together. A step that prefills a long prompt whole stretches the "
             "gaps of every request decoding beside it.");
    ImGui::Dummy(ImVec2(avail.x, y_axis + font * 1.8f - origin.y));
}

}  // namespace plab::viewer
