// `plab bench`: prefill and decode speed against this machine's measured limits.
//
// Prefill rows: tokens/s and achieved GFLOP/s (perf/flops.h) as a fraction of
// the GEMM peak measured in the same run. Decode rows: tokens/s beside the
// memory-bandwidth bound (bytes read per token / measured copy bandwidth).
// Medians of several runs, because shared machines are noisy; the worst run
// beside it, because a noisy neighbour shows up there first.
//
// With `load`, every row is measured a second time while a competitor process
// spins on one CPU (issue 12: a prefill that collapses next to a busy core),
// and reported as a ratio to the quiet run. The cpu backend is also measured
// quietly on a single thread, the reference a loaded run is held against.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/weights.h"
#include "perf/machine.h"

namespace plab {

struct BenchOptions {
    std::vector<std::string> backends{"cpu", "cpu-ref"};
    std::vector<int> lengths{128, 512, 2048};
    int repeats = 5;              // prefill runs per (backend, length); fewer if slow
    double budget_s = 20;         // stop repeating a (backend, length) after this long
    int decode_steps = 32;        // decode steps timed after a short prompt
    int decode_prompt = 128;      // context the decode steps start from
    std::string chunks = "full";  // chunk plan for the prefill rows
    bool load = false;            // also measure next to one spinning process
    std::string mask = "causal";  // attention mask of every prefill and decode (mask_spec.h)
};

struct PrefillBenchRow {
    std::string backend;
    int tokens = 0;
    int runs = 0;
    double median_s = 0;
    double tokens_per_s = 0;
    double gflops = 0;            // achieved: FLOPs of perf/flops.h / median time
    double fraction_of_peak = 0;  // gflops / measured GEMM peak
    double worst_s = 0;           // slowest of the runs
    // Rows measured under load only (0 otherwise):
    double ratio_to_quiet = 0;                // median_s / the quiet row's median_s
    double ratio_to_quiet_single_thread = 0;  // median_s / quiet 1-thread median (cpu only)
};

struct DecodeBenchRow {
    std::string backend;
    int context = 0;
    int steps = 0;
    double median_step_s = 0;
    double tokens_per_s = 0;
    double bytes_per_token = 0;
    double bound_tokens_per_s = 0;  // copy bandwidth / bytes per token
    double fraction_of_bound = 0;
    double read_bound_tokens_per_s = 0;  // read bandwidth / bytes per token
    double fraction_of_read_bound = 0;
    double ratio_to_quiet = 0;  // under load: median_step_s / the quiet row's
};

// One prefill of a backend that times its ops on the device (the GPU
// backends: a CUDA event before and after every op), summed by op. The sum of
// the op times against the wall time says how much of a prefill the kernels
// and copies themselves took; the rest is host work and gaps between launches.
struct DeviceOpRow {
    std::string op;  // the Backend method: "matmul", "attention", "upload", ...
    int launches = 0;
    double ms = 0;
};
struct DeviceOpBreakdown {
    std::string backend;
    int tokens = 0;
    double wall_ms = 0;            // this prefill's wall time (with the events recorded)
    double ops_ms = 0;             // sum of every op's device time
    std::vector<DeviceOpRow> ops;  // largest first
};

struct BenchReport {
    ModelConfig config;
    MachineSpeed machine;
    std::vector<PrefillBenchRow> prefill;
    std::vector<DecodeBenchRow> decode;
    // With BenchOptions::load: the cpu backend quietly on one thread, then
    // every row again next to the competitor.
    std::vector<PrefillBenchRow> prefill_single_thread;
    std::vector<PrefillBenchRow> prefill_load;
    std::vector<DecodeBenchRow> decode_load;
    int load_cpu = -1;  // the CPU the competitor spun on
    // One row per (GPU backend, length): device time by op.
    std::vector<DeviceOpBreakdown> device_ops;
};

BenchReport run_bench(const Weights& weights, const BenchOptions& options);

}  // namespace plab
