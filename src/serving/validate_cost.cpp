#include "serving/validate_cost.h"

#include <cmath>

#include "core/error.h"

namespace plab {

namespace {

double rel_error(double predicted, double measured) {
    return std::fabs(predicted - measured) / measured;
}

}  // namespace

CostValidation validate_cost(const Model& model, const Workload& workload,
                             const ServeOptions& options) {
    PLAB_CHECK(options.roofline != nullptr, "validate_cost needs the roofline clock to test");
    CostValidation v;
    ServeOptions real = options;
    real.virtual_clock = false;  // measured, each step predicted beside it
    const ServeReport measured = serve(model, workload, real);
    const ServeReport again = serve(model, workload, real);
    ServeOptions modelled = options;
    modelled.virtual_clock = true;
    const ServeReport predicted = serve(model, workload, modelled);

    std::vector<double> step_err, ttft_err, itl_err;
    for (const StepRecord& s : measured.steps)
        if (s.us > 0) step_err.push_back(rel_error(s.predicted_us, s.us));
    std::vector<double> noise;
    for (std::size_t i = 0; i < measured.steps.size() && i < again.steps.size(); ++i) {
        const StepRecord &a = measured.steps[i], &b = again.steps[i];
        if (a.prefill_tokens != b.prefill_tokens || a.decode_tokens != b.decode_tokens) break;
        if (a.us > 0) noise.push_back(rel_error(b.us, a.us));
    }
    PLAB_ASSERT(measured.requests.size() == predicted.requests.size());
    for (std::size_t i = 0; i < measured.requests.size(); ++i) {
        const ServedRequest& m = measured.requests[i];
        const ServedRequest& p = predicted.requests[i];
        if (m.latency.ttft_ms > 0)
            ttft_err.push_back(rel_error(p.latency.ttft_ms, m.latency.ttft_ms));
        if (!m.itl_ms.empty() && m.latency.itl_mean_ms > 0)
            itl_err.push_back(rel_error(p.latency.itl_mean_ms, m.latency.itl_mean_ms));
    }
    v.median_step_rel_error = percentile(step_err, 0.5);
    v.p90_step_rel_error = percentile(step_err, 0.9);
    v.median_ttft_rel_error = percentile(ttft_err, 0.5);
    v.p90_ttft_rel_error = percentile(ttft_err, 0.9);
    v.median_itl_rel_error = percentile(itl_err, 0.5);
    v.p90_itl_rel_error = percentile(itl_err, 0.9);
    v.median_step_rel_noise = percentile(noise, 0.5);
    v.p90_step_rel_noise = percentile(noise, 0.9);
    v.noise_steps = static_cast<int>(noise.size());
    v.steps = static_cast<int>(step_err.size());
    v.requests = static_cast<int>(ttft_err.size());
    return v;
}

}  // namespace plab
