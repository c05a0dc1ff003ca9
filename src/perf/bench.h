// `plab bench`: prefill and decode speed against this machine's measured limits.
//
// Prefill rows: tokens/s and achieved GFLOP/s (runtime/cost_model.h) as a fraction of
// the GEMM peak measured in the same run. Decode rows: tokens/s beside the
// memory-bandwidth bound (bytes read per token / measured copy bandwidth).
// Medians of several runs, because shared machines are noisy; the worst run
// beside it, because a noisy neighbour shows up there first. The `cpu` rows
// are timed once more in pairs, each run followed by one product of the
// peak's GEMM: a ratio of two figures timed at the same moment, which a
// drifting VM does not move (lesson 6, "Two measurements, one machine").
//
// With `batches`, decode is also measured b sequences at a time through one
// Engine: total and per-request tokens/s, each against the roofline, and the
// batch from which a step is compute-bound here (lessons/08-batching-decode.md).
//
// With `load`, every row is measured a second time while a competitor process
// spins on one CPU (a prefill that collapses next to a busy core),
// and reported as a ratio to the quiet run. The cpu backend is also measured
// quietly on a single thread, the reference a loaded run is held against.
#pragma once

#include <string>

#include "model/weights.h"
#include "perf/bench_report.h"
#include "perf/bench_util.h"

namespace plab {

class DeviceModel;

BenchReport run_bench(const Weights& weights, const BenchOptions& options);

// One more prefill of `n` tokens of the bench's prompt on `model`, whose
// backend times its ops (times_device_ops()): the table run_bench prints
// after its prefill rows. A host backend's is the median of up to 3 prefills,
// fewer once options.budget_s has gone by (DeviceOpBreakdown::runs).
DeviceOpBreakdown device_op_breakdown(Backend& backend, const DeviceModel& model, int n,
                                      const BenchOptions& options);

// Whether a backend not held to them (a GPU one) is benched: then the
// device's own peak is measured too (BenchReport::device_peak).
bool benches_a_gpu(const BenchOptions& options);

}  // namespace plab
