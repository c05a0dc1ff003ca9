// What a replay reports, assembled in one place from each request's timeline:
// the per-request rows and the run's summary (serve.h's ServeReport), for the
// engine's replays (serving/serve.cpp) and the simulated one (serving/simulate.cpp).
#pragma once

#include <vector>

#include "runtime/request.h"
#include "serving/serve.h"

namespace plab {

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
