// What the bench's parts share (perf/bench.cpp: prefill and single-sequence
// decode rows; perf/bench_batch.cpp: batched decode rows): the median, the
// clock, the benchmark's token ids and mask, and the op tables. Internal to
// src/perf.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "perf/bench_report.h"
#include "runtime/session.h"

namespace plab {

// Whether the host's measured peak and bandwidth bound this backend (the CPU
// ones; a GPU's rows report no fraction of them).
bool held_to_host_limits(const std::string& backend);

}  // namespace plab

namespace plab::bench_detail {

// The median of v (the mean of the two middle values of an even count).
double median(std::vector<double> v);
// Seconds on the steady clock.
double now_s();
// n fixed, non-trivial token ids below vocab; `stream` picks one of many
// fixed sequences (distinct prompts of a batch).
std::vector<int32_t> bench_tokens(int n, int vocab, std::uint64_t stream = 0);
// The mask bound to one benchmark prompt (random ids: no BOS, so no docs:bos).
SessionOptions session_for(const std::vector<int32_t>& tokens, const ModelConfig& c,
                           const BenchOptions& o);
// Whether the backend's op times are a host clock's (the HostTimedBackend
// wrapper around a CPU backend) rather than a device's events.
bool timed_on_host(const Backend& backend);
// The ops the backend timed since its last take, summed by name, largest first.
DeviceOpBreakdown ops_by_name(Backend& backend, double wall_ms);
// The run of median wall time (the lower middle one of an even count), with
// the number of runs it is the median of.
DeviceOpBreakdown median_by_wall_time(std::vector<DeviceOpBreakdown> runs);
// A backend that times its ops: a GPU one with its own events, a host one
// through the host clock's wrapper. Timing is off until asked for.
std::unique_ptr<Backend> timing_ops(std::unique_ptr<Backend> backend);

}  // namespace plab::bench_detail
