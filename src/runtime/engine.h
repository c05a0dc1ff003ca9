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
// Every client — each CLI command, the bench, the viewer — gets its backend
// and device model from an Engine; none builds them itself.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/backend.h"
#include "model/weights.h"
#include "runtime/device_model.h"
#include "runtime/forward.h"
#include "runtime/kv_cache.h"
#include "runtime/mask_spec.h"
#include "runtime/sampler.h"
#include "trace/trace.h"

namespace plab {

struct EngineOptions {
    std::string backend = "cpu";  // runtime/registry.h names
    int block_size = 16;          // B: positions per KV block
    // Blocks in the shared pool; 0 = enough for 4 sequences of max_seq_len.
    int kv_blocks = 0;
    bool prefix_cache = true;
    // Token budget of one step: decode tokens and prefill chunks together
    // (vLLM's max_num_batched_tokens). A prompt longer than it is prefilled
    // in chunks over several steps.
    int max_step_tokens = 512;
    int max_running = 64;  // sequences in one step at most (vLLM's max_num_seqs)
};

struct RequestOptions {
    int max_new_tokens = 32;
    int eos_id = -1;  // stop after this token; -1: never stop early
    SamplerOptions sampler;
    // The request's mask (causal by default). The prefix cache serves causal
    // requests only: under another mask a block's K/V may depend on more than
    // the tokens before it, or the mask may differ between requests.
    BoundMask mask{};
    // Keep the logits each new token was sampled from (tests, the lessons'
    // cold-versus-warm check); off by default: V floats per token.
    bool keep_logits = false;
};

enum class RequestState { waiting, running, finished };

// One request as the engine holds it. Times are microseconds on the engine's
// clock (Engine::now_us), from the engine's creation.
struct Request {
    int id = 0;
    RequestOptions options;
    std::vector<int32_t> prompt;
    std::vector<int32_t> tokens;  // prompt + new tokens: what the sequence must hold
    int new_limit = 0;            // new tokens it may make (max_new_tokens, capped by max_seq_len)
    RequestState state = RequestState::waiting;
    Sequence seq;  // its KV blocks; seq.length = tokens computed and cached
    Sampler sampler;

    // Prefix cache at its first admission: prompt tokens found cached, and the
    // full blocks of the looked-up range that were hits and misses.
    int cached_tokens = 0;
    int hit_blocks = 0;
    int miss_blocks = 0;
    bool admitted_once = false;
    int preemptions = 0;
    int computed_tokens = 0;  // tokens run through the model, recomputation included

    double arrival_us = 0;
    std::vector<double> token_us;            // when each new token was sampled
    std::vector<std::vector<float>> logits;  // with options.keep_logits: (new tokens, V)
    double finish_us = 0;
    std::string finish_reason;  // "eos" or "length"

    explicit Request(const SamplerOptions& s) : sampler(s) {}
    std::span<const int32_t> new_tokens() const {
        return std::span<const int32_t>(tokens).subspan(prompt.size());
    }
};

// Latency of one finished request, in milliseconds.
struct RequestLatency {
    double ttft_ms = 0;      // arrival -> first new token (queueing and prefill included)
    double itl_mean_ms = 0;  // inter-token latency: gaps between consecutive new tokens
    double itl_p90_ms = 0;
    double tpot_ms = 0;  // time per output token after the first: (e2e - ttft) / (new - 1)
    double e2e_ms = 0;   // arrival -> last new token
};
RequestLatency latency_of(const Request& r);

// What one step ran.
struct StepRecord {
    int index = 0;
    double start_us = 0;
    double us = 0;              // wall time of the step: schedule, forward, sample
    int prefill_tokens = 0;     // tokens of requests still computing their known tokens
    int decode_tokens = 0;      // single tokens of requests past their prompt
    std::vector<int> requests;  // ids in the step, in step order
    std::vector<int> preempted;
    std::vector<int> finished;
    int blocks_in_use = 0;  // after the step
    int cached_free_blocks = 0;
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
    Engine(const Weights& weights, EngineOptions options = {}, Trace* trace = nullptr);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    Backend& backend() const { return *backend_; }
    const DeviceModel& model() const { return *model_; }
    const EngineOptions& options() const { return options_; }
    // The model's identity, mixed into every block name of the prefix cache.
    std::uint64_t model_salt() const { return salt_; }

    // Queues a request; returns its id (0, 1, ...). Refuses, with one line,
    // a request the whole pool could never hold.
    int add_request(std::vector<int32_t> prompt, RequestOptions options);
    bool has_unfinished() const { return !running_.empty() || !waiting_.empty(); }
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

private:
    struct Scheduled {
        Request* request;
        int n_tokens;
    };
    bool uses_prefix_cache(const Request& r) const;
    void preempt(Request& r, StepRecord& record);
    void finish(Request& r, StepRecord& record);
    KvCache& pool();

    EngineOptions options_;
    Trace* trace_;
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<DeviceModel> model_;
    std::unique_ptr<KvCache> cache_;
    std::unique_ptr<Workspace> ws_;
    std::uint64_t salt_ = 0;
    std::vector<std::unique_ptr<Request>> requests_;
    std::deque<Request*> waiting_;   // FIFO; a preempted request goes back to the front
    std::vector<Request*> running_;  // admission order: the last is preempted first
    std::vector<StepRecord> steps_;
    long long hit_blocks_ = 0, miss_blocks_ = 0, preemptions_ = 0;
    double t0_ = 0;
};

}  // namespace plab
