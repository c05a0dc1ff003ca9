// What `plab bench` takes and gives: its options and the rows of its report
// (perf/bench.h runs it; perf/bench_batch.h and perf/bench_util.h fill parts
// of it). Types only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/device_peak.h"
#include "core/kernel_choice.h"
#include "model/config.h"
#include "perf/machine.h"

namespace plab {

struct BenchOptions {
    std::vector<std::string> backends{"cpu", "cpu-ref"};
    // Kernel sets (core/kernel_choice.h) each backend is benched with; `fastest`
    // only on cpu (rows named "cpu-fastest"), skipped for the others.
    std::vector<Kernels> kernels{Kernels::invariant};
    std::vector<int> lengths{128, 512, 2048};
    int repeats = 5;              // prefill runs per (backend, length); fewer if slow
    double budget_s = 20;         // stop repeating a (backend, length) after this long
    int decode_steps = 32;        // decode steps timed after a short prompt
    int decode_prompt = 128;      // context the decode steps start from
    std::string chunks = "full";  // chunk plan for the prefill rows
    bool load = false;            // also measure next to one spinning process
    std::string mask = "causal";  // attention mask of every prefill and decode (mask_spec.h)
    // Batched decode (`--batch`): for each batch size b, one Engine serving b
    // requests of distinct random prompts; the steps that hold exactly b
    // decode tokens and no prefill are timed (decode_steps of them, fewer if
    // budget_s runs out, never fewer than 3).
    std::vector<int> batches;  // empty: no batched rows
    int batch_prompt = 32;     // prompt tokens of every request of a batched row
    int batch_warmup = 3;      // pure decode steps run untimed first
    int kv_blocks = 0;         // the pool of a batched row; 0 = just enough for its b sequences
    // n of the n^3 GEMMs that measure the peak (`--peak-size`). 2048 is large
    // enough that every library runs at its best; a smaller product is
    // quicker (a classroom laptop, a sanitizer build, a test) and reads a
    // lower peak, so the fractions of peak read higher: say which was used.
    int peak_size = kDefaultPeakSize;
};

// The largest batch `plab bench --batch` runs: the pool and the step's logits
// (b x V floats) grow with b, and a CPU step is compute-bound long before.
inline constexpr int kMaxBenchBatch = 1024;

struct PrefillBenchRow {
    std::string backend;
    int tokens = 0;
    int runs = 0;
    double median_s = 0;
    double tokens_per_s = 0;
    double gflops = 0;            // achieved: FLOPs of runtime/cost_model.h / median time
    double fraction_of_peak = 0;  // gflops / measured GEMM peak
    double worst_s = 0;           // slowest of the runs
    // Paired runs (the tuned host backend, quiet rows; empty otherwise): the
    // row's prefill again, each run followed by one product of the GEMM that
    // gave the peak (PeakGemms), at the peak's size. A shared VM's speed drifts
    // within minutes; each pair sees the same machine, so their ratio does
    // not drift with it. The pair shown is the one whose ratio is the median
    // of the pairs' (the lower middle one of an even count).
    std::vector<double> paired_prefill_s;        // each paired run's prefill time
    std::vector<double> paired_peak_run_gflops;  // the product timed right after it
    double paired_gflops = 0;                    // the median pair's prefill GFLOP/s
    double paired_peak_gflops = 0;               // its product's GFLOP/s
    double fraction_of_paired_peak = 0;          // paired_gflops / paired_peak_gflops
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
    double sweep_s = 0;                   // median of 9 WeightSweep(bytes_per_token) sweeps
    double sweep_bound_tokens_per_s = 0;  // 1 / sweep_s
    double fraction_of_sweep_bound = 0;
    // The tuned host backend only (as PrefillBenchRow's paired_*): the steps
    // again from the same prompt, each followed at once by one sweep of its
    // bytes, so the two are timed on the machine as it is at that moment.
    // Each evicts the other from the caches: the pair compares two streams
    // of the same bytes from memory. The pair shown is the one whose
    // sweep / step is its steps' median.
    std::vector<double> paired_step_s;   // each paired step's time
    std::vector<double> paired_sweep_s;  // the sweep timed right after it
    double paired_step_ms = 0;           // the median pair's
    double paired_sweep_ms = 0;
    double fraction_of_paired_sweep = 0;  // paired_sweep_ms / paired_step_ms
    double ratio_to_quiet = 0;            // under load: median_step_s / the quiet row's
    // The timed steps by how they were launched (gpu: CUDA graphs,
    // kernels/step_graph.h; all 0 on backends without graphs).
    StepGraphCounts graphs;
};

// Decode of `batch` sequences in one engine, one token each per step. The
// step reads the weights once for all of them (runtime/cost_model.h DecodeStepCost).
struct DecodeBatchRow {
    std::string backend;
    int batch = 0;
    int steps = 0;       // timed steps, each with exactly `batch` decode tokens, no prefill
    double context = 0;  // positions cached per sequence, mean over the timed steps
    int kv_blocks = 0;   // the pool it ran with
    int new_tokens = 0;  // max_new_tokens of each request (warm-up, timed steps, prefill steps)
    double median_step_s = 0;
    double tokens_per_s = 0;              // batch / median step: the machine's decode throughput
    double tokens_per_s_per_request = 0;  // 1 / median step: what each request sees
    double flops_per_step = 0;            // at `context` (runtime/cost_model.h decode_step_cost)
    double bytes_per_step = 0;
    // Roofline, CPU backends only (0 otherwise): batch / max(FLOPs / GEMM
    // peak, bytes / read bandwidth), and the measured speed as a fraction of it.
    double bound_tokens_per_s = 0;
    double fraction_of_bound = 0;
};

// Where a decode step stops being memory-bound on this machine: the batch b
// with b·f / peak = (W + b·k) / read bandwidth (runtime/cost_model.h
// decode_compute_bound_batch), at the context of the largest batch of the first CPU backend.
struct DecodeCrossover {
    double context = 0;
    double per_token_flops = 0;  // f
    double weight_bytes = 0;     // W
    double per_token_bytes = 0;  // k
    double ridge_flops_per_byte = 0;
    double batch = 0;  // +infinity: never compute-bound
};

// One prefill with every op timed, summed by op: on the device for the GPU
// backends (a CUDA event before and after every op), on the host clock for
// the host ones (perf/host_timed_backend.h: their ops end before they
// return). The sum of the op times against the wall time says how much of a
// prefill the ops themselves took; the rest is host work between them (and,
// on a GPU, gaps between launches).
struct DeviceOpRow {
    std::string op;  // the Backend method: "matmul", "attention", "upload", ...
    int launches = 0;
    double ms = 0;
};
struct DeviceOpBreakdown {
    std::string backend;
    std::string clock;             // "device" (CUDA events) or "host" (a host clock around each op)
    int tokens = 0;                // a prefill's tokens; 1 for a decode step
    int context = 0;               // a decode step: keys in the cache before it (prefill: 0)
    int runs = 1;                  // timed runs this one is the median of (host: 1-3 prefills,
                                   // 5 decode steps; JSON "prefills" / "steps")
    double wall_ms = 0;            // this run's wall time (with the events recorded)
    double ops_ms = 0;             // sum of every op's device time
    std::vector<DeviceOpRow> ops;  // largest first
};

// The device peak's product (n^3) and calls timed, best kept. 8192^3 is
// 1.1 TFLOP: ~20 ms at an H200's float32 rate, long enough that launch and
// event overheads vanish; lowered by the measurement when memory is short.
constexpr int kDevicePeakSize = 8192;
constexpr int kDevicePeakRepeats = 5;

struct BenchReport {
    ModelConfig config;
    MachineSpeed machine;
    // With a GPU backend among the backends: the device's cuBLAS SGEMM rate,
    // the GPU rows' peak (gflops 0 when they run emulated: why_not says why).
    DeviceGemmPeak device_peak;
    std::vector<PrefillBenchRow> prefill;
    std::vector<DecodeBenchRow> decode;
    std::vector<DecodeBatchRow> decode_batch;  // with BenchOptions::batches: backend by backend
    // With batches and a CPU backend among the backends (the host's peak and
    // bandwidth bound CPU backends only); otherwise has_crossover is false.
    bool has_crossover = false;
    DecodeCrossover crossover;
    // With BenchOptions::load: the cpu backend quietly on one thread, then
    // every row again next to the competitor.
    std::vector<PrefillBenchRow> prefill_single_thread;
    std::vector<PrefillBenchRow> prefill_load;
    std::vector<DecodeBenchRow> decode_load;
    int load_cpu = -1;  // the CPU the competitor spun on
    // One row per (backend, length): time by op of a prefill.
    std::vector<DeviceOpBreakdown> device_ops;
    // One row per backend (with decode_steps): time by op of a decode step.
    std::vector<DeviceOpBreakdown> decode_ops;
    // One row per backend (with batches): time by op of one step of its
    // largest batch (tokens: the batch; context: its sequences' mean).
    std::vector<DeviceOpBreakdown> decode_batch_ops;
};

}  // namespace plab
