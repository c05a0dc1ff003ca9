// Self-checks of each scene's engine answer (see self_check.h).
#include "self_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/mask.h"

namespace plab::viewer {
namespace {

const char* yes_no(bool ok) {
    return ok ? "yes" : "no";
}

}  // namespace

CheckResult check_toy(const ToySnapshot& toy) {
    CheckResult r;
    r.line = std::string("toy: chunked == full bitwise: ") + yes_no(toy.all_bitwise) + " (plan " +
             toy.chunked.plan.to_string() + ", backend " + toy.backend + ")";
    r.ok = toy.all_bitwise || !toy.reference;  // fast backends may differ in the last bits
    return r;
}

CheckResult check_mask(const MaskSnapshot& mask) {
    const int t = mask.n_tokens();
    bool ok = !mask.maps.empty();
    for (const AttentionMap& m : mask.maps) {
        ok = ok && m.scores.size() == m.probs.size();
        for (int q = 0; q < t && ok; ++q) {
            double sum = 0;
            for (int k = 0; k < t; ++k) {
                const std::size_t i = static_cast<std::size_t>(q) * t + k;
                const bool visible = Mask{}.visible(q, k);
                if (!visible && m.probs[i] != 0.0f) ok = false;
                if (std::isfinite(m.scores[i]) != visible) ok = false;
                sum += m.probs[i];
            }
            // Each p_j is rounded once (e_j / den in float): the row sum is 1 up to
            // about T ulps of 1.0, far below 1e-4 for any T this model takes.
            if (std::fabs(sum - 1.0) > 1e-4) ok = false;
        }
    }
    CheckResult r;
    r.ok = ok;
    r.line = std::string("mask: rows sum to 1, future cells have probability 0 and score -inf: ") +
             yes_no(ok) + " (" + std::to_string(t) + " tokens, plan " + mask.plan.to_string() +
             ", " + std::to_string(mask.maps.size()) + " heads)";
    return r;
}

CheckResult check_kv(const KvSnapshot& kv) {
    bool ok = !kv.stages.empty() && kv.block_size > 0;
    int n_prefill = 0;
    for (const KvStage& s : kv.stages) {
        const int want_blocks = (s.length + kv.block_size - 1) / std::max(1, kv.block_size);
        if (static_cast<int>(s.block_table.size()) != want_blocks) ok = false;
        if (s.decode && s.n_pos != 1) ok = false;
        if (!s.decode) n_prefill += s.n_pos;
    }
    if (n_prefill != kv.n_prompt) ok = false;
    CheckResult r;
    r.ok = ok;
    r.line = std::string(
                 "kv: blocks = ceil(length/B) after every step, one slot per decode "
                 "step: ") +
             yes_no(ok) + " (" + std::to_string(kv.n_prompt) +
             " prompt tokens, B=" + std::to_string(kv.block_size) + ")";
    return r;
}

CheckResult check_equivalence(const EquivalenceSnapshot& eq) {
    bool ok = !eq.cells.empty();
    for (std::size_t row = 0; row < eq.backends.size(); ++row)
        for (std::size_t col = 0; col < eq.plans.size(); ++col) {
            const std::size_t i = row * eq.plans.size() + col;
            if (!eq.errors[i].empty()) ok = false;
            if (eq.reference[row] && !eq.cells[i].bitwise()) ok = false;
        }
    CheckResult r;
    r.ok = ok;
    r.line = std::string("equivalence: reference backends bitwise equal for every plan: ") +
             yes_no(ok) + " (" + std::to_string(eq.backends.size()) + " backends x " +
             std::to_string(eq.plans.size()) + " plans)";
    return r;
}

CheckResult check_timeline(const TimelineSnapshot& tl) {
    const bool has_spans = std::any_of(tl.events.begin(), tl.events.end(),
                                       [](const TraceEvent& e) { return e.name == "prefill"; }) &&
                           std::any_of(tl.events.begin(), tl.events.end(),
                                       [](const TraceEvent& e) { return e.name == "request"; });
    const bool ok = has_spans && tl.prefill_us > 0 && tl.ttft_us > tl.prefill_us;
    char line[200];
    std::snprintf(line, sizeof line,
                  "timeline: TTFT (%.0f us) >= prefill (%.0f us), different spans: %s", tl.ttft_us,
                  tl.prefill_us, yes_no(ok));
    return CheckResult{ok, line};
}

}  // namespace plab::viewer
