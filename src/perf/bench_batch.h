// Batched decode rows of `plab bench --batch`: b requests decoding side by
// side in one engine, the step time a server sees, and the op table of one
// such step. Internal to src/perf (perf/bench.cpp calls them).
#pragma once

#include <string>

#include "model/weights.h"
#include "perf/bench_report.h"

namespace plab::bench_detail {

// Refuses, before anything is measured, a batch the bench cannot run as asked.
void check_batch(const ModelConfig& c, int b, const BenchOptions& o);

// b requests of distinct random prompts in one engine, timed over
// o.decode_steps steps of exactly b decode tokens; with `ops`, the op table
// of one more such step (bench_batch.cpp says how).
DecodeBatchRow decode_batch_row(const Weights& weights, const std::string& backend, Kernels kernels,
                                int b, const BenchOptions& o, const MachineSpeed& machine,
                                DeviceOpBreakdown* ops = nullptr);

}  // namespace plab::bench_detail
