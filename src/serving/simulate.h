// Simulated serving (`plab serve --hardware CARD --shape SHAPE --simulate`):
// the serving lab at the sizes courses discuss — 8K to 128K-token contexts,
// tens of thousands of requests — on a machine that could not run such a
// model at all.
//
// What it teaches: a serving engine's decisions depend on lengths, not on
// what the tokens say. Everything that decides runs for real — the scheduler
// (runtime/scheduler.h), its token budget and running limit, the block manager
// with its pool sized from the card's memory, the prefix cache, preemption,
// and the metrics (serving/serve_report.h) — and only the forward pass is left
// out, as Vidur (Agrawal et al., MLSys 2024) simulates vLLM: each step is
// charged on the roofline clock of its spans (serving/roofline.h), and each
// new token is a placeholder id. Prompts are synthetic ids
// (serving/workload.h synthetic_prompt), made when a request arrives and
// dropped when it finishes, so a run holds the ids of the requests in flight
// only (10,000 prompts of 17K ids at once would be 700 MB). Every figure is
// modelled: the report says "compute": "simulated" wherever a reader could
// take it for a measurement.
#pragma once

#include "serving/serve_report.h"
#include "serving/workload.h"

namespace plab {

// Replays `workload` with no forward pass: needs options.roofline (the
// card and the shape charged, whose context bounds the prompts) and the
// virtual clock; speculative decoding and disaggregation need a model and are
// refused in one line.
ServeReport simulate_serve(const Workload& workload, const ServeOptions& options);

}  // namespace plab
