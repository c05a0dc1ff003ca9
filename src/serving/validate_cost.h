// How wrong is the serving lab's clock? Measured, as Vidur (MLSys 2024)
// measures its simulator against real vLLM runs.
//
// What it teaches: a model of step time is a claim; its error is a number.
// The same workload is replayed twice on this machine's engine:
//  1. on the real clock, each step's time measured and also predicted by the
//     roofline (StepRecord::predicted_us): per-step error on identical steps;
//  2. on the roofline's virtual clock: each request's TTFT and mean ITL
//     against the real run's (scheduling may differ where the clocks do —
//     that is part of the error a student would see).
// Errors are |predicted - measured| / measured; medians and p90 are reported.
// The real run is then repeated, and its steps compared with the first's: the
// same steps timed twice, the error the machine makes against itself — a
// floor no model of the step can beat on a machine this noisy.
#pragma once

#include "model/model_io.h"
#include "serving/serve.h"
#include "serving/workload.h"

namespace plab {

struct CostValidation {
    double median_step_rel_error = 0, p90_step_rel_error = 0;
    double median_ttft_rel_error = 0, p90_ttft_rel_error = 0;
    double median_itl_rel_error = 0, p90_itl_rel_error = 0;
    // The second real run against the first, step by step (while the two
    // schedules agree: noise_steps of them).
    double median_step_rel_noise = 0, p90_step_rel_noise = 0;
    int noise_steps = 0;
    int steps = 0;     // steps of the real run
    int requests = 0;  // requests compared
};

// `options.roofline` is the clock under test (this machine's preset).
CostValidation validate_cost(const Model& model, const Workload& workload,
                             const ServeOptions& options);

}  // namespace plab
