// Engine: one model serving many requests from one paged KV block pool.
//
// What it teaches: the three pieces every serving engine (vLLM, SGLang,
// nano-vllm) rests on, small enough to read in an afternoon.
//   1. One block pool (runtime/kv_cache.h) that every request takes its KV
//      blocks from and gives them back to.
//   2. Steps over many sequences (runtime/forward.h forward_step): each step
//      a scheduler picks, under a token budget, decode tokens of running
//      requests first and then prefill chunks of waiting ones, and runs them
//      as one forward pass — the weights are read once for all of them.
//   3. A prefix cache: full blocks named by a hash chain; a new request whose
//      prompt starts with a cached prefix takes those blocks instead of
//      computing them. A full hit still computes the last prompt token,
//      because the first new token comes from its logits.
// When the pool runs out, the most recently admitted running request is
// preempted: its blocks go back (named ones stay cached) and it waits to be
// computed again from its tokens (vLLM's recompute policy); on a reference
// backend it then finishes with the very same tokens.
//
// An Engine runs on a LoadedModel (runtime/loaded_model.h), the same a Session
// runs on; it takes one, or loads its own from weights and a backend name.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/kernel_choice.h"
#include "model/weights.h"
#include "runtime/device_model.h"
#include "runtime/forward.h"
#include "runtime/kv_cache.h"
#include "runtime/loaded_model.h"
#include "runtime/request.h"
#include "runtime/scheduler.h"
#include "trace/trace.h"

namespace plab {

// How long a step that ran `schedule` takes on the virtual clock, in µs. The
// engine only keeps the clock; what a step costs is a model the caller brings
// (serving/step_cost.h).
using StepDuration = std::function<double(const ModelConfig&, const Schedule&)>;

struct EngineOptions {
    std::string backend = "cpu";  // runtime/registry.h names; for an engine that loads its model
    Kernels kernels = Kernels::invariant;  // core/kernel_choice.h; likewise
    int block_size = 16;                   // B: positions per KV block
    // Blocks in the shared pool; 0 = enough for 4 sequences of max_seq_len.
    int kv_blocks = 0;
    bool prefix_cache = true;
    // Token budget of one step: decode tokens and prefill chunks together
    // (vLLM's max_num_batched_tokens). A prompt longer than it is prefilled
    // in chunks over several steps.
    int max_step_tokens = 512;
    int max_running = 64;  // sequences in one step at most (vLLM's max_num_seqs)
    // How requests are grouped into steps (runtime/scheduler.h). Policies
    // other than chunked prefill whole prompts: their budget must be at least
    // max_seq_len.
    Policy policy = Policy::chunked;
    // Speculative decoding (runtime/speculative.h): k > 0 gives each decoding
    // request up to k guesses a step, verified in one span of k + 1 positions.
    SpeculativeOptions speculative;
};

// What one step ran.
struct StepRecord {
    int index = 0;
    double start_us = 0;
    double us = 0;              // wall time of the step: schedule, forward, sample
    int prefill_tokens = 0;     // tokens of requests still computing their known tokens
    int decode_tokens = 0;      // single tokens of requests past their prompt
    std::vector<int> requests;  // ids in the step, in step order
    std::vector<int> tokens;    // tokens each of them computed in this step
    std::vector<bool> decode;   // whether that was a decode token (else a prompt chunk)
    // Speculative decoding: per request of the step, the guesses its verify
    // span checked and how many were accepted (0 and 0 for any other span).
    std::vector<int> guesses, accepted;
    std::vector<int> preempted;
    std::vector<int> finished;
    int blocks_in_use = 0;  // after the step
    int cached_free_blocks = 0;
    // What a step-cost model predicted for this step (the virtual clock's
    // duration, or use_step_predictor's on the real clock); 0 without one.
    double predicted_us = 0;
};

struct PoolStats {
    int num_blocks = 0;
    int block_size = 0;
    int blocks_in_use = 0;
    int cached_free_blocks = 0;
    int free_blocks = 0;  // never-named + cached free
    long long hit_blocks = 0;
    long long miss_blocks = 0;
    long long evictions = 0;
    long long preemptions = 0;
};

class Engine {
public:
    // On a model loaded elsewhere (it must outlive the engine); options.backend unused.
    Engine(const LoadedModel& model, EngineOptions options = {}, Trace* trace = nullptr);
    // Loads its own: `weights` on the backend options.backend names.
    Engine(const Weights& weights, EngineOptions options = {}, Trace* trace = nullptr);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    Backend& backend() const { return loaded_->backend(); }
    const DeviceModel& model() const { return loaded_->device(); }
    const EngineOptions& options() const { return options_; }
    // The model's identity, mixed into every block name of the prefix cache.
    std::uint64_t model_salt() const { return loaded_->identity(); }

    // Queues a request; returns its id (0, 1, ...). Refuses, with one line,
    // a request the whole pool could never hold.
    // `arrival_us` (engine clock) when the request arrived before now (a
    // workload replay adds requests between steps); default now.
    int add_request(std::vector<int32_t> prompt, RequestOptions options, double arrival_us = -1);
    // Disaggregated serving: a request whose prompt another engine prefilled.
    // `kv` holds that engine's K/V of the prompt (Request::kv of a request run
    // with hand_over_kv); `first_token` was sampled there at `first_token_us`
    // (this engine's clock). It joins the queue and, once admitted, decodes.
    int add_prefilled(std::vector<int32_t> prompt, int32_t first_token,
                      std::vector<std::vector<float>> kv, RequestOptions options, double arrival_us,
                      double first_token_us);
    // A finished request's K/V copied out with hand_over_kv, moved to the
    // caller (for Engine::add_prefilled on the decode engine).
    std::vector<std::vector<float>> take_handed_over_kv(int id);
    bool has_unfinished() const { return scheduler_ && scheduler_->has_unfinished(); }
    // One scheduling decision and one forward step over the chosen sequences.
    const StepRecord& step();
    // Steps until every request is finished.
    void run();

    const Request& request(int id) const { return *requests_.at(static_cast<std::size_t>(id)); }
    int num_requests() const { return static_cast<int>(requests_.size()); }
    const std::vector<StepRecord>& steps() const { return steps_; }
    PoolStats pool_stats() const;
    // The pool, made at the first request (clients that run one Session never pay for it).
    const KvCache& cache() const;
    double now_us() const;
    // From now on, time is virtual: each step advances it by `duration` of
    // what it ran, and tokens are stamped at the step's end. Used by workload
    // replay (serving/serve.h) to make a run deterministic.
    void use_virtual_clock(StepDuration duration);
    bool virtual_clock() const { return virtual_; }
    // Real clock: each step's time is also predicted by `predict` (recorded
    // as StepRecord::predicted_us beside the measured us) — how a cost
    // model's error is measured (plab serve --validate-cost).
    void use_step_predictor(StepDuration predict) { predictor_ = std::move(predict); }
    // Virtual clock only: an idle engine waits for the next arrival.
    void advance_clock_to(double us);

private:
    // The block pool, the scheduler over it and the activations' workspace,
    // made at the first request (the pool's size may depend on its options).
    KvCache& ensure_pool();
    // The jobs of one step(), in order.
    Schedule take_in(StepRecord& rec, double& predictor_us);
    std::vector<StepItem> step_items(const Schedule& schedule, StepRecord& rec) const;
    bool samples_on_device(const Schedule& schedule) const;
    // Speculative decoding (engine_speculation.cpp): each decoding request's
    // guesses before the scheduler decides; which spans sample by the rule;
    // after a verify step, the accepted tokens kept and the rest rolled back
    // (returns the guesses accepted).
    void propose_guesses();
    bool speculates(const ScheduledSpan& span) const;
    int accept_verified(Request& r, std::span<const float> rows, int guesses);
    void sample_and_finish(const Schedule& schedule, const std::vector<StepItem>& items,
                           const StepOutput& out, bool on_device, StepRecord& rec);
    void finish(Request& r, const char* reason);
    void close_step(StepRecord& rec, double predictor_us, double trace_t0);
    static void check_options(const EngineOptions& o, const ModelConfig& c);
    static std::unique_ptr<LoadedModel> load_checked(const Weights& weights,
                                                     const EngineOptions& o);
    static SchedulerOptions scheduler_options_of(const EngineOptions& o);  // the scheduler's part
    SchedulerOptions scheduler_options() const;  // ...and the model's identity

    EngineOptions options_;
    Trace* trace_;
    std::unique_ptr<LoadedModel> owned_;  // when the engine loaded its own model
    const LoadedModel* loaded_;
    std::unique_ptr<KvCache> cache_;
    std::unique_ptr<Workspace> ws_;
    std::vector<std::unique_ptr<Request>> requests_;
    std::unique_ptr<Scheduler> scheduler_;  // made with the pool
    std::vector<StepRecord> steps_;
    double t0_ = 0;
    bool virtual_ = false;
    StepDuration duration_;
    StepDuration predictor_;
    double virtual_now_ = 0;
    double last_step_end_us_ = 0;  // now_us() when the previous step ended (0: made)
};

}  // namespace plab
