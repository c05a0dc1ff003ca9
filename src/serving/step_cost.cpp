#include "serving/step_cost.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"
#include "runtime/cost_model.h"

namespace plab {

double StepCost::duration_us(const ModelConfig& c, const Schedule& s) const {
    double flops = 0;
    for (const ScheduledSpan& span : s.spans) {
        const int pos0 = span.request->seq.length - span.n_tokens;
        const PrefillCost k = prefill_cost(c, span.n_tokens, pos0);
        // The classifier runs only for the rows that sample (none of a
        // prompt's earlier chunks, every row of a verify span).
        flops += k.projection_flops + k.attention_flops + sampled_rows(span) * k.logits_flops;
    }
    return step_us + per_sequence_us * static_cast<double>(s.spans.size()) + flops / (gflops * 1e3);
}

StepDuration StepCost::clock() const {
    return
        [cost = *this](const ModelConfig& c, const Schedule& s) { return cost.duration_us(c, s); };
}

std::string StepCost::to_string() const {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.6g,%.6g,%.6g", step_us, per_sequence_us, gflops);
    return buf;
}

StepCost StepCost::parse(const std::string& text) {
    StepCost c;
    std::istringstream in(text);
    char comma1 = 0, comma2 = 0;
    std::string rest;
    const bool ok =
        static_cast<bool>(in >> c.step_us >> comma1 >> c.per_sequence_us >> comma2 >> c.gflops) &&
        comma1 == ',' && comma2 == ',' && !(in >> rest);
    PLAB_CHECK(ok,
               "step cost '" << text << "' is not STEP_US,PER_SEQUENCE_US,GFLOPS (e.g. 250,5,20)");
    PLAB_CHECK(
        std::isfinite(c.step_us) && std::isfinite(c.per_sequence_us) && std::isfinite(c.gflops) &&
            c.step_us >= 0 && c.per_sequence_us >= 0 && c.gflops > 0,
        "step cost '" << text << "': the two times must be >= 0 microseconds and GFLOPS > 0");
    return c;
}

}  // namespace plab
