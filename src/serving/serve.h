// Serve: replay a workload on the engine and report what each request saw.
//
// What it teaches: the serving metrics, each with where its clock starts and
// stops. Every clock starts at the request's *arrival at the engine* (its
// arrival_s in the workload); a client would also count its network time:
//   queue   arrival -> its first step begins
//   TTFT    arrival -> first new token sampled (queue + prefill, + delivery
//           at the client: --network-delay-ms adds that one-way delay)
//   ITL     gaps between consecutive new tokens of one request
//   TPOT    (e2e - TTFT) / (new tokens - 1): the mean of its ITLs
//   e2e     arrival -> last new token sampled
// and over the run: percentiles, output tokens per second, and goodput — the
// rate of requests that met both objectives (TTFT and mean ITL).
//
// With speculative decoding (EngineOptions::speculative) a decoding request's
// verify span joins the step like a prefill chunk, inside the token budget;
// the clocks charge the target's steps only (a draft model's forwards are not
// on them; prompt lookup costs nothing).
//
// The virtual clock (serving/step_cost.h) makes a replay deterministic; the
// real clock measures this machine. Either way every token is computed by the
// real engine, so outputs are the model's, not a simulation's. Requests do
// not stop at EOS: a workload fixes how many tokens each one makes, as
// serving benchmarks do.
#pragma once

#include <string>
#include <vector>

#include "model/model_io.h"
#include "runtime/engine.h"
#include "serving/roofline.h"
#include "serving/serve_report.h"
#include "serving/step_cost.h"
#include "serving/workload.h"

namespace plab {

// The token budget of a policy's steps: `token_budget` for the chunked
// policy; the others compute a prompt whole in one step, so theirs is the
// model's max_seq_len (any prompt fits).
int policy_step_tokens(Policy p, int token_budget, int max_seq_len);

// Measures this machine's step cost for `model` on the real clock: median
// step times of decode at batch 1 and 8 and of one 4·B..128-token prefill,
// solved for the three coefficients. Throws plab::Error if the measurements
// contradict the model (a negative coefficient: a machine too noisy).
StepCost calibrate_step_cost(const Model& model, const EngineOptions& engine);

// Runs `workload` on a fresh engine for `model` (with options.simulate, on the
// roofline shape with no forward pass: serving/simulate.h).
ServeReport serve(const Model& model, const Workload& workload, const ServeOptions& options);

// The replay as a Chrome trace on the engine's clock (virtual or real): one
// track for the engine's steps (which requests, how many tokens of each) and
// one per request — queued, then each step it was in (prefill chunk or decode
// token), its first token and its finish. With a network delay, each token's
// delivery (sampled -> at the client) is a span of its own on a second track
// of the request: it overlaps the engine's next step, which does not wait for it.
Trace serve_trace(const ServeReport& report);

}  // namespace plab
