// The Serving panel's self-check. See self_check.h. Lessons: continuous
// batching, chunked prefill, the metrics.
#include <sstream>

#include "checks/self_check.h"

namespace plab::viewer {
namespace {

// Times on the virtual clock are sums of step durations: a step's start plus
// its duration rounds back to the next step's start within a few ulps of the
// run's length in microseconds, far below a nanosecond.
constexpr double kTimeSlackUs = 1e-3;

// One request's row; appends the first problem found to `why`.
bool row_ok(const ReplayRow& row, std::ostringstream& why) {
    if (row.spans.empty()) {
        why << "request " << row.id << " was in no step; ";
        return false;
    }
    if (std::abs(row.spans.front().start_us - row.first_scheduled_us) > kTimeSlackUs) {
        why << "request " << row.id << "'s queued span ends at " << row.first_scheduled_us
            << " us but its first step starts at " << row.spans.front().start_us << " us; ";
        return false;
    }
    if (row.first_scheduled_us < row.arrival_us - kTimeSlackUs) {
        why << "request " << row.id << " was scheduled before it arrived; ";
        return false;
    }
    int total = 0, prefill = 0, decode = 0;
    for (std::size_t i = 0; i < row.spans.size(); ++i) {
        const ReplaySpan& s = row.spans[i];
        if (s.us < 0 || s.tokens < 1) {
            why << "request " << row.id << " step " << s.step << " has " << s.tokens
                << " tokens over " << s.us << " us; ";
            return false;
        }
        if (i > 0) {
            const ReplaySpan& p = row.spans[i - 1];
            if (p.start_us + p.us > s.start_us + kTimeSlackUs) {
                why << "request " << row.id << "'s steps " << p.step << " and " << s.step
                    << " are out of order or overlap on its compute lane; ";
                return false;
            }
        }
        total += s.tokens;
        (s.decode ? decode : prefill) += s.tokens;
    }
    // The bookkeeping: its prompt less the tokens found in the prefix cache
    // is prefilled once; each new token but the last is fed back once (the
    // last one is sampled and never computed); a preemption drops its K/V,
    // so what it had computed beyond its cache hits is computed again. The
    // engine counts every token it runs (computed_tokens): the spans must sum
    // to it, and with no preemption to the first two terms exactly.
    const int once = row.prompt_tokens - row.cached_tokens + row.new_tokens - 1;
    if (total != row.computed_tokens) {
        why << "request " << row.id << "'s spans sum to " << total
            << " tokens but the engine computed " << row.computed_tokens << "; ";
        return false;
    }
    if (row.preemptions == 0 &&
        (prefill != row.prompt_tokens - row.cached_tokens || decode != row.new_tokens - 1)) {
        why << "request " << row.id << " prefilled " << prefill << " and decoded " << decode
            << " tokens, expected prompt - cached = " << row.prompt_tokens - row.cached_tokens
            << " and new - 1 = " << row.new_tokens - 1 << "; ";
        return false;
    }
    if (row.preemptions > 0 && total < once) {
        why << "request " << row.id << " was preempted yet computed " << total
            << " tokens, fewer than the " << once << " it needs without a preemption; ";
        return false;
    }
    if (static_cast<int>(row.preempted_us.size()) != row.preemptions) {
        why << "request " << row.id << " has " << row.preempted_us.size()
            << " preemption marks for " << row.preemptions << " preemptions; ";
        return false;
    }
    if (static_cast<int>(row.token_us.size()) != row.new_tokens || row.token_us.empty() ||
        row.token_us.front() < row.spans.front().start_us) {
        why << "request " << row.id << "'s token times do not follow its steps; ";
        return false;
    }
    return true;
}

bool same(const Percentiles& a, const Percentiles& b) {
    return a.p50 == b.p50 && a.p90 == b.p90 && a.p99 == b.p99;
}

}  // namespace

CheckResult check_replay(const ReplaySnapshot& rp) {
    CheckResult r;
    std::ostringstream why;
    bool ok = rp.rows.size() == rp.report.requests.size() && !rp.rows.empty();
    if (!ok) why << "no request rows; ";
    int recomputed = 0, preemptions = 0;
    for (const ReplayRow& row : rp.rows) {
        ok = ok && row_ok(row, why);
        preemptions += row.preemptions;
        if (row.preemptions > 0)
            recomputed +=
                row.computed_tokens - (row.prompt_tokens - row.cached_tokens + row.new_tokens - 1);
    }
    int largest = 0;
    for (const StepRecord& s : rp.report.steps) {
        int sum = 0;
        for (int t : s.tokens) sum += t;
        largest = std::max(largest, sum);
        if (sum != s.prefill_tokens + s.decode_tokens || sum > rp.token_budget) {
            if (ok)
                why << "step " << s.index << " computed " << sum << " tokens (" << s.prefill_tokens
                    << " prefill + " << s.decode_tokens << " decode), budget " << rp.token_budget
                    << "; ";
            ok = false;
        }
    }
    if (!same(rp.ttft_pct, rp.report.summary.ttft_ms) ||
        !same(rp.itl_pct, rp.report.summary.itl_ms)) {
        if (ok) why << "the drawn TTFT/ITL percentiles differ from the summary; ";
        ok = false;
    }
    std::ostringstream line;
    line << "serving replay: every request's spans in time order without overlap, queued ends "
            "at its first step, its tokens = prompt - cached + new - 1 (+ recomputed after a "
            "preemption), every step within the token budget, TTFT/ITL p50/p90/p99 equal the "
            "summary: "
         << (ok ? "yes" : "no") << " (policy " << rp.policy << ", " << rp.rows.size()
         << " requests, " << rp.report.steps.size() << " steps, largest step " << largest << " of "
         << rp.token_budget << " tokens, " << preemptions << " preemptions, " << recomputed
         << " tokens recomputed";
    if (!ok) line << "; " << why.str();
    line << ")";
    r.ok = ok;
    r.line = line.str();
    return r;
}

}  // namespace plab::viewer
