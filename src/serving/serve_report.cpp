#include "serving/serve_report.h"

#include <algorithm>

namespace plab {

Percentiles percentiles_of(const std::vector<double>& v) {
    return {percentile(v, 0.5), percentile(v, 0.9), percentile(v, 0.99)};
}

// Per-request figures and the run's summary.
ServeReport assemble_report(const std::vector<Timeline>& lines, const ServeOptions& o) {
    ServeReport rep;
    rep.policy = policy_name(o.engine.policy);
    rep.clock = o.virtual_clock ? "virtual" : "real";
    rep.network_delay_ms = o.network_delay_ms;
    std::vector<double> queue, ttft, itl, tpot, e2e;
    double first_arrival = 1e300, last_token = 0;
    long long tokens = 0;
    for (std::size_t id = 0; id < lines.size(); ++id) {
        const RequestRecord& t = lines[id].rec;
        ServedRequest s;
        s.id = static_cast<int>(id);
        s.arrival_s = t.arrival_us / 1e6;
        s.prompt_tokens = lines[id].prompt_tokens >= 0 ? lines[id].prompt_tokens
                                                       : static_cast<int>(t.prompt.size());
        s.prompt_ids = t.prompt;
        s.cached_tokens = t.cached_tokens;
        s.new_tokens = t.new_tokens;
        s.new_token_count = static_cast<int>(t.token_us.size());
        s.preemptions = t.preemptions;
        s.computed_tokens = t.computed_tokens;
        s.kv_transfer_ms = lines[id].kv_transfer_ms;
        s.kv_transfer_bytes = lines[id].kv_transfer_bytes;
        s.latency = t.latency();
        s.ttft_client_ms = s.latency.ttft_ms + o.network_delay_ms;
        s.e2e_client_ms = s.latency.e2e_ms + o.network_delay_ms;
        s.first_scheduled_s = t.first_scheduled_us / 1e6;
        for (double x : t.token_us) s.token_s.push_back(x / 1e6);
        for (std::size_t k = 1; k < t.token_us.size(); ++k)
            s.itl_ms.push_back((t.token_us[k] - t.token_us[k - 1]) / 1000);
        queue.push_back(s.latency.queue_ms);
        ttft.push_back(s.ttft_client_ms);
        itl.insert(itl.end(), s.itl_ms.begin(), s.itl_ms.end());
        if (!s.itl_ms.empty()) tpot.push_back(s.latency.tpot_ms);
        e2e.push_back(s.e2e_client_ms);
        first_arrival = std::min(first_arrival, t.arrival_us);
        last_token = std::max(last_token, t.token_us.back());
        tokens += static_cast<long long>(t.token_us.size());
        const bool meets = s.ttft_client_ms <= o.ttft_slo_ms &&
                           (s.itl_ms.empty() || s.latency.itl_mean_ms <= o.itl_slo_ms);
        rep.summary.requests_meeting_slo += meets ? 1 : 0;
        rep.summary.kv_transfer_bytes += s.kv_transfer_bytes;
        s.speculation = t.speculation;
        rep.summary.speculative.k = o.engine.speculative.k;
        rep.summary.speculative.draft = o.engine.speculative.draft.text;
        rep.summary.speculative.merge(t.speculation);
        rep.requests.push_back(std::move(s));
    }
    ServeSummary& sum = rep.summary;
    sum.queue_ms = percentiles_of(queue);
    sum.ttft_ms = percentiles_of(ttft);
    sum.itl_ms = percentiles_of(itl);
    sum.tpot_ms = percentiles_of(tpot);
    sum.e2e_ms = percentiles_of(e2e);
    sum.duration_s = (last_token - first_arrival) / 1e6;
    sum.output_tokens_per_s = sum.duration_s > 0 ? static_cast<double>(tokens) / sum.duration_s : 0;
    sum.goodput = sum.duration_s > 0 ? sum.requests_meeting_slo / sum.duration_s : 0;
    return rep;
}

}  // namespace plab
