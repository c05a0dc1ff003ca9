// `plab bench`: prefill and decode speed, as fractions of this machine's
// measured GEMM peak and copy bandwidth. Lesson: lessons/06-compute-vs-memory.md.
// `--batch 1,4,16,64`: decode tokens/s per batch size, total and per request,
// and the batch from which a step is compute-bound (lessons/08-batching-decode.md).
// `--plot roofline.png`: the same run drawn as a roofline (perf/roofline_plot.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/cmd_bench_ladder.h"
#include "cli/common.h"
#include "core/cpu_threads.h"
#include "core/error.h"
#include "model/shapes.h"
#include "perf/bench.h"
#include "perf/roofline_plot.h"
#include "runtime/cost_model.h"

namespace plab::cli {
namespace {

struct BenchCliOptions {
    std::string model;                  // empty: random weights of the --random shape
    std::string random = "stories15m";  // the shape of those random weights
    std::string backends = "cpu,cpu-ref";
    std::string kernels = "invariant";  // core/kernel_choice.h, comma-separated
    std::string lengths = "128,512,2048";
    std::string batch;
    bool batch_given = false;  // --batch "" is an empty list, not "no --batch"
    BenchOptions bench;
    std::uint64_t seed = 15;
    bool json = false;
    std::string plot;               // empty: no roofline PNG
    bool attention_ladder = false;  // --attention-ladder: the ladder's rungs instead
};

// The prefill table (its columns unchanged since lesson 6 shows them), then
// the worst run of each row: a noisy neighbour shows up there first.
void print_bench_prefill_rows(const std::vector<PrefillBenchRow>& rows) {
    std::printf("  %-22s %7s %5s %12s %12s %10s %9s\n", "backend", "tokens", "runs", "median ms",
                "tokens/s", "GFLOP/s", "of peak");
    for (const auto& p : rows) {
        std::printf("  %-22s %7d %5d %12.2f %12.0f %10.1f", p.backend.c_str(), p.tokens, p.runs,
                    p.median_s * 1e3, p.tokens_per_s, p.gflops);
        // "-": a GPU backend is not held against the CPU's GEMM peak, only
        // against its device's (when it runs natively and cuBLAS was found).
        if (p.fraction_of_peak > 0)
            std::printf(" %8.1f%%\n", 100 * p.fraction_of_peak);
        else
            std::printf(" %9s\n", "-");
    }
    std::printf("  %-22s %7s %12s %14s\n", "backend", "tokens", "worst ms", "worst/median");
    for (const auto& p : rows) {
        std::printf("  %-22s %7d %12.2f %13.2fx\n", p.backend.c_str(), p.tokens, p.worst_s * 1e3,
                    p.worst_s / p.median_s);
    }
}

// The paired runs (perf/bench.h, PrefillBenchRow::paired_*): the rows of the
// tuned host backend again, each run followed by one product of the peak's
// GEMM. Lesson 6, "Two measurements, one machine".
void print_bench_paired_rows(const std::vector<PrefillBenchRow>& rows, const MachineSpeed& m) {
    if (std::none_of(rows.begin(), rows.end(),
                     [](const PrefillBenchRow& p) { return !p.paired_prefill_s.empty(); }))
        return;
    std::printf(
        "Paired with the peak: each run again, then one %d^3 product of the peak's GEMM right "
        "after\n"
        "  (%s), so both are timed on the machine as it is at that moment; the run shown is\n"
        "  the one whose ratio is the median of its row's\n",
        m.gemm_size, peak_source(m).c_str());
    std::printf("  %-22s %7s %5s %14s %16s %13s\n", "backend", "tokens", "runs", "GEMM GFLOP/s",
                "prefill GFLOP/s", "of that GEMM");
    for (const auto& p : rows) {
        if (p.paired_prefill_s.empty()) continue;
        std::printf("  %-22s %7d %5zu %14.1f %16.1f %12.1f%%\n", p.backend.c_str(), p.tokens,
                    p.paired_prefill_s.size(), p.paired_peak_gflops, p.paired_gflops,
                    100 * p.fraction_of_paired_peak);
    }
}

// Time by op: one more prefill per length with every op timed. GPU backends:
// a CUDA event before and after every op; what the events do not cover (host
// work between launches, launch latency) is the wall time minus their sum.
// Host backends (cpu-ref, cpu): a host clock around every call, which returns
// when the op is done; the rest of the wall time is the forward pass's own
// host work between ops.
void print_bench_device_ops(const std::vector<DeviceOpBreakdown>& rows, double budget_s) {
    for (const auto& b : rows) {
        const bool host = b.clock == "host";
        const bool emulated = b.backend.find("(emulated)") != std::string::npos;
        const bool decode = b.context > 0;  // a decode step (bench.cpp, decode_op_breakdown)
        const std::string what =
            !decode ? "one prefill of " + std::to_string(b.tokens) + " tokens"
            : b.tokens == 1
                ? "one decode step after " + std::to_string(b.context) + " keys"
                : "one step of " + std::to_string(b.tokens) + " sequences' decode tokens after " +
                      std::to_string(b.context) + " keys each (mean)";
        if (host) {
            // How many prefills the table is the median of: fewer than 3 when
            // the row's time budget ran out (bench.cpp, device_op_breakdown).
            const std::string stop =
                "a row stops repeating after " + std::to_string(static_cast<int>(budget_s)) + " s";
            const std::string of =
                decode        ? "the median of " + std::to_string(b.runs) + " steps by wall time"
                : b.runs == 1 ? "1 prefill: " + stop
                : b.runs == 2
                    ? "the faster of 2 prefills: " + stop
                    : "the median of " + std::to_string(b.runs) + " prefills by wall time";
            std::printf(
                "\nTime by op, %s, %s with the host clock read before "
                "and after every op\n  (a host backend's op has finished when its call "
                "returns; %s):\n",
                b.backend.c_str(), what.c_str(), of.c_str());
        } else {
            std::printf(
                "\nDevice time by op, %s, %s with a CUDA event before and "
                "after every op%s:\n",
                b.backend.c_str(), what.c_str(),
                emulated ? "\n  (emulated: the events read the host clock, so these time the "
                           "emulator, not a GPU)"
                         : "");
        }
        std::printf("  %-16s %9s %11s %9s\n", "op", host ? "calls" : "launches",
                    host ? "ms" : "device ms", "of wall");
        for (const auto& op : b.ops) {
            std::printf("  %-16s %9d %11.3f %8.1f%%\n", op.op.c_str(), op.launches, op.ms,
                        100 * op.ms / b.wall_ms);
        }
        std::printf(
            "  every op %20.3f %8.1f%% of the %.3f ms wall time; the other %.3f ms are %s\n",
            b.ops_ms, 100 * b.ops_ms / b.wall_ms, b.wall_ms, std::max(0.0, b.wall_ms - b.ops_ms),
            host ? "host work between ops" : "host work and gaps between launches");
    }
}

// Batched decode: one row per (backend, batch), then the roofline crossover.
void print_bench_decode_batch(const BenchReport& r, const BenchOptions& o) {
    std::printf(
        "\nDecode, batched: b requests in one engine (%d-token random prompts, prefix cache off,\n"
        "  no EOS); median of the steps with exactly b decode tokens and no prefill, after %d "
        "warm-up steps;\n"
        "  bound = b / max(FLOPs / GEMM peak, bytes / read bandwidth) of the step (roofline)\n",
        o.batch_prompt, o.batch_warmup);
    std::printf("  %-22s %6s %8s %6s %10s %12s %12s %10s %12s %9s\n", "backend", "batch", "context",
                "steps", "median ms", "tokens/s", "tok/s/req", "FLOP/byte", "bound tok/s",
                "of bound");
    for (const auto& d : r.decode_batch) {
        std::printf("  %-22s %6d %8.1f %6d %10.3f %12.1f %12.1f %10.2f", d.backend.c_str(), d.batch,
                    d.context, d.steps, d.median_step_s * 1e3, d.tokens_per_s,
                    d.tokens_per_s_per_request, d.flops_per_step / d.bytes_per_step);
        // "-": the host's peak and bandwidth do not bound a GPU backend.
        if (d.bound_tokens_per_s > 0)
            std::printf(" %12.1f %8.1f%%\n", d.bound_tokens_per_s, 100 * d.fraction_of_bound);
        else
            std::printf(" %12s %9s\n", "-", "-");
    }
    if (!r.has_crossover) return;
    const DecodeCrossover& x = r.crossover;
    // f, W, k: not F and K, which name the MLP width and the keys elsewhere.
    std::printf(
        "Roofline crossover (this machine, CPU backends), at context %.1f:\n"
        "  f = %.0f FLOPs per token, W = %.0f bytes of weights read once per step,\n"
        "  k = %.0f bytes per token (its own K/V%s); a step of b tokens does b x f FLOPs and\n"
        "  reads W + b x k bytes, so it is compute-bound once b x f / peak > (W + b x k) / "
        "bandwidth:\n",
        x.context, x.per_token_flops, x.weight_bytes, x.per_token_bytes,
        r.config.tied_embeddings ? "" : " and embedding row");
    if (std::isinf(x.batch)) {
        std::printf(
            "  never here: f / ridge = %.0f <= k, each token's own bytes keep pace with its "
            "FLOPs\n",
            x.per_token_flops / x.ridge_flops_per_byte);
        return;
    }
    std::printf(
        "  b > W / (f / ridge - k) = %.0f / (%.0f / %.1f - %.0f) = %.1f: compute-bound from batch "
        "%d\n",
        x.weight_bytes, x.per_token_flops, x.ridge_flops_per_byte, x.per_token_bytes, x.batch,
        static_cast<int>(std::floor(x.batch)) + 1);
}

// "stories15m" -> "stories15M": the shapes as llama2.c's model names spell them.
std::string bench_shape_label(std::string shape) {
    if (shape.rfind("stories", 0) == 0 && shape.back() == 'm') shape.back() = 'M';
    return shape;
}

// Everything `plab bench` shows, text or JSON: the report of perf/bench.h
// and the request it answers.
struct BenchResult {
    BenchReport report;
    BenchOptions bench;   // the request as run: mask, chunk plan, budget, batches, load
    std::string model;    // the --model path; empty: random weights of `shape`
    std::string shape;    // "stories15M": the shape as llama2.c's model names spell it
    bool gpu = false;     // a GPU backend among the backends (benches_a_gpu)
    int cpu_threads = 0;  // the CPUs this process may run on (core/cpu_threads.h)
    std::string plot;     // the roofline PNG written; empty: none
};

// "random stories15M shape", or the --model path: the JSON's and the plot's label.
std::string bench_model_label(const BenchResult& r) {
    return r.model.empty() ? "random " + r.shape + " shape" : r.model;
}

// The options turned into the bench's request, checked before the bench (it
// takes minutes).
BenchOptions bench_request(const BenchCliOptions& o) {
    BenchOptions bench = o.bench;
    bench.backends = split_list(o.backends);
    bench.kernels.clear();
    for (const std::string& k : split_list(o.kernels)) bench.kernels.push_back(parse_kernels(k));
    bench.lengths = parse_int_list(o.lengths, "--lengths");
    // --batch 1,4,16,64: the sizes themselves are checked by run_bench (at
    // least 1, a pool and max_seq_len that fit).
    if (o.batch_given) bench.batches = parse_int_list(o.batch, "--batch");
    PLAB_CHECK(bench.repeats >= 1, "--repeats must be at least 1");
    if (!o.plot.empty()) {
        // Before the bench: the plot is its last step.
        check_plot_path(o.plot);
        PLAB_CHECK(std::any_of(bench.backends.begin(), bench.backends.end(), held_to_host_limits),
                   "--plot draws this host's roofline, which bounds only the cpu backends; add "
                   "cpu or cpu-ref to --backends '"
                       << o.backends << "'");
    }
    return bench;
}

BenchResult compute_bench(const BenchCliOptions& o) {
    BenchResult r;
    r.bench = bench_request(o);
    const Weights w = o.model.empty() ? make_random_weights(named_shape(o.random), o.seed)
                                      : load_model_or_default(o.model).weights;
    r.report = run_bench(w, r.bench);
    r.model = o.model;
    r.shape = bench_shape_label(o.random);
    r.gpu = benches_a_gpu(r.bench);
    r.cpu_threads = cpu_threads();
    r.plot = o.plot;
    if (!o.plot.empty())
        write_roofline_png(roofline_figure(r.report, bench_model_label(r), r.bench.chunks), o.plot);
    return r;
}

// A figure that does not apply to a row (0) is null in the JSON.
nlohmann::json bench_or_null(double v) {
    return v != 0 ? nlohmann::json(v) : nlohmann::json(nullptr);
}

// The machine: the host's GEMM peak and bandwidths, the device's where a GPU
// backend is benched, and the threading rule.
void bench_machine_json(const BenchResult& r, nlohmann::json& j) {
    const MachineSpeed& m = r.report.machine;
    j["threads"] = m.threads;
    j["gemm_peak_gflops"] = m.gemm_gflops;
    j["gemm_peak_eigen_gflops"] = m.eigen_gemm_gflops;
    j["gemm_peak_engine_gflops"] = m.engine_gemm_gflops;
    j["gemm_peak_openblas_gflops"] = m.openblas_gemm_gflops;
    j["openblas"] = m.openblas;
    j["gemm_peak_source"] = peak_source(m);
    j["gemm_peak_size"] = m.gemm_size;
    j["copy_gb_per_s"] = m.copy_gb_per_s;
    j["read_gb_per_s"] = m.read_gb_per_s;
    j["ridge_flops_per_byte"] = m.gemm_gflops / m.read_gb_per_s;
    if (r.gpu) {
        // The GPU rows' peak: the device's cuBLAS SGEMM, null where the GPU
        // backends run emulated (the note says why).
        const DeviceGemmPeak& d = r.report.device_peak;
        j["device_gemm_peak_gflops"] = bench_or_null(d.gflops);
        j["device_gemm_peak_size"] = d.size;
        j["device_gemm_peak_source"] = d.source;
        j["device"] = d.device;
        j["device_gemm_peak_note"] = d.why_not;
        j["device_copy_gb_per_s"] = bench_or_null(d.copy_gb_per_s);
    }
    j["cpu_threads"] = r.cpu_threads;
    j["min_flops_per_thread"] = kMinFlopsPerThread;
}

nlohmann::json bench_prefill_row_json(const PrefillBenchRow& p) {
    nlohmann::json row = {
        {"backend", p.backend},
        {"tokens", p.tokens},
        {"runs", p.runs},
        {"median_s", p.median_s},
        {"worst_s", p.worst_s},
        {"tokens_per_s", p.tokens_per_s},
        {"gflops", p.gflops},
        {"fraction_of_peak",
         p.fraction_of_peak > 0 ? nlohmann::json(p.fraction_of_peak) : nlohmann::json(nullptr)}};
    if (!p.paired_prefill_s.empty()) {
        row["paired_prefill_s"] = p.paired_prefill_s;
        row["paired_peak_run_gflops"] = p.paired_peak_run_gflops;
        row["paired_gflops"] = p.paired_gflops;
        row["paired_peak_gflops"] = p.paired_peak_gflops;
        row["fraction_of_paired_peak"] = p.fraction_of_paired_peak;
    }
    if (p.ratio_to_quiet > 0) row["ratio_to_quiet"] = p.ratio_to_quiet;
    if (p.ratio_to_quiet_single_thread > 0)
        row["ratio_to_quiet_single_thread"] = p.ratio_to_quiet_single_thread;
    return row;
}

nlohmann::json bench_decode_row_json(const DecodeBenchRow& d) {
    nlohmann::json row = {{"backend", d.backend},
                          {"context", d.context},
                          {"steps", d.steps},
                          {"median_step_s", d.median_step_s},
                          {"tokens_per_s", d.tokens_per_s},
                          {"bytes_per_token", d.bytes_per_token},
                          {"bound_tokens_per_s", bench_or_null(d.bound_tokens_per_s)},
                          {"fraction_of_bound", bench_or_null(d.fraction_of_bound)},
                          {"read_bound_tokens_per_s", bench_or_null(d.read_bound_tokens_per_s)},
                          {"fraction_of_read_bound", bench_or_null(d.fraction_of_read_bound)},
                          {"sweep_s", bench_or_null(d.sweep_s)},
                          {"sweep_bound_tokens_per_s", bench_or_null(d.sweep_bound_tokens_per_s)},
                          {"fraction_of_weight_sweep", bench_or_null(d.fraction_of_sweep_bound)},
                          {"graph_steps",
                           {{"direct", d.graphs.direct},
                            {"captured", d.graphs.captured},
                            {"replayed", d.graphs.replayed}}}};
    if (!d.paired_step_s.empty()) {  // the tuned host backend's rows only
        row["paired_step_s"] = d.paired_step_s;
        row["paired_sweep_s"] = d.paired_sweep_s;
        row["paired_step_ms"] = d.paired_step_ms;
        row["paired_sweep_ms"] = d.paired_sweep_ms;
        row["fraction_of_paired_sweep"] = d.fraction_of_paired_sweep;
    }
    if (d.ratio_to_quiet > 0) row["ratio_to_quiet"] = d.ratio_to_quiet;
    return row;
}

nlohmann::json bench_decode_batch_row_json(const DecodeBatchRow& d, int prompt_tokens) {
    return {{"backend", d.backend},
            {"batch", d.batch},
            {"tokens_per_s", d.tokens_per_s},
            {"tokens_per_s_per_request", d.tokens_per_s_per_request},
            {"step_ms_median", d.median_step_s * 1e3},
            {"steps", d.steps},
            {"context", d.context},
            {"prompt_tokens", prompt_tokens},
            {"new_tokens", d.new_tokens},
            {"kv_blocks", d.kv_blocks},
            {"flops_per_step", d.flops_per_step},
            {"bytes_per_step", d.bytes_per_step},
            {"bound_tokens_per_s", bench_or_null(d.bound_tokens_per_s)},
            {"fraction_of_bound", bench_or_null(d.fraction_of_bound)}};
}

// null batch: no batch makes the step compute-bound (JSON has no infinity).
nlohmann::json bench_crossover_json(const DecodeCrossover& x) {
    return {{"context", x.context},
            {"flops_per_token", x.per_token_flops},
            {"weight_bytes", x.weight_bytes},
            {"bytes_per_token", x.per_token_bytes},
            {"ridge_flops_per_byte", x.ridge_flops_per_byte},
            {"batch", std::isinf(x.batch) ? nlohmann::json(nullptr) : nlohmann::json(x.batch)}};
}

// A breakdown's common part; the prefill rows add tokens and prefills, the
// decode-step rows context (keys in the cache before the step) and steps.
nlohmann::json bench_breakdown_json(const DeviceOpBreakdown& b) {
    nlohmann::json row = {{"backend", b.backend},
                          {"clock", b.clock},
                          {"wall_ms", b.wall_ms},
                          {"ops_ms", b.ops_ms},
                          {"ops", nlohmann::json::array()}};
    for (const auto& op : b.ops)
        row["ops"].push_back({{"op", op.op}, {"launches", op.launches}, {"ms", op.ms}});
    return row;
}

// A decode step's: the context it ran at and the steps it is the median of.
nlohmann::json bench_step_breakdown_json(const DeviceOpBreakdown& b) {
    nlohmann::json row = bench_breakdown_json(b);
    row["context"] = b.context;
    row["steps"] = b.runs;
    return row;
}

// Time by op of a prefill, a decode step and a batched step (its batch too).
void bench_ops_json(const BenchReport& r, nlohmann::json& j) {
    for (const auto& b : r.device_ops) {
        nlohmann::json row = bench_breakdown_json(b);
        row["tokens"] = b.tokens;
        row["prefills"] = b.runs;
        j["device_ops"].push_back(row);
    }
    j["decode_device_ops"] = nlohmann::json::array();
    for (const auto& b : r.decode_ops)
        j["decode_device_ops"].push_back(bench_step_breakdown_json(b));
    j["decode_batch_device_ops"] = nlohmann::json::array();
    for (const auto& b : r.decode_batch_ops) {
        nlohmann::json row = bench_step_breakdown_json(b);
        row["batch"] = b.tokens;
        j["decode_batch_device_ops"].push_back(row);
    }
}

// Keys with a list of rows appear only when the list has rows (null never).
nlohmann::json bench_json(const BenchResult& res) {
    const BenchReport& r = res.report;
    nlohmann::json j;
    j["model"] = bench_model_label(res);
    j["mask"] = res.bench.mask;
    bench_machine_json(res, j);
    for (const auto& p : r.prefill) j["prefill"].push_back(bench_prefill_row_json(p));
    for (const auto& d : r.decode) j["decode"].push_back(bench_decode_row_json(d));
    for (const auto& d : r.decode_batch)
        j["decode_batch"].push_back(bench_decode_batch_row_json(d, res.bench.batch_prompt));
    if (r.has_crossover) j["decode_crossover"] = bench_crossover_json(r.crossover);
    bench_ops_json(r, j);
    if (res.bench.load) {
        j["load"] = {{"competitor", "one process spinning"}, {"cpu", r.load_cpu}};
        j["prefill_single_thread"] = nlohmann::json::array();
        for (const auto& p : r.prefill_single_thread)
            j["prefill_single_thread"].push_back(bench_prefill_row_json(p));
        for (const auto& p : r.prefill_load) j["prefill_load"].push_back(bench_prefill_row_json(p));
        for (const auto& d : r.decode_load) j["decode_load"].push_back(bench_decode_row_json(d));
    }
    return j;
}

// The model, this machine's measured peak and bandwidths, the ridge point.
void print_bench_machine_text(const BenchResult& res) {
    const MachineSpeed& m = res.report.machine;
    std::printf("Model: %s (%s, %zu parameters)\n",
                res.model.empty() ? ("random, " + res.shape + " shape").c_str() : res.model.c_str(),
                res.report.config.summary().c_str(), res.report.config.n_params());
    // OpenBLAS's figure, or "-" where it was not measured (the next line says why).
    char openblas[32] = "-";
    if (m.openblas_gemm_gflops > 0)
        std::snprintf(openblas, sizeof(openblas), "%.1f", m.openblas_gemm_gflops);
    std::printf(
        "Machine (measured now, %d threads): float32 GEMM peak %.1f GFLOP/s (best of %d, %d^3: "
        "Eigen %.1f, OpenBLAS %s, the engine's own %.1f),\n"
        "  the peak from %s (OpenBLAS: %s),\n"
        "  copy bandwidth %.1f GB/s (read + written, 256 MiB memcpy),\n"
        "  read bandwidth %.1f GB/s (1 GiB summed)\n"
        "Ridge point: %.1f GFLOP/s / %.1f GB/s = %.1f FLOP per byte read: an op doing fewer\n"
        "  FLOPs per byte it reads is memory-bound here (roofline model, Williams et al. 2009)\n\n",
        m.threads, m.gemm_gflops, m.gemm_repeats, m.gemm_size, m.eigen_gemm_gflops, openblas,
        m.engine_gemm_gflops, peak_source(m).c_str(), m.openblas.c_str(), m.copy_gb_per_s,
        m.read_gb_per_s, m.gemm_gflops, m.read_gb_per_s, m.gemm_gflops / m.read_gb_per_s);
}

// The device's peak and bandwidth, the gpu rows' yardsticks.
void print_bench_device_text(const DeviceGemmPeak& d) {
    if (d.gflops > 0)
        std::printf(
            "Device (measured now): float32 GEMM peak %.1f GFLOP/s on %s (best of %d, %d^3,\n"
            "  %s): the gpu rows' \"of peak\"\n",
            d.gflops, d.device.c_str(), kDevicePeakRepeats, d.size, d.source.c_str());
    else
        std::printf("Device GEMM peak: not measured (%s); the gpu rows have no \"of peak\"\n",
                    d.why_not.c_str());
    if (d.copy_gb_per_s > 0)
        std::printf(
            "  copy bandwidth %.1f GB/s (read + written, %zu MiB cudaMemcpy device to device): "
            "the gpu\n  rows' decode bound\n",
            d.copy_gb_per_s, d.copy_bytes >> 20);
    std::printf("\n");
}

// The prefill rows, how their FLOPs are counted, and where their time goes.
void print_bench_prefill_text(const BenchResult& res) {
    const BenchOptions& o = res.bench;
    // Under another mask the attention term counts the pairs it lets through
    // (plab mask SPEC --length T prints them), so GFLOP/s stays useful work.
    const bool causal = o.mask == "causal";
    std::printf(
        "Prefill of a cold prompt (plan %s), FLOPs counted as\n"
        "  2*T*L*(D*H*Dh + 2*D*Hkv*Dh + H*Dh*D + 3*D*F)   projections and SwiGLU\n"
        "  + 4*Dh*H*L * %-34s %s\n"
        "  + 2*D*V                                         logits of the last position\n",
        o.chunks.c_str(), causal ? "T(T+1)/2" : "visible pairs",
        causal ? "causal attention pairs"
               : ("attention pairs " + o.mask + " lets through").c_str());
    print_bench_prefill_rows(res.report.prefill);
    print_bench_paired_rows(res.report.prefill, res.report.machine);
    print_bench_device_ops(res.report.device_ops, o.budget_s);
}

// Each decode row against the host's read bandwidth and a weight sweep, and
// the paired runs of the tuned host backend.
void print_bench_decode_bounds(const BenchResult& res) {
    for (const auto& d : res.report.decode) {
        if (d.read_bound_tokens_per_s == 0) continue;
        std::printf(
            "  %s against the read bandwidth (%.1f GB/s, 1 GiB summed): bound %.1f tok/s, "
            "reached %.1f%%\n",
            d.backend.c_str(), res.report.machine.read_gb_per_s, d.read_bound_tokens_per_s,
            100 * d.fraction_of_read_bound);
        std::printf(
            "  %s against a weight sweep (the same bytes through a multiply-add, %d threads, "
            "%.3f ms): bound %.1f tok/s, reached %.1f%%\n",
            d.backend.c_str(), res.cpu_threads, d.sweep_s * 1e3, d.sweep_bound_tokens_per_s,
            100 * d.fraction_of_sweep_bound);
        if (d.paired_step_s.empty()) continue;
        std::printf(
            "  %s paired with the sweep: %zu steps again, each followed by one sweep (each "
            "evicts the other from the caches);\n    the median pair: step %.3f ms, sweep %.3f "
            "ms, reached %.1f%%\n",
            d.backend.c_str(), d.paired_step_s.size(), d.paired_step_ms, d.paired_sweep_ms,
            100 * d.fraction_of_paired_sweep);
    }
}

// One token per step: the rows, how gpu steps were launched, the bounds.
void print_bench_decode_text(const BenchResult& res) {
    const BenchReport& r = res.report;
    std::printf(
        "\nDecode (one token per step; bound = copy bandwidth / bytes read per token:\n"
        "  every weight + the K/V of the context; the host's bandwidth for cpu rows, the\n"
        "  device's for gpu rows)\n");
    std::printf("  %-22s %8s %12s %12s %14s %12s %9s\n", "backend", "context", "median ms",
                "tokens/s", "bytes/token", "bound tok/s", "of bound");
    for (const auto& d : r.decode) {
        std::printf("  %-22s %8d %12.3f %12.1f %14.0f", d.backend.c_str(), d.context,
                    d.median_step_s * 1e3, d.tokens_per_s, d.bytes_per_token);
        // "-": a GPU row without its device's bandwidth (emulated): the
        // host's does not bound it.
        if (d.bound_tokens_per_s > 0)
            std::printf(" %12.1f %8.1f%%\n", d.bound_tokens_per_s, 100 * d.fraction_of_bound);
        else
            std::printf(" %12s %9s\n", "-", "-");
    }
    // gpu: how the steps were launched (kernels/step_graph.h).
    for (const auto& d : r.decode) {
        const StepGraphCounts& g = d.graphs;
        if (g.direct + g.captured + g.replayed == 0) continue;
        std::printf(
            "  %s: %lld of %d steps replayed one CUDA graph (%lld launched kernel by kernel, "
            "%lld captured); PLAB_GPU_GRAPHS=0 launches every kernel on its own\n",
            d.backend.c_str(), g.replayed, d.steps, g.direct, g.captured);
    }
    print_bench_decode_bounds(res);
}

// --load: the quiet single-thread reference, then every row next to one
// spinning process, as ratios to the quiet runs.
void print_bench_load_text(const BenchReport& r) {
    std::printf("\nQuiet, capped at 1 thread (the reference for the loaded runs):\n");
    print_bench_prefill_rows(r.prefill_single_thread);
    std::printf("\nUnder load: one other process spinning on CPU %d\n", r.load_cpu);
    print_bench_prefill_rows(r.prefill_load);
    std::printf("  %-22s %7s %18s %22s\n", "backend", "tokens", "median / quiet",
                "median / quiet 1-thr");
    for (const auto& p : r.prefill_load) {
        std::printf("  %-22s %7d %17.2fx", p.backend.c_str(), p.tokens, p.ratio_to_quiet);
        if (p.ratio_to_quiet_single_thread > 0)
            std::printf(" %21.2fx\n", p.ratio_to_quiet_single_thread);
        else
            std::printf(" %22s\n", "-");
    }
    for (const auto& d : r.decode_load) {
        std::printf("  %s decode under load: %.1f tokens/s, median step %.2fx the quiet one\n",
                    d.backend.c_str(), d.tokens_per_s, d.ratio_to_quiet);
    }
}

void print_bench_text(const BenchResult& res) {
    const BenchReport& r = res.report;
    print_bench_machine_text(res);
    if (res.gpu) print_bench_device_text(r.device_peak);
    print_bench_prefill_text(res);
    print_bench_decode_text(res);
    // Where a decode step's time goes, the same way as the prefill's.
    print_bench_device_ops(r.decode_ops, res.bench.budget_s);
    if (!r.decode_batch.empty()) print_bench_decode_batch(r, res.bench);
    // Where the largest batch's step goes: the weights read once, the FLOPs b times.
    print_bench_device_ops(r.decode_batch_ops, res.bench.budget_s);
    std::printf(
        "\nThreads: cpu and cpu-ref use up to %d (the CPUs this process may run on), one per "
        "%.0f MFLOP of an op's work\n",
        res.cpu_threads, kMinFlopsPerThread / 1e6);
    if (!res.plot.empty()) std::printf("\nRoofline written to %s\n", res.plot.c_str());
    if (res.bench.load) print_bench_load_text(r);
}

void run(const BenchCliOptions& o) {
    const BenchResult r = compute_bench(o);
    if (o.json)
        print_json(bench_json(r));
    else
        print_bench_text(r);
}

}  // namespace

void add_bench_command(CLI::App& app) {
    auto o = std::make_shared<BenchCliOptions>();
    CLI::App* cmd =
        app.add_subcommand("bench", "prefill/decode speed vs this machine's measured peak");
    CLI::Option* model_option = cmd->add_option(
        "--model", o->model, "model directory (default: random weights of the --shape shape)");
    cmd->add_option("--shape,--random", o->random,
                    "shape of the random weights when no --model is given: stories15m, "
                    "stories110m, small")
        ->capture_default_str()
        ->excludes(model_option);
    cmd->add_option("--backends", o->backends, "comma-separated backends")->capture_default_str();
    cmd->add_option("--kernels", o->kernels,
                    "comma-separated kernel sets: invariant, fastest (cpu only: its rows are "
                    "named cpu-fastest; lesson 16)")
        ->capture_default_str();
    CLI::Option* lengths =
        cmd->add_option("--lengths", o->lengths, "prompt lengths")->capture_default_str();
    cmd->add_option("--repeats", o->bench.repeats, "prefill runs per row (median)")
        ->capture_default_str();
    cmd->add_option("--chunks", o->bench.chunks, "chunk plan for the prefill rows")
        ->capture_default_str();
    cmd->add_option("--decode-steps", o->bench.decode_steps, "decode steps timed")
        ->capture_default_str();
    CLI::Option* batch =
        cmd->add_option("--batch", o->batch,
                        "decode tokens/s at these batch sizes, e.g. 1,4,16,64 (one engine each)");
    cmd->add_option("--batch-prompt", o->bench.batch_prompt,
                    "prompt tokens of each request of a batched row")
        ->capture_default_str();
    cmd->add_option("--kv-blocks", o->bench.kv_blocks,
                    "KV pool of a batched row in blocks (0: just enough for the batch)")
        ->capture_default_str();
    cmd->add_option("--seed", o->seed, "seed of the random weights")->capture_default_str();
    cmd->add_option("--peak-size", o->bench.peak_size,
                    "n of the n^3 GEMMs that measure the peak (smaller: quicker, a lower peak)")
        ->capture_default_str();
    cmd->add_flag("--load", o->bench.load,
                  "measure again next to one process spinning on a CPU, and against a quiet "
                  "single-thread run");
    add_mask_option(cmd, o->bench.mask);
    cmd->add_flag("--json", o->json, "machine-readable output");
    cmd->add_option("--plot", o->plot,
                    "also draw the run as a roofline PNG (peak, bandwidth, one point per row)");
    cmd->add_flag("--attention-ladder", o->attention_ladder,
                  "the attention kernel ladder (naive, online, tiled, flash) on one prefill of "
                  "the model's shape (the first of --lengths, else 256): K/V bytes and operations "
                  "each rung counts in the emulator, its error, GPU time where there is a GPU");
    cmd->callback([o, batch, lengths] {
        o->batch_given = batch->count() > 0;
        if (o->attention_ladder) {
            LadderCliOptions l{o->model, o->random, 256, o->seed, o->json};
            if (lengths->count() > 0) l.length = parse_int_list(o->lengths, "--lengths").at(0);
            return run_attention_ladder_bench(l);
        }
        run(*o);
    });
}

}  // namespace plab::cli
