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

#include "backends/cpu_fast/cpu_fast.h"
#include "core/error.h"
#include "perf/host_timed_backend.h"
#include "runtime/chunk_plan.h"
#include "runtime/cost_model.h"
#include "runtime/device_peak.h"
#include "runtime/engine.h"
#include "runtime/registry.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace plab {
namespace {

double median(std::vector<double> v) {
    PLAB_ASSERT(!v.empty());
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// `stream` picks one of many fixed sequences (distinct prompts of a batch).
std::vector<int32_t> bench_tokens(int n, int vocab, std::uint64_t stream = 0) {
    std::vector<int32_t> t(static_cast<std::size_t>(n));
    // xorshift: fixed, non-trivial token ids; the stream moves the (never zero) seed.
    std::uint64_t x = 88172645463325252ull ^ (stream * 0x9E3779B97F4A7C15ull);
    if (x == 0) x = 88172645463325252ull;
    for (auto& id : t) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        id = static_cast<int32_t>(x % static_cast<std::uint64_t>(vocab));
    }
    return t;
}

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

// The mask bound to one benchmark prompt (random ids: no BOS, so no docs:bos).
SessionOptions session_for(const std::vector<int32_t>& tokens, const ModelConfig& c,
                           const BenchOptions& o) {
    SessionOptions so;
    MaskContext mc;
    mc.tokens = tokens;
    mc.n_heads = c.n_heads;
    so.mask = make_mask(o.mask, mc);
    return so;
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

int ceil_div(int a, int b) {
    return (a + b - 1) / b;
}

// What a batched row of b sequences asks of the engine.
struct BatchPlan {
    int max_step_tokens = 0;
    int prefill_steps = 0;  // at most this many steps before every prompt is computed
    int new_tokens = 0;     // max_new_tokens of every request
    int positions = 0;      // the most positions a sequence holds
    int blocks_per_sequence = 0;
    int kv_blocks = 0;
};

// Steps of a batched row timed op by op after its timed steps (the host
// clock's table is their median by wall time; a device's takes the first).
constexpr int kBatchOpSteps = 5;

BatchPlan batch_plan(int b, const BenchOptions& o) {
    BatchPlan p;
    // A step takes decode tokens first, then prompt tokens, up to its budget.
    // Twice the batch leaves every step at least b tokens of prompt while
    // requests are still being admitted (fewer than b are decoding then).
    p.max_step_tokens = std::max(512, 2 * b);
    p.prefill_steps = ceil_div(b * o.batch_prompt, p.max_step_tokens - b);
    // The first request admitted has made at most prefill_steps tokens when
    // the first step of b decode tokens runs; then the warm-up and timed
    // steps, and one to spare.
    p.new_tokens = p.prefill_steps + o.batch_warmup + o.decode_steps + kBatchOpSteps + 1;
    p.positions = o.batch_prompt + p.new_tokens - 1;  // the last new token is never fed back
    p.blocks_per_sequence = ceil_div(p.positions, EngineOptions{}.block_size);
    p.kv_blocks = o.kv_blocks > 0 ? o.kv_blocks : b * p.blocks_per_sequence;
    return p;
}

// Refuses, before anything is measured, a batch the bench cannot run as asked.
void check_batch(const ModelConfig& c, int b, const BenchOptions& o) {
    PLAB_CHECK(b >= 1,
               "--batch: batch size " << b << " must be at least 1; expected sizes like 1,4,16,64");
    PLAB_CHECK(b <= kMaxBenchBatch,
               "--batch: batch size " << b << " is larger than the bench runs (at most "
                                      << kMaxBenchBatch
                                      << " sequences: the pool and the step's logits grow with "
                                         "the batch, and a CPU step is compute-bound long before)");
    const BatchPlan p = batch_plan(b, o);
    PLAB_CHECK(o.batch_prompt + p.new_tokens <= c.max_seq_len,
               "--batch " << b << ": each request needs " << o.batch_prompt << " prompt + "
                          << p.new_tokens << " new tokens (" << p.prefill_steps
                          << " prefill steps, " << o.batch_warmup << " warm-up, " << o.decode_steps
                          << " timed, " << kBatchOpSteps
                          << " timed op by op, 1 spare) but max_seq_len is " << c.max_seq_len
                          << "; lower --decode-steps or --batch-prompt");
    PLAB_CHECK(b * p.blocks_per_sequence <= p.kv_blocks,
               "--batch " << b << " needs " << b * p.blocks_per_sequence << " KV blocks ("
                          << p.blocks_per_sequence << " blocks of " << EngineOptions{}.block_size
                          << " positions for each sequence's " << p.positions
                          << ") but --kv-blocks is " << o.kv_blocks << "; give --kv-blocks "
                          << b * p.blocks_per_sequence << " or more, or a smaller batch");
}

// Whether the backend's op times are a host clock's (the HostTimedBackend
// wrapper around a CPU backend) rather than a device's events.
bool timed_on_host(const Backend& backend) {
    return dynamic_cast<const HostTimedBackend*>(&backend) != nullptr;
}

// The ops the backend timed since its last take, summed by name, largest first.
DeviceOpBreakdown ops_by_name(Backend& backend, double wall_ms) {
    DeviceOpBreakdown b;
    b.backend = backend.name();
    b.clock = timed_on_host(backend) ? "host" : "device";
    b.wall_ms = wall_ms;
    for (const DeviceOpTime& t : backend.take_device_op_times()) {
        auto it = std::find_if(b.ops.begin(), b.ops.end(),
                               [&](const DeviceOpRow& row) { return row.op == t.op; });
        if (it == b.ops.end()) it = b.ops.insert(b.ops.end(), DeviceOpRow{t.op, 0, 0});
        it->launches += 1;
        it->ms += t.ms;
        b.ops_ms += t.ms;
    }
    std::stable_sort(b.ops.begin(), b.ops.end(),
                     [](const DeviceOpRow& a, const DeviceOpRow& z) { return a.ms > z.ms; });
    return b;
}

// The run of median wall time (the lower middle one of an even count), with
// the number of runs it is the median of: a host's op tables are timed more
// than once, since one run on a noisy machine can be twice as slow as the next.
DeviceOpBreakdown median_by_wall_time(std::vector<DeviceOpBreakdown> runs) {
    PLAB_ASSERT(!runs.empty());
    std::sort(runs.begin(), runs.end(), [](const DeviceOpBreakdown& a, const DeviceOpBreakdown& z) {
        return a.wall_ms < z.wall_ms;
    });
    DeviceOpBreakdown kept = runs[(runs.size() - 1) / 2];
    kept.runs = static_cast<int>(runs.size());
    return kept;
}

// Steps of b decode tokens with every op timed, after a batched row's timed
// steps: kBatchOpSteps on the host clock, whose table is the median by wall
// time (the step's own, StepRecord::us: so scheduling and sampling b tokens
// are the host work between ops); one on a device.
DeviceOpBreakdown batch_step_op_breakdown(Engine& engine, int b) {
    Backend& backend = engine.backend();
    const int steps = timed_on_host(backend) ? kBatchOpSteps : 1;
    std::vector<DeviceOpBreakdown> runs;
    while (static_cast<int>(runs.size()) < steps) {
        PLAB_ASSERT(engine.has_unfinished());  // batch_plan's new tokens cover these steps
        backend.synchronize();
        backend.take_device_op_times();  // drop anything timed before
        backend.set_device_op_timing(true);
        const StepRecord& s = engine.step();
        backend.synchronize();
        backend.set_device_op_timing(false);
        PLAB_ASSERT(s.decode_tokens == b && s.prefill_tokens == 0);
        double context = 0;  // positions cached before the step, as the timed rows count them
        for (int id : s.requests)
            context += static_cast<double>(engine.request(id).tokens.size()) - 2;
        runs.push_back(ops_by_name(backend, s.us * 1e-3));
        runs.back().tokens = b;
        runs.back().context = static_cast<int>(std::lround(context / b));
    }
    return median_by_wall_time(std::move(runs));
}

// A backend that times its ops: a GPU one with its own events, a host one
// through the host clock's wrapper. Timing is off until asked for.
std::unique_ptr<Backend> timing_ops(std::unique_ptr<Backend> backend) {
    if (backend->times_device_ops()) return backend;
    return std::make_unique<HostTimedBackend>(std::move(backend));
}

// b requests of distinct random prompts in one engine, run until `decode_steps`
// steps holding exactly b decode tokens and no prefill have been timed (after
// the warm-up ones). Each request's tokens/s is 1 / step time: every request
// gets one token per step. The step time is the engine's own (StepRecord::us:
// scheduling, the forward step, sampling b tokens), as a server would see it.
// With `ops`: then kBatchOpSteps more steps with every op timed (one on a
// device), and the table of the median one by wall time into *ops. The
// wrapper's timing is off during the timed steps: one branch an op.
DecodeBatchRow decode_batch_row(const Weights& weights, const std::string& backend, Kernels kernels,
                                int b, const BenchOptions& o, const MachineSpeed& machine,
                                DeviceOpBreakdown* ops = nullptr) {
    const ModelConfig& c = weights.config;
    const BatchPlan plan = batch_plan(b, o);
    EngineOptions eo;
    eo.backend = backend;
    eo.kv_blocks = plan.kv_blocks;  // every sequence fits: nothing is preempted
    eo.prefix_cache = false;        // nothing to share between random prompts, no lookups
    eo.max_step_tokens = plan.max_step_tokens;
    eo.max_running = b;
    // With `ops`, the model is loaded over a backend that times its ops: the
    // engine runs on it and never knows (timing wraps from outside).
    const LoadedModel model(weights, ops != nullptr ? timing_ops(make_backend(backend, kernels))
                                                    : make_backend(backend, kernels));
    Engine engine(model, eo);
    for (int i = 0; i < b; ++i) {
        std::vector<int32_t> prompt =
            bench_tokens(o.batch_prompt, c.vocab_size, static_cast<std::uint64_t>(i) + 1);
        RequestOptions ro;
        ro.max_new_tokens = plan.new_tokens;
        ro.eos_id = -1;  // no early stop: every request stays in every step
        ro.mask = session_for(prompt, c, o).mask;
        engine.add_request(std::move(prompt), ro);
    }
    std::vector<double> times;
    double context_sum = 0;
    int warm = 0;
    double timed_start = now_s();
    bool out_of_time = false;
    while (engine.has_unfinished() && static_cast<int>(times.size()) < o.decode_steps) {
        const StepRecord& s = engine.step();
        PLAB_ASSERT(s.preempted.empty());  // the pool holds every sequence
        if (s.decode_tokens != b || s.prefill_tokens != 0) continue;  // admission, or a tail
        if (warm < o.batch_warmup) {
            ++warm;
            timed_start = now_s();
            continue;
        }
        times.push_back(s.us * 1e-6);
        // Positions cached before this step: the fed-back token was the newest one.
        for (int id : s.requests)
            context_sum += static_cast<double>(engine.request(id).tokens.size()) - 2;
        out_of_time = times.size() >= 3 && now_s() - timed_start > o.budget_s;
        if (out_of_time) break;
    }
    // batch_plan gives every request tokens enough for the warm-up and timed steps.
    PLAB_ASSERT(out_of_time || static_cast<int>(times.size()) == o.decode_steps);
    if (ops != nullptr) *ops = batch_step_op_breakdown(engine, b);
    DecodeBatchRow row;
    row.backend = engine.backend().name();
    row.batch = b;
    row.steps = static_cast<int>(times.size());
    row.context = context_sum / (double(b) * row.steps);
    row.kv_blocks = plan.kv_blocks;
    row.new_tokens = plan.new_tokens;
    row.median_step_s = median(times);
    row.tokens_per_s = b / row.median_step_s;
    row.tokens_per_s_per_request = 1.0 / row.median_step_s;
    const DecodeStepCost cost = decode_step_cost(c, b, row.context);
    row.flops_per_step = cost.flops();
    row.bytes_per_step = cost.bytes();
    if (held_to_host_limits(row.backend)) {
        row.bound_tokens_per_s =
            b / roofline_step_s(cost, machine.gemm_gflops, machine.read_gb_per_s);
        row.fraction_of_bound = row.tokens_per_s / row.bound_tokens_per_s;
    }
    return row;
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

// The machine figures (GEMM peak, copy and read bandwidth) are measured on
// the host: they bound the CPU backends only. A GPU reads its weights from
// its own memory; on the H200 the host's figures put gpu at "381% of peak".
bool held_to_host_limits(const std::string& backend) {
    return backend.rfind("cpu", 0) == 0;
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

}  // namespace

bool benches_a_gpu(const BenchOptions& o) {
    return !std::all_of(o.backends.begin(), o.backends.end(), held_to_host_limits);
}

BenchReport run_bench(const Weights& weights, const BenchOptions& o) {
    const ModelConfig& c = weights.config;
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
        Backend* backend = &engine->backend();
        const DeviceModel* model = &engine->device();
        {
            // Warm-up, untimed: starts the thread pool and touches every weight once.
            const std::vector<int32_t> warm_tokens = bench_tokens(16, c.vocab_size);
            Session warm(*model, session_for(warm_tokens, c, o));
            warm.prefill(warm_tokens, ChunkPlan{{16}});
        }
        for (int n : o.lengths) {
            r.prefill.push_back(prefill_row(
                backend->name(), c, n, time_prefills(*model, n, o),
                held_to_host_limits(backend->name()) ? r.machine.gemm_gflops : r.device_peak.gflops,
                o));
        }
        // The tuned host backend's rows again, each run paired with the
        // peak's product (PrefillBenchRow::paired_*). Not cpu-ref's: it is
        // not tuned (a few percent of peak), and its 2048-token rows take
        // ~15 s a run.
        if (held_to_host_limits(backend->name()) && !backend->is_reference()) {
            for (PrefillBenchRow& row : r.prefill) {
                if (row.backend != backend->name()) continue;
                PeakBeside beside{gemms, peak_gemm_source(r.machine), {}};
                const std::vector<double> times = time_prefills(*model, row.tokens, o, &beside);
                add_paired_runs(row, c, times, beside.gflops, o);
            }
        }
        // Time by op: one more prefill per length, then one decode step.
        PLAB_ASSERT(backend->times_device_ops());  // timing_ops saw to it
        for (int n : o.lengths) r.device_ops.push_back(device_op_breakdown(*backend, *model, n, o));
        if (o.decode_steps > 0) r.decode_ops.push_back(decode_op_breakdown(*backend, *model, o));
        r.decode.push_back(decode_row(*backend, *model, o, r.machine, r.device_peak.copy_gb_per_s));
        // The largest batch's row also times one step op by op.
        const int largest_batch =
            o.batches.empty() ? 0 : *std::max_element(o.batches.begin(), o.batches.end());
        bool step_timed = false;  // once, should --batch list the largest twice
        for (int b : o.batches) {
            DeviceOpBreakdown step_ops;
            const bool with_ops = b == largest_batch && !step_timed;
            r.decode_batch.push_back(decode_batch_row(weights, name, kernels, b, o, r.machine,
                                                      with_ops ? &step_ops : nullptr));
            if (with_ops) r.decode_batch_ops.push_back(step_ops);
            step_timed = step_timed || with_ops;
        }
        if (o.load && (name == "cpu" || name == "cpu-ref")) {
            // The backends whose thread count the engine decides per op
            // (core/cpu_threads.h).
            CpuThreadCap cap(1);
            for (int n : o.lengths) {
                PrefillBenchRow row = prefill_row(
                    backend->name(), c, n, time_prefills(*model, n, o), r.machine.gemm_gflops, o);
                r.prefill_single_thread.push_back(row);
            }
        }
        if (o.load) loaded.push_back(std::move(engine));
    }
    // The crossover at the context of the largest batch of the first CPU
    // backend (the K/V term, the only one that depends on it, is small).
    const DecodeBatchRow* largest = nullptr;
    for (const DecodeBatchRow& row : r.decode_batch) {
        if (!held_to_host_limits(row.backend)) continue;
        if (largest != nullptr && row.backend != largest->backend) break;
        if (largest == nullptr || row.batch > largest->batch) largest = &row;
    }
    if (largest != nullptr) {
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
    if (!o.load) return r;
    r.load_cpu = last_allowed_cpu();
    // An hour: longer than any bench here (each row stops after budget_s).
    SpinningCompetitor competitor(r.load_cpu, 3600);
    for (const auto& l : loaded) {
        const std::string name = l->backend().name();
        for (int n : o.lengths) {
            PrefillBenchRow row =
                prefill_row(name, c, n, time_prefills(l->device(), n, o), r.machine.gemm_gflops, o);
            for (const auto& q : r.prefill) {
                if (q.backend == name && q.tokens == n)
                    row.ratio_to_quiet = row.median_s / q.median_s;
            }
            for (const auto& q : r.prefill_single_thread) {
                if (q.backend == name && q.tokens == n)
                    row.ratio_to_quiet_single_thread = row.median_s / q.median_s;
            }
            r.prefill_load.push_back(row);
        }
        DecodeBenchRow d =
            decode_row(l->backend(), l->device(), o, r.machine, r.device_peak.copy_gb_per_s);
        for (const auto& q : r.decode) {
            if (q.backend == name) d.ratio_to_quiet = d.median_step_s / q.median_step_s;
        }
        r.decode_load.push_back(d);
    }
    return r;
}

}  // namespace plab
