// Serving replay: a generated workload served by plab::serve on the virtual
// clock, laid out for the viewer's Serving panel.
//
// What it teaches (the serving lessons: continuous batching, chunked prefill,
// the metrics): a server's latency is made by its scheduler. The same Poisson
// workload replayed under another policy, rate or token budget gives another
// picture — which requests waited in the queue, which steps mixed a prompt
// chunk with other requests' decode tokens, how full the KV pool got, and the
// TTFT and ITL distributions that result.
//
// Nothing here schedules or times anything: plab::serve runs the real engine
// on its virtual clock (deterministic for a seed) and this file only copies
// its ServeReport into rows — each request's spans are the StepRecords it was
// in (their requests/tokens/decode fields), not re-derived.
#pragma once

#include <cstdint>
#include <string>

#include "app/snapshot.h"
#include "model/model_io.h"
#include "runtime/scheduler.h"

namespace plab::viewer {

// The viewer's inputs; the names are those of `plab serve`'s flags.
struct ReplayOptions {
    // The fast CPU backend: on the virtual clock a backend changes no time,
    // only how long a re-run takes (cpu-ref: seconds; cpu: about 0.1 s).
    std::string backend = "cpu";
    Policy policy = Policy::chunked;  // --policy
    // --rate: Poisson arrivals per second. The virtual clock of the small
    // model runs a 200-token prefill in about 10 ms and a decode step in
    // well under 1 ms, so 150/s keeps a few requests in flight at once.
    double rate = 150;
    int requests = 10;       // --requests
    std::uint64_t seed = 1;  // --seed
    // --token-budget (the chunked policy's; the others prefill whole prompts).
    // 48 against prompts of up to 240 tokens: a long prompt takes several steps.
    int token_budget = 48;
    double network_delay_ms = 0;            // --network-delay-ms: one-way, to the client
    int prompt_min = 16, prompt_max = 240;  // prompt tokens, uniform (some long ones)
    int new_min = 8, new_max = 32;          // new tokens, uniform
    int block_size = 16;
    // The pool: 36 blocks of 16 positions, small enough that the busiest moment
    // of the default workload fills it and preempts a request.
    int kv_blocks = 36;

    // One line naming the bad value and what would be right (plab::Error).
    void validate() const;
};

// Generates the workload, serves it, and lays out the report.
ReplaySnapshot run_replay(const Model& model, const ReplayOptions& options);

// The rows and distributions of a report (used by run_replay; tests build
// corrupted reports through it too).
void lay_out_replay(ReplaySnapshot& out);

}  // namespace plab::viewer
