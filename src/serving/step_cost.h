// StepCost: a model of how long one engine step takes, for the virtual clock.
//
// What it teaches: a step's time is mostly a fixed cost (launches, the
// scheduler, reading every weight once) plus its arithmetic. Replaying a
// workload on a *virtual* clock advanced by this model, instead of the wall
// clock, makes a serving experiment deterministic for a seed — the same
// requests, the same steps, the same latencies to the byte — while every
// token is still computed by the real engine. `plab serve --calibrate`
// measures this machine's coefficients. The defaults round three such runs on
// the 2-core CI machine (stories15M, cpu backend, 2026-11-30, while other
// builds ran): 3-24 us per step, 0-1.7 us per sequence, 30-38 GFLOP/s.
#pragma once

#include <string>

#include "model/config.h"
#include "runtime/engine.h"
#include "runtime/scheduler.h"

namespace plab {

struct StepCost {
    double step_us = 20;         // every step: launches, scheduling, reading all weights
    double per_sequence_us = 1;  // each sequence in the step: its attention call, its logits row
    double gflops = 30;          // the step's arithmetic (runtime/cost_model.h) at this rate

    // Virtual duration of a step that ran these spans (their positions already reserved).
    double duration_us(const ModelConfig& c, const Schedule& s) const;
    // This model as the engine's virtual clock takes it (Engine::use_virtual_clock).
    StepDuration clock() const;
    // "STEP_US,PER_SEQUENCE_US,GFLOPS", the form `--step-cost` takes.
    std::string to_string() const;
    static StepCost parse(const std::string& text);
};

}  // namespace plab
