// Serving replay: plab::serve's report laid out for the Serving panel. See
// serving_replay.h. Lessons: continuous batching, chunked prefill, the metrics.
#include "app/serving_replay.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "serving/workload.h"

namespace plab::viewer {

void ReplayOptions::validate() const {
    PLAB_CHECK(std::isfinite(rate) && rate > 0,
               "--rate " << rate << " must be > 0 requests per second (e.g. 150)");
    PLAB_CHECK(requests >= 1 && requests <= 64,
               "--requests " << requests << " must be 1..64 (one row each in the panel)");
    PLAB_CHECK(token_budget >= 1,
               "--token-budget " << token_budget << " must be at least 1 token per step");
    PLAB_CHECK(std::isfinite(network_delay_ms) && network_delay_ms >= 0,
               "--network-delay-ms " << network_delay_ms << " must be >= 0");
}

void lay_out_replay(ReplaySnapshot& out) {
    const ServeReport& rep = out.report;
    out.rows.clear();
    for (const ServedRequest& r : rep.requests) {
        ReplayRow row;
        row.id = r.id;
        row.arrival_us = r.arrival_s * 1e6;
        row.first_scheduled_us = r.first_scheduled_s * 1e6;
        for (double t : r.token_s) row.token_us.push_back(t * 1e6);
        row.client_first_token_us = row.arrival_us + r.ttft_client_ms * 1e3;
        row.prompt_tokens = r.prompt_tokens;
        row.cached_tokens = r.cached_tokens;
        row.new_tokens = static_cast<int>(r.new_tokens.size());
        row.computed_tokens = r.computed_tokens;
        row.preemptions = r.preemptions;
        out.rows.push_back(std::move(row));
    }
    // Each step, as the engine recorded it: which requests, how many tokens
    // each, decode or prompt chunk, and who it preempted.
    for (const StepRecord& s : rep.steps) {
        for (std::size_t i = 0; i < s.requests.size(); ++i) {
            const std::size_t id = static_cast<std::size_t>(s.requests[i]);
            PLAB_ASSERT(id < out.rows.size());
            out.rows[id].spans.push_back({s.index, s.start_us, s.us, s.tokens[i], s.decode[i]});
        }
        for (int id : s.preempted)
            out.rows[static_cast<std::size_t>(id)].preempted_us.push_back(s.start_us);
    }
    // The distributions the summary's percentiles describe: every request's
    // TTFT at the client, every gap between two tokens of one request.
    out.ttft_ms.clear();
    out.itl_ms.clear();
    for (const ServedRequest& r : rep.requests) {
        out.ttft_ms.push_back(r.ttft_client_ms);
        out.itl_ms.insert(out.itl_ms.end(), r.itl_ms.begin(), r.itl_ms.end());
    }
    std::sort(out.ttft_ms.begin(), out.ttft_ms.end());
    std::sort(out.itl_ms.begin(), out.itl_ms.end());
    out.ttft_pct = {percentile(out.ttft_ms, 0.5), percentile(out.ttft_ms, 0.9),
                    percentile(out.ttft_ms, 0.99)};
    out.itl_pct = {percentile(out.itl_ms, 0.5), percentile(out.itl_ms, 0.9),
                   percentile(out.itl_ms, 0.99)};
    out.end_us = 0;
    for (const ReplayRow& row : out.rows)
        if (!row.token_us.empty())
            out.end_us = std::max(out.end_us, row.token_us.back() + out.network_delay_ms * 1e3);
    for (const StepRecord& s : rep.steps) out.end_us = std::max(out.end_us, s.start_us + s.us);
}

ReplaySnapshot run_replay(const Model& model, const ReplayOptions& o) {
    o.validate();
    const auto t0 = std::chrono::steady_clock::now();
    WorkloadGenerator g;
    g.rate = o.rate;
    g.requests = o.requests;
    g.seed = o.seed;
    g.prompt_min = o.prompt_min;
    g.prompt_max = std::min(o.prompt_max, model.weights.config.max_seq_len - 1);
    g.new_min = o.new_min;
    g.new_max = o.new_max;
    const Workload workload = generate_workload(g);

    ServeOptions so;
    so.engine.backend = o.backend;
    so.engine.block_size = o.block_size;
    so.engine.kv_blocks = o.kv_blocks;
    so.engine.policy = o.policy;
    so.engine.max_step_tokens =
        policy_step_tokens(o.policy, o.token_budget, model.weights.config.max_seq_len);
    so.virtual_clock = true;  // deterministic: the same picture for the same inputs
    so.seed = o.seed;
    so.network_delay_ms = o.network_delay_ms;

    ReplaySnapshot out;
    out.backend = o.backend;
    out.policy = policy_name(o.policy);
    out.workload = workload.source;
    out.token_budget = so.engine.max_step_tokens;
    out.pool_blocks = o.kv_blocks;
    out.block_size = o.block_size;
    out.network_delay_ms = o.network_delay_ms;
    out.report = serve(model, workload, so);
    lay_out_replay(out);
    out.rerun_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

}  // namespace plab::viewer
