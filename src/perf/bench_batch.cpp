// Batched decode rows (perf/bench_batch.h).
#include "perf/bench_batch.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/error.h"
#include "perf/bench_util.h"
#include "runtime/cost_model.h"
#include "runtime/engine.h"
#include "runtime/registry.h"

namespace plab::bench_detail {
namespace {

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

}  // namespace

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

namespace {

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

// b requests of distinct random prompts in one engine, run until `decode_steps`
// steps holding exactly b decode tokens and no prefill have been timed (after
// the warm-up ones). Each request's tokens/s is 1 / step time: every request
// gets one token per step. The step time is the engine's own (StepRecord::us:
// scheduling, the forward step, sampling b tokens), as a server would see it.
// With `ops`: then kBatchOpSteps more steps with every op timed (one on a
// device), and the table of the median one by wall time into *ops. The
// wrapper's timing is off during the timed steps: one branch an op.
}  // namespace

DecodeBatchRow decode_batch_row(const Weights& weights, const std::string& backend, Kernels kernels,
                                int b, const BenchOptions& o, const MachineSpeed& machine,
                                DeviceOpBreakdown* ops) {
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

}  // namespace plab::bench_detail
