#include "runtime/request.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace plab {

double percentile(std::vector<double> v, double p) {
    // A fraction, not a percent: percentile(v, 50) once returned the maximum
    // where a median was meant.
    PLAB_ASSERT(p >= 0 && p <= 1);
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    // Nearest rank: the smallest value with at least p of the values at or below it.
    const std::size_t rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

RequestLatency latency_of(const Request& r) {
    return latency_of(r.arrival_us, r.first_scheduled_us, r.token_us);
}

RequestRecord record_of(const Request& r, double t_start) {
    RequestRecord rec;
    rec.prompt = r.prompt;
    rec.new_tokens.assign(r.new_tokens().begin(), r.new_tokens().end());
    rec.cached_tokens = r.cached_tokens;
    rec.hit_blocks = r.hit_blocks;
    rec.miss_blocks = r.miss_blocks;
    rec.preemptions = r.preemptions;
    rec.computed_tokens = r.computed_tokens;
    rec.arrival_us = r.arrival_us - t_start;
    rec.first_scheduled_us = r.first_scheduled_us - t_start;
    rec.finish_us = r.finish_us - t_start;
    for (double x : r.token_us) rec.token_us.push_back(x - t_start);
    rec.speculation = r.speculation.stats;
    return rec;
}

RequestLatency latency_of(double arrival_us, double first_scheduled_us,
                          const std::vector<double>& token_us) {
    RequestLatency l;
    if (token_us.empty()) return l;
    l.queue_ms = (first_scheduled_us - arrival_us) / 1000;
    l.ttft_ms = (token_us.front() - arrival_us) / 1000;
    l.e2e_ms = (token_us.back() - arrival_us) / 1000;
    std::vector<double> gaps;
    for (std::size_t i = 1; i < token_us.size(); ++i)
        gaps.push_back((token_us[i] - token_us[i - 1]) / 1000);
    if (!gaps.empty()) {
        double sum = 0;
        for (double g : gaps) sum += g;
        l.itl_mean_ms = sum / static_cast<double>(gaps.size());
        l.itl_p90_ms = percentile(gaps, 0.9);
        l.tpot_ms = (l.e2e_ms - l.ttft_ms) / static_cast<double>(gaps.size());
    }
    return l;
}

}  // namespace plab
