// Request: one prompt's life in the engine — waiting, running, finished —
// and the numbers a serving report gives for it.
//
// What it teaches: a request is its tokens (prompt, then each new token
// appended) and how many of them have K/V in the cache. Prefill and decode
// are the same thing seen from here: compute the tokens not yet computed;
// when all known tokens are computed, the last position's logits give the
// next token. That is also why a preempted request can simply be recomputed.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "runtime/kv_cache.h"
#include "runtime/mask_grammar.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"

namespace plab {

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
    // Disaggregated serving: when it finishes, copy its K/V to the host
    // (Request::kv) so a decode engine can take it over.
    bool hand_over_kv = false;
};

enum class RequestState { waiting, running, finished };

// Speculative decoding in the engine (EngineOptions::speculative): this
// step's guesses are kept beside Request::tokens, never in it — a rejected
// guess must leave no trace in the tokens, the prefix cache or the K/V.
struct RequestSpeculation {
    std::unique_ptr<Drafter> drafter;  // its own (a draft model keeps a KV cache per request)
    Draft draft;                       // this step's guesses; empty: a plain decode token
    std::vector<int32_t> chunk;        // the verify chunk: the token fed, then the guesses
    std::mt19937_64 rng;               // the rule's draws (speculative_stream)
    SpeculativeStats stats;
};

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
    double first_scheduled_us = -1;          // its first step began: queue time = this - arrival
    std::vector<double> token_us;            // when each new token was sampled
    std::vector<std::vector<float>> logits;  // with options.keep_logits: (new tokens, V)
    double finish_us = 0;
    // K/V handed over between engines, per layer K then V, (positions, Hkv·Dh)
    // each: filled at finish with options.hand_over_kv (prefill engine), or
    // given by Engine::add_prefilled and moved into the pool at admission
    // (decode engine).
    std::vector<std::vector<float>> kv;
    int kv_positions = 0;
    std::string finish_reason;  // "eos" or "length"
    RequestSpeculation speculation;

    explicit Request(const SamplerOptions& s) : sampler(s) {}
    std::span<const int32_t> new_tokens() const {
        return std::span<const int32_t>(tokens).subspan(prompt.size());
    }
};

// Latency of one finished request, in milliseconds.
struct RequestLatency {
    double queue_ms = 0;     // arrival -> its first step began
    double ttft_ms = 0;      // arrival -> first new token (queueing and prefill included)
    double itl_mean_ms = 0;  // inter-token latency: gaps between consecutive new tokens
    double itl_p90_ms = 0;
    double tpot_ms = 0;  // time per output token after the first: (e2e - ttft) / (new - 1)
    double e2e_ms = 0;   // arrival -> last new token
};
RequestLatency latency_of(const Request& r);
// The same from the times alone, on one clock (a request whose tokens came
// from two engines, as in disaggregated serving).
RequestLatency latency_of(double arrival_us, double first_scheduled_us,
                          const std::vector<double>& token_us);
// What a request leaves behind for a report, copied from a Request in this one
// place: `plab serve`'s per-request rows (serving/serve.cpp) and the viewer's
// serving scene both read it. Times on the engine's clock less `t_start`.
struct RequestRecord {
    std::vector<int32_t> prompt;
    std::vector<int32_t> new_tokens;
    int cached_tokens = 0, hit_blocks = 0, miss_blocks = 0;  // the prefix cache at admission
    int preemptions = 0;
    int computed_tokens = 0;  // tokens run through the model, recomputation included
    double arrival_us = 0, first_scheduled_us = 0, finish_us = 0;
    std::vector<double> token_us;  // when each new token was sampled
    SpeculativeStats speculation;  // k 0: it did not speculate
    RequestLatency latency() const { return latency_of(arrival_us, first_scheduled_us, token_us); }
};
RequestRecord record_of(const Request& r, double t_start = 0);

// Nearest-rank percentile (p in [0, 1]) of v; 0 for an empty v.
double percentile(std::vector<double> v, double p);

}  // namespace plab
