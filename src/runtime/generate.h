// A whole request: tokenize, prefill, first token, decode, deliver.
//
// What it teaches: time to first token (TTFT) = everything from the request's
// arrival until the first token is delivered; prefill is one part of it.
// Trace spans: "request", "queue", "tokenize", "allocate KV cache",
// "prefill", "prefill chunk" (one per chunk) with its "copy logits to host"
// inside, "kv append" (per layer), "sample", "deliver", "decode step" (one
// per new token after the first).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/tokenizers/tokenizer.h"
#include "runtime/device_model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/speculative.h"
#include "trace/trace.h"

namespace plab {

// The built-in prompt of the CLI and the viewer: in the shipped model's story
// language (assets/recipe), so its first token is a confident one, and short
// enough that its attention map fits on a projector.
inline constexpr const char* kDefaultPrompt =
    "Once upon a time, Emma and Ivy went to the library. Ivy had a soft clock.";

struct GenerateOptions {
    std::string chunks = "full";  // chunk plan text for the prefill
    int max_new_tokens = 32;
    bool stop_at_eos = true;
    SamplerOptions sampler;
    SessionOptions session;
    // Without a KV cache each decode step prefills the whole sequence so far
    // (prompt + every token made) again, in a fresh session, and keeps only
    // the last position's logits: the same tokens, at a cost that grows with
    // the length — what the cache saves (lesson 2).
    bool kv_cache = true;
    // Speculative decoding (runtime/speculative.h): k > 0 verifies up to k
    // guesses per target forward; the tokens keep plain decoding's (greedy:
    // the same tokens) or its distribution (sampling).
    SpeculativeOptions speculative;
};

struct GenerateResult {
    std::vector<int32_t> prompt_tokens;
    std::vector<int32_t> new_tokens;  // the first token first
    std::string text;                 // decoded new tokens
    double ttft_us = 0;               // request start -> first token delivered
    double prefill_us = 0;            // prefill chunks only
    std::vector<double> decode_step_us;
    std::vector<int> decode_step_positions;  // positions each decode step computed
    // Fewer than max_new_tokens because the sequence reached max_seq_len (the
    // model has no position past it), not because EOS was sampled.
    bool stopped_at_context_end = false;
    SpeculativeStats speculative;  // with GenerateOptions::speculative.k > 0
};

// Runs one request. `prompt_tokens` when non-empty is used instead of encoding `prompt`.
GenerateResult generate(const DeviceModel& model, const Tokenizer& tokenizer,
                        const std::string& prompt, const std::vector<int32_t>& prompt_tokens,
                        const GenerateOptions& options, Trace& trace);

}  // namespace plab
