#include "perf/bench.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>

#include "core/cpu_threads.h"
#include "core/error.h"
#include "perf/bench_batch.h"
#include "perf/bench_util.h"
#include "runtime/chunk_plan.h"
#include "runtime/cost_model.h"
#include "runtime/engine.h"
#include "runtime/measure_device_peak.h"
#include "runtime/registry.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace plab {

using bench_detail::bench_tokens;
using bench_detail::check_batch;
using bench_detail::decode_batch_row;
using bench_detail::median;
using bench_detail::median_by_wall_time;
using bench_detail::now_s;
using bench_detail::ops_by_name;
using bench_detail::session_for;
using bench_detail::timed_on_host;
using bench_detail::timing_ops;

namespace {

// A competitor for the CPUs: a child process spinning on one CPU. A process,
// not a thread, because that is what a browser or a compiler next to the
// engine is (the scheduler shares cores between processes, not threads).
// Bounded three ways: killed by the destructor, killed by the kernel when
// this process dies (PR_SET_PDEATHSIG), and exiting by itself after max_s.
class SpinningCompetitor {
public:
    SpinningCompetitor(int cpu, double max_s) {
        const pid_t parent = ::getpid();
        pid_ = ::fork();
        PLAB_CHECK(pid_ >= 0, "could not start the --load competitor process (fork failed)");
        if (pid_ == 0) {
            // Child of a multi-threaded process: async-signal-safe calls only.
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) ::_exit(0);
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(cpu, &set);
            ::sched_setaffinity(0, sizeof(set), &set);
            timespec t0{}, t{};
            ::clock_gettime(CLOCK_MONOTONIC, &t0);
            volatile std::uint64_t spin = 0;
            do {
                for (int i = 0; i < 1000000; ++i) spin = spin + 1;
                ::clock_gettime(CLOCK_MONOTONIC, &t);
            } while (double(t.tv_sec - t0.tv_sec) < max_s);
            ::_exit(0);
        }
        // Let it reach its CPU before anything is timed.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ~SpinningCompetitor() {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
    SpinningCompetitor(const SpinningCompetitor&) = delete;
    SpinningCompetitor& operator=(const SpinningCompetitor&) = delete;

private:
    pid_t pid_ = -1;
};

// The last CPU this process may run on: where the competitor spins.
int last_allowed_cpu() {
    cpu_set_t set;
    PLAB_CHECK(::sched_getaffinity(0, sizeof(set), &set) == 0, "sched_getaffinity failed");
    int last = 0;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &set)) last = c;
    }
    return last;
}

// The peak's GEMM, to be timed right after each paired prefill run.
struct PeakBeside {
    PeakGemms& gemms;
    GemmSource source;
    std::vector<double> gflops;  // one per run
};

// Cold prefills of `n` tokens: one time per run, in seconds. With `beside`,
// each run followed by one product of the peak's GEMM, whose rate is kept
// there. Each run still follows an untimed prefill of the same prompt, as the
// runs of a row without pairs follow each other: a product before the run
// would have swept the caches of weights and sent the engine's threads to
// sleep (stories15M at 128 tokens: 98 -> 62 GFLOP/s), and the pair would time
// a colder prefill than the row it stands for.
std::vector<double> time_prefills(const DeviceModel& model, int n, const BenchOptions& o,
                                  PeakBeside* beside = nullptr) {
    const ModelConfig& c = model.config();
    const std::vector<int32_t> tokens = bench_tokens(n, c.vocab_size);
    const ChunkPlan plan = parse_chunk_plan(o.chunks, n);
    std::vector<double> times;
    const double start = now_s();
    for (int i = 0; i < o.repeats; ++i) {
        if (beside != nullptr) Session(model, session_for(tokens, c, o)).prefill(tokens, plan);
        Session s(model, session_for(tokens, c, o));  // cold: an empty KV cache every run
        times.push_back(s.prefill(tokens, plan).prefill_us * 1e-6);
        if (beside != nullptr)
            beside->gflops.push_back(beside->gemms.run(beside->source, /*settle=*/true));
        if (now_s() - start > o.budget_s) break;
    }
    return times;
}

// The FLOPs of one benchmark prefill under the bench's mask (causal:
// T(T+1)/2 attention pairs; another mask: the pairs it lets through).
double prefill_flops(const ModelConfig& c, int n, const BenchOptions& o) {
    const std::vector<int32_t> tokens = bench_tokens(n, c.vocab_size);
    const SessionOptions so = session_for(tokens, c, o);
    PrefillCost cost = prefill_cost(c, n);
    if (!so.mask.is_causal())
        cost = with_visible_pairs(cost, c, double(count_visible_pairs(so.mask.view(), n)));
    return cost.total();
}

PrefillBenchRow prefill_row(const std::string& backend, const ModelConfig& c, int n,
                            const std::vector<double>& times, double peak_gflops,
                            const BenchOptions& o) {
    PrefillBenchRow row;
    row.backend = backend;
    row.tokens = n;
    row.runs = static_cast<int>(times.size());
    row.median_s = median(times);
    row.worst_s = *std::max_element(times.begin(), times.end());
    row.tokens_per_s = n / row.median_s;
    row.gflops = prefill_flops(c, n, o) / row.median_s / 1e9;
    row.fraction_of_peak = peak_gflops > 0 ? row.gflops / peak_gflops : 0;
    return row;
}

// The pair (of n) whose ratio(i) is the median, the lower of the two middle
// ones for an even n.
template <class Ratio>
std::size_t median_pair(std::size_t n, const Ratio& ratio) {
    PLAB_ASSERT(n > 0);
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t z) { return ratio(a) < ratio(z); });
    return order[(n - 1) / 2];
}

// The paired runs of a row: each run's ratio to the product right after it;
// the pair with the median ratio (the lower middle one of an even count).
void add_paired_runs(PrefillBenchRow& row, const ModelConfig& c, const std::vector<double>& times,
                     const std::vector<double>& peak_gflops, const BenchOptions& o) {
    PLAB_ASSERT(!times.empty() && times.size() == peak_gflops.size());
    const double flops = prefill_flops(c, row.tokens, o);
    const std::size_t mid = median_pair(
        times.size(), [&](std::size_t i) { return flops / times[i] / 1e9 / peak_gflops[i]; });
    row.paired_prefill_s = times;
    row.paired_peak_run_gflops = peak_gflops;
    row.paired_gflops = flops / times[mid] / 1e9;
    row.paired_peak_gflops = peak_gflops[mid];
    row.fraction_of_paired_peak = row.paired_gflops / row.paired_peak_gflops;
}

// The weight sweeps a decode row's limit is the median of (machine.h).
constexpr int kSweepRepeats = 9;

// Prefills a short prompt, then times single-token steps. With `sweep`, each
// step is followed by one sweep, whose time goes to *sweeps
// (DecodeBenchRow::paired_*).
std::vector<double> time_decode_steps(Backend& backend, const DeviceModel& model,
                                      const BenchOptions& o, WeightSweep* sweep = nullptr,
                                      std::vector<double>* sweeps = nullptr) {
    const ModelConfig& c = model.config();
    const std::vector<int32_t> prompt = bench_tokens(o.decode_prompt, c.vocab_size);
    Session s(model, session_for(prompt, c, o));
    s.prefill(prompt, ChunkPlan{{o.decode_prompt}});
    std::vector<double> steps;
    int32_t token = prompt.back();
    for (int i = 0; i < o.decode_steps; ++i) {
        const double t0 = now_s();
        const std::vector<float> logits = s.decode_step(token);
        backend.synchronize();
        steps.push_back(now_s() - t0);
        if (sweep != nullptr) sweeps->push_back(sweep->seconds());
        token = argmax(logits);
    }
    return steps;
}

// device_copy_gb_per_s: the device's copy bandwidth (0: not measured), the
// bound of a GPU row.
DecodeBenchRow decode_row(Backend& backend, const DeviceModel& model, const BenchOptions& o,
                          const MachineSpeed& machine, double device_copy_gb_per_s) {
    const ModelConfig& c = model.config();
    const StepGraphCounts before = backend.step_graph_counts();
    const std::vector<double> steps = time_decode_steps(backend, model, o);
    const StepGraphCounts after = backend.step_graph_counts();
    DecodeBenchRow d;
    d.graphs = {after.direct - before.direct, after.captured - before.captured,
                after.replayed - before.replayed};
    d.backend = backend.name();
    d.context = o.decode_prompt + o.decode_steps / 2;
    d.steps = o.decode_steps;
    d.median_step_s = median(steps);
    d.tokens_per_s = 1.0 / d.median_step_s;
    d.bytes_per_token = decode_bytes(c, d.context);
    // Each row is bound by its own machine's copy bandwidth: a GPU row by its
    // device's (0 when not measured: no bound), never the host's (on the H200
    // the host's said 1376 tok/s, which says nothing about HBM). The read
    // bandwidth and the weight sweep are host measurements: CPU rows only.
    const bool host = held_to_host_limits(d.backend);
    const double copy_gb_per_s = host ? machine.copy_gb_per_s : device_copy_gb_per_s;
    if (copy_gb_per_s > 0) {
        d.bound_tokens_per_s = copy_gb_per_s * 1e9 / d.bytes_per_token;
        d.fraction_of_bound = d.tokens_per_s / d.bound_tokens_per_s;
    }
    if (host) {
        d.read_bound_tokens_per_s = machine.read_gb_per_s * 1e9 / d.bytes_per_token;
        d.fraction_of_read_bound = d.tokens_per_s / d.read_bound_tokens_per_s;
        WeightSweep sweep(d.bytes_per_token);
        std::vector<double> sweeps;
        for (int r = 0; r < kSweepRepeats; ++r) sweeps.push_back(sweep.seconds());
        d.sweep_s = median(sweeps);
        d.sweep_bound_tokens_per_s = 1.0 / d.sweep_s;
        d.fraction_of_sweep_bound = d.tokens_per_s / d.sweep_bound_tokens_per_s;
        if (!backend.is_reference()) {
            d.paired_step_s = time_decode_steps(backend, model, o, &sweep, &d.paired_sweep_s);
            const std::size_t mid = median_pair(d.paired_step_s.size(), [&](std::size_t i) {
                return d.paired_sweep_s[i] / d.paired_step_s[i];
            });
            d.paired_step_ms = d.paired_step_s[mid] * 1e3;
            d.paired_sweep_ms = d.paired_sweep_s[mid] * 1e3;
            d.fraction_of_paired_sweep = d.paired_sweep_ms / d.paired_step_ms;
        }
    }
    return d;
}

// Caps the cpu backend's threads for one scope (the single-thread reference).
class CpuThreadCap {
public:
    explicit CpuThreadCap(int threads) { set_cpu_thread_cap(threads); }
    ~CpuThreadCap() { set_cpu_thread_cap(0); }
    CpuThreadCap(const CpuThreadCap&) = delete;
    CpuThreadCap& operator=(const CpuThreadCap&) = delete;
};

// One decode step with every op timed, after a prefill of the decode rows'
// prompt and one untimed step. On the device: one step; on the host: the
// median by wall time of 5 (a step takes milliseconds; one can be descheduled).
DeviceOpBreakdown decode_op_breakdown(Backend& backend, const DeviceModel& model,
                                      const BenchOptions& o) {
    const ModelConfig& c = model.config();
    const std::vector<int32_t> prompt = bench_tokens(o.decode_prompt, c.vocab_size);
    Session s(model, session_for(prompt, c, o));
    s.prefill(prompt, ChunkPlan{{o.decode_prompt}});
    int32_t token = argmax(s.decode_step(prompt.back()));  // untimed
    const bool host = timed_on_host(backend);
    const int steps = host ? 5 : 1;
    std::vector<DeviceOpBreakdown> runs;
    for (int i = 0; i < steps; ++i) {
        backend.synchronize();
        backend.take_device_op_times();  // drop anything timed before
        backend.set_device_op_timing(true);
        const double t0 = now_s();
        const std::vector<float> logits = s.decode_step(token);
        backend.synchronize();
        const double wall_ms = (now_s() - t0) * 1e3;
        backend.set_device_op_timing(false);
        runs.push_back(ops_by_name(backend, wall_ms));
        runs.back().context = o.decode_prompt + 1 + i;  // keys in the cache before the step
        runs.back().tokens = 1;
        token = argmax(logits);
    }
    return median_by_wall_time(std::move(runs));
}

}  // namespace

// One more prefill of `n` tokens with every op timed. On the device: one,
// cold. On the host: after one untimed prefill of the same prompt (the timed
// rows' condition: a first prefill on a new model also pays page faults),
// three, and the table is the one of median wall time (one prefill of a
// noisy machine can be twice as slow as the next). Like the timed rows, they
// stop once budget_s has gone by, the untimed prefill included, after at
// least one: cpu-ref's 2048-token prefill takes ~15 s, and four of them made
// `make bench` a minute longer. Of two, the faster one is kept.
DeviceOpBreakdown device_op_breakdown(Backend& backend, const DeviceModel& model, int n,
                                      const BenchOptions& o) {
    const ModelConfig& c = model.config();
    const std::vector<int32_t> tokens = bench_tokens(n, c.vocab_size);
    const bool host = timed_on_host(backend);
    const auto timed_prefill = [&] {
        Session s(model, session_for(tokens, c, o));
        backend.synchronize();
        backend.take_device_op_times();  // drop anything timed before
        backend.set_device_op_timing(true);
        const PrefillResult r = s.prefill(tokens, parse_chunk_plan(o.chunks, n));
        backend.set_device_op_timing(false);
        DeviceOpBreakdown b = ops_by_name(backend, r.prefill_us * 1e-3);
        b.tokens = n;
        return b;
    };
    if (!host) return timed_prefill();
    const double start = now_s();
    Session(model, session_for(tokens, c, o)).prefill(tokens, parse_chunk_plan(o.chunks, n));
    std::vector<DeviceOpBreakdown> runs;
    do {
        runs.push_back(timed_prefill());
    } while (runs.size() < 3 && now_s() - start <= o.budget_s);
    return median_by_wall_time(std::move(runs));
}

namespace {

// Each backend with each kernel set it has, in the order given.
std::vector<std::pair<std::string, Kernels>> bench_runs(const BenchOptions& o) {
    std::vector<std::pair<std::string, Kernels>> runs;
    for (const std::string& name : o.backends) {
        for (Kernels k : o.kernels)
            if (k == Kernels::invariant || name == "cpu") runs.emplace_back(name, k);
    }
    return runs;
}

// The options' limits, against the model's shape.
void check_bench_options(const ModelConfig& c, const BenchOptions& o) {
    for (int n : o.lengths) {
        PLAB_CHECK(n >= 1 && n <= c.max_seq_len,
                   "bench length " << n << " must be between 1 and max_seq_len " << c.max_seq_len);
    }
    PLAB_CHECK(o.decode_prompt >= 1 && o.decode_prompt + o.decode_steps <= c.max_seq_len,
               "decode prompt + steps must fit in max_seq_len " << c.max_seq_len);
    PLAB_CHECK(o.decode_steps >= 1, "--decode-steps must be at least 1");
    PLAB_CHECK(o.batch_prompt >= 1,
               "--batch-prompt " << o.batch_prompt << " must be at least 1 token");
    PLAB_CHECK(o.kv_blocks >= 0,
               "--kv-blocks " << o.kv_blocks << " must be at least 1 (or 0: just enough)");
    for (int b : o.batches) check_batch(c, b, o);
    PLAB_CHECK(o.peak_size >= kMinPeakSize && o.peak_size <= kMaxPeakSize,
               "--peak-size " << o.peak_size << " must be in " << kMinPeakSize << ".."
                              << kMaxPeakSize << " (the n of the n^3 GEMMs that measure the peak; "
                              << kDefaultPeakSize << " by default)");
}

// One backend (with one kernel set) as the bench runs it: the model loaded
// on it, whose backend times its ops when asked.
struct BenchedBackend {
    const std::string& name;  // as --backends names it
    Kernels kernels;
    Backend& backend;
    const DeviceModel& model;
};

// The prefill rows of one backend, one per length, after an untimed
// warm-up; for the tuned host backend, each row's runs again, each paired
// with the peak's product.
void add_prefill_rows(BenchReport& r, const BenchedBackend& b, PeakGemms& gemms,
                      const BenchOptions& o) {
    const ModelConfig& c = r.config;
    {
        // Warm-up, untimed: starts the thread pool and touches every weight once.
        const std::vector<int32_t> warm_tokens = bench_tokens(16, c.vocab_size);
        Session warm(b.model, session_for(warm_tokens, c, o));
        warm.prefill(warm_tokens, ChunkPlan{{16}});
    }
    for (int n : o.lengths) {
        r.prefill.push_back(prefill_row(
            b.backend.name(), c, n, time_prefills(b.model, n, o),
            held_to_host_limits(b.backend.name()) ? r.machine.gemm_gflops : r.device_peak.gflops,
            o));
    }
    // The tuned host backend's rows again, each run paired with the
    // peak's product (PrefillBenchRow::paired_*). Not cpu-ref's: it is
    // not tuned (a few percent of peak), and its 2048-token rows take
    // ~15 s a run.
    if (held_to_host_limits(b.backend.name()) && !b.backend.is_reference()) {
        for (PrefillBenchRow& row : r.prefill) {
            if (row.backend != b.backend.name()) continue;
            PeakBeside beside{gemms, peak_gemm_source(r.machine), {}};
            const std::vector<double> times = time_prefills(b.model, row.tokens, o, &beside);
            add_paired_runs(row, c, times, beside.gflops, o);
        }
    }
}

// The decode-batch rows of one backend, one per --batch; the largest
// batch's row also times one step op by op.
void add_decode_batch_rows(BenchReport& r, const Weights& weights, const BenchedBackend& b,
                           const BenchOptions& o) {
    const int largest_batch =
        o.batches.empty() ? 0 : *std::max_element(o.batches.begin(), o.batches.end());
    bool step_timed = false;  // once, should --batch list the largest twice
    for (int batch : o.batches) {
        DeviceOpBreakdown step_ops;
        const bool with_ops = batch == largest_batch && !step_timed;
        r.decode_batch.push_back(decode_batch_row(weights, b.name, b.kernels, batch, o, r.machine,
                                                  with_ops ? &step_ops : nullptr));
        if (with_ops) r.decode_batch_ops.push_back(step_ops);
        step_timed = step_timed || with_ops;
    }
}

// Every quiet row of one backend: prefill (and paired), time by op, decode,
// decode batches, and with --load the single-thread prefill rows.
void bench_backend(BenchReport& r, const Weights& weights, const BenchedBackend& b,
                   PeakGemms& gemms, const BenchOptions& o) {
    const ModelConfig& c = r.config;
    add_prefill_rows(r, b, gemms, o);
    // Time by op: one more prefill per length, then one decode step.
    PLAB_ASSERT(b.backend.times_device_ops());  // timing_ops saw to it
    for (int n : o.lengths) r.device_ops.push_back(device_op_breakdown(b.backend, b.model, n, o));
    if (o.decode_steps > 0) r.decode_ops.push_back(decode_op_breakdown(b.backend, b.model, o));
    r.decode.push_back(decode_row(b.backend, b.model, o, r.machine, r.device_peak.copy_gb_per_s));
    add_decode_batch_rows(r, weights, b, o);
    if (o.load && (b.name == "cpu" || b.name == "cpu-ref")) {
        // The backends whose thread count the engine decides per op
        // (core/cpu_threads.h).
        CpuThreadCap cap(1);
        for (int n : o.lengths) {
            PrefillBenchRow row = prefill_row(b.backend.name(), c, n, time_prefills(b.model, n, o),
                                              r.machine.gemm_gflops, o);
            r.prefill_single_thread.push_back(row);
        }
    }
}

// The crossover at the context of the largest batch of the first CPU
// backend (the K/V term, the only one that depends on it, is small).
void add_crossover(BenchReport& r) {
    const ModelConfig& c = r.config;
    const DecodeBatchRow* largest = nullptr;
    for (const DecodeBatchRow& row : r.decode_batch) {
        if (!held_to_host_limits(row.backend)) continue;
        if (largest != nullptr && row.backend != largest->backend) break;
        if (largest == nullptr || row.batch > largest->batch) largest = &row;
    }
    if (largest == nullptr) return;
    const DecodeStepCost k = decode_step_cost(c, 1, largest->context);
    r.has_crossover = true;
    r.crossover.context = largest->context;
    r.crossover.per_token_flops = k.per_token_flops;
    r.crossover.weight_bytes = k.weight_bytes;
    r.crossover.per_token_bytes = k.per_token_bytes;
    // The ridge point the bench prints: GEMM peak over read bandwidth.
    r.crossover.ridge_flops_per_byte = r.machine.gemm_gflops / r.machine.read_gb_per_s;
    r.crossover.batch =
        decode_compute_bound_batch(c, largest->context, r.crossover.ridge_flops_per_byte);
}

// One backend's prefill and decode rows again, next to the competitor,
// each with its ratio to the quiet row (and to the single-thread one).
void add_loaded_rows(BenchReport& r, const LoadedModel& l, const BenchOptions& o) {
    const ModelConfig& c = r.config;
    const std::string name = l.backend().name();
    for (int n : o.lengths) {
        PrefillBenchRow row =
            prefill_row(name, c, n, time_prefills(l.device(), n, o), r.machine.gemm_gflops, o);
        for (const auto& q : r.prefill) {
            if (q.backend == name && q.tokens == n) row.ratio_to_quiet = row.median_s / q.median_s;
        }
        for (const auto& q : r.prefill_single_thread) {
            if (q.backend == name && q.tokens == n)
                row.ratio_to_quiet_single_thread = row.median_s / q.median_s;
        }
        r.prefill_load.push_back(row);
    }
    DecodeBenchRow d =
        decode_row(l.backend(), l.device(), o, r.machine, r.device_peak.copy_gb_per_s);
    for (const auto& q : r.decode) {
        if (q.backend == name) d.ratio_to_quiet = d.median_step_s / q.median_step_s;
    }
    r.decode_load.push_back(d);
}

}  // namespace

bool benches_a_gpu(const BenchOptions& o) {
    return !std::all_of(o.backends.begin(), o.backends.end(), held_to_host_limits);
}

BenchReport run_bench(const Weights& weights, const BenchOptions& o) {
    const ModelConfig& c = weights.config;
    check_bench_options(c, o);
    BenchReport r;
    r.config = c;
    // The peak's products stay ready for the paired rows (PrefillBenchRow::paired_*).
    PeakGemms gemms(o.peak_size, /*with_blas=*/true);
    r.machine = measure_machine(gemms);
    // The GPU rows' peak is the device's own (a GPU does not run on the
    // host's FMAs): measured only when a GPU backend is benched.
    if (benches_a_gpu(o))
        r.device_peak = measure_device_gemm_peak(kDevicePeakSize, kDevicePeakRepeats);
    // The model loaded once per backend: the single-sequence rows are a Session
    // each on it; the batched rows get an engine of their own, with a pool for
    // b sequences. Its backend times its ops when asked (timing_ops: a host
    // backend through the host clock's wrapper, off until the tables below), so
    // the tables time the very model the rows ran, not a second copy of it.
    std::vector<std::unique_ptr<LoadedModel>> loaded;  // kept for the load pass
    PLAB_CHECK(std::find(o.kernels.begin(), o.kernels.end(), Kernels::fastest) == o.kernels.end() ||
                   std::find(o.backends.begin(), o.backends.end(), "cpu") != o.backends.end(),
               "--kernels fastest is a choice of the cpu backend: add cpu to --backends");
    for (const auto& [name, kernels] : bench_runs(o)) {
        auto engine =
            std::make_unique<LoadedModel>(weights, timing_ops(make_backend(name, kernels)));
        bench_backend(r, weights, {name, kernels, engine->backend(), engine->device()}, gemms, o);
        if (o.load) loaded.push_back(std::move(engine));
    }
    add_crossover(r);
    if (!o.load) return r;
    r.load_cpu = last_allowed_cpu();
    // An hour: longer than any bench here (each row stops after budget_s).
    SpinningCompetitor competitor(r.load_cpu, 3600);
    for (const auto& l : loaded) add_loaded_rows(r, *l, o);
    return r;
}

}  // namespace plab
