// What a replay is asked and what it reports: the options, each request's row
// and the run's summary, assembled in one place from each request's timeline,
// for the engine's replays (serving/serve.cpp) and the simulated one
// (serving/simulate.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/request.h"
#include "serving/roofline.h"
#include "serving/step_cost.h"

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

// One request as served, on one clock whose zero is the replay's start: what
// the engine it arrived at recorded (runtime/request.h's record), its tokens'
// times from the decode engine when disaggregated, and the K/V handover.
struct Timeline {
    RequestRecord rec;
    // Simulated runs keep no ids (serving/simulate.h): the prompt's length here
    // instead of rec.prompt; the new tokens counted by rec.token_us.
    int prompt_tokens = -1;
    double kv_transfer_ms = 0;
    long long kv_transfer_bytes = 0;
};

// Per-request figures and the run's summary, on the options' objectives and
// network delay.
ServeReport assemble_report(const std::vector<Timeline>& lines, const ServeOptions& o);

// The 50th, 90th and 99th nearest-rank percentiles.
Percentiles percentiles_of(const std::vector<double>& v);

}  // namespace plab
