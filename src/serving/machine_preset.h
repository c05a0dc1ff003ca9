// This machine as a roofline preset, profiled the way Vidur profiles a GPU:
// the engine's own steps timed, the roofline's free numbers solved from them.
//
// What it teaches: a card's preset is a datasheet plus assumed efficiencies;
// this machine's is measured. Its peak FLOP/s and its bandwidth come from
// plab bench's measurements (perf/machine.h, passed in: serving measures
// nothing of the machine itself); here the engine runs two prefills and a
// decode, and the clock's remaining numbers follow:
//   prefill of n tokens:  t(n) = overhead + FLOPs(n) / rate   (compute-bound)
//     two lengths give the attained rate (-> compute efficiency = rate / peak);
//   decode at batch 1:    t = overhead + max(FLOPs / rate, bytes / bandwidth)
//     gives the fixed cost of a step (requests arriving after idling, as a
//     workload's do);
//   the long prefill again after 50 ms of idling: its extra time is what a
//     cold step costs (the first after kColdAfterIdleUs of idling).
#pragma once

#include "model/model_io.h"
#include "runtime/engine.h"
#include "serving/presets.h"

namespace plab {

// `peak_gflops`: the measured fp32 GEMM peak; `weights_gb_per_s`: the
// bandwidth the weights are read at (a sweep of a buffer their size).
HardwarePreset profile_this_machine(const Model& model, const EngineOptions& engine,
                                    double peak_gflops, double weights_gb_per_s, double memory_gb);

}  // namespace plab
