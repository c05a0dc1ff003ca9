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
#include "serving/step_cost.h"
#include "serving/workload.h"

namespace plab {

struct ServeOptions {
    EngineOptions engine;
    bool virtual_clock = true;
    StepCost cost;  // the virtual clock's coefficients, unless...
    // ...a roofline clock is given (serving/roofline.h): each step charged as
    // its preset shape on its preset card. On the real clock it predicts each
    // step instead (StepRecord::predicted_us), to measure its error.
    std::shared_ptr<const RooflineCost> roofline;
    std::uint64_t seed = 1;       // random prompt ids of "prompt_tokens" lines
    double ttft_slo_ms = 1000;    // goodput: TTFT objective
    double itl_slo_ms = 100;      // goodput: mean inter-token latency objective
    double network_delay_ms = 0;  // one-way, added where the client's clock stops
    // Disaggregated prefill and decode: a prefill engine computes each prompt
    // and its first token, hands its KV blocks over a link to a decode engine,
    // which decodes the rest. Virtual clock only: the two engines stand for two
    // devices, each with its own clock.
    bool disaggregate = false;
    // KV transfer bandwidth, GB/s, given by the caller (`plab serve` measures
    // this machine's copy bandwidth when --link-gbps is not given): serving
    // measures nothing itself.
    double link_gb_per_s = 0;
    // No forward pass (serving/simulate.h): the scheduler, pool, prefix cache and
    // metrics at the roofline shape's sizes, placeholder tokens. Needs `roofline`.
    bool simulate = false;
};

struct ServedRequest {
    int id = 0;
    double arrival_s = 0;
    int prompt_tokens = 0;
    std::vector<int32_t> prompt_ids;
    int cached_tokens = 0;
    std::vector<int32_t> new_tokens;  // the ids (none when simulated: placeholders)
    int new_token_count = 0;
    int preemptions = 0;
    // Tokens run through the model for it, recomputation after a preemption
    // included (Request::computed_tokens; both engines' when disaggregated).
    int computed_tokens = 0;
    double kv_transfer_ms = 0;        // disaggregated: the handover's modelled time
    long long kv_transfer_bytes = 0;  // disaggregated: its blocks x bytes per block
    RequestLatency latency;
    double ttft_client_ms = 0;  // TTFT + the network delay: when the client has the token
    double e2e_client_ms = 0;   // e2e + the network delay: when the client has the last one
    double first_scheduled_s = 0;
    std::vector<double> token_s;  // when each new token was sampled
    std::vector<double> itl_ms;
    SpeculativeStats speculation;  // with EngineOptions::speculative (k 0 without)
};

struct Percentiles {
    double p50 = 0, p90 = 0, p99 = 0;
};

struct ServeSummary {
    Percentiles queue_ms, ttft_ms, itl_ms, tpot_ms, e2e_ms;
    double output_tokens_per_s = 0;  // all new tokens / (last token - first arrival)
    double goodput = 0;              // requests per second meeting both objectives
    int requests_meeting_slo = 0;
    double duration_s = 0;
    int steps = 0;
    long long preemptions = 0;
    // Disaggregated runs: KV blocks handed over and their bytes (blocks x B x
    // bytes per position over all layers), at this link speed.
    long long kv_transfer_blocks = 0;
    long long kv_transfer_bytes = 0;
    double link_gb_per_s = 0;
    // Speculative decoding: every request's verify steps, guesses and
    // acceptances together (k 0 without).
    SpeculativeStats speculative;
};

struct ServeReport {
    // "real": every token computed by the model; "simulated": no forward pass,
    // every time modelled (serving/simulate.h).
    std::string compute = "real";
    std::string policy;
    std::string clock;            // "virtual" or "real"
    double network_delay_ms = 0;  // ServeOptions::network_delay_ms: each token's delivery
    std::vector<ServedRequest> requests;
    ServeSummary summary;
    std::vector<StepRecord> steps;
    // With a roofline clock: the side that decided each step ("compute" or
    // "memory"), one per step of `steps`.
    std::vector<std::string> step_bounds;
};

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
