// Serving scenario: a few requests through one Engine, looked at after every step.
//
// What it teaches (lesson 2's KV cache grown into a serving engine, and lesson
// 5's TTFT for several requests at once): one pool of KV blocks is shared by
// every request. Three requests start with the same prompt, so their first full
// blocks are computed once and then shared (reference count > 1: the prefix
// cache, vLLM's automatic prefix caching); a fourth has a prompt of its own.
// The pool is small on purpose, so the engine must preempt a request (give its
// blocks back and compute it again later: vLLM's recompute policy) and evict
// cached free blocks (reuse a block whose K/V nobody holds, losing a future hit).
//
// Nothing here schedules or computes: the Engine does. After each step this
// file copies what the engine reports — block tables, reference counts, names,
// pool counters, the step's "kv append" trace events — into a ServingStage.
// Left out on purpose: requests arriving while others run (all four arrive at
// once, so the picture depends on the pool and the budget, not on a clock).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "app/snapshot.h"
#include "model/tokenizers/tokenizer.h"
#include "model/weights.h"

namespace plab::viewer {

struct ServingOptions {
    std::string backend = "cpu-ref";
    int block_size = 4;  // B: small, so the prefix spans several blocks
    // Blocks in the pool; 0 = room for every prompt at once (a shared prefix
    // counted once) and none for the new tokens: big enough to run the
    // requests side by side, too small to finish them side by side, so a
    // request is preempted and cached blocks are evicted.
    int kv_blocks = 0;
    bool prefix_cache = true;
    // Step token budget: a prompt longer than this is prefilled in chunks over
    // several steps, so requests are admitted one after another.
    int max_step_tokens = 16;
};

// One request of the scenario: its prompt and how many tokens it generates.
struct ServingRequestSpec {
    std::string label;
    std::vector<int32_t> prompt;
    int max_new_tokens = 0;
};

// The four requests: three continue `prefix` (the prompt's tokens, BOS first)
// with a sentence of their own, as chat requests share one system prompt;
// request 1 (second in line) has a prompt of its own. Token ids are joined,
// not text, so the shared part is the very same tokens whatever the tokenizer
// merges.
std::vector<ServingRequestSpec> serving_requests(const Tokenizer& tok,
                                                 const std::vector<int32_t>& prefix);

// The pool size `options.kv_blocks` means for these requests (0 -> the default).
int serving_pool_blocks(const std::vector<ServingRequestSpec>& requests, int max_seq_len,
                        const ServingOptions& options);

// Runs the requests through one Engine step by step and records each step.
ServingSnapshot run_serving_scenario(const Weights& weights, const Tokenizer& tok,
                                     const std::vector<ServingRequestSpec>& requests,
                                     const ServingOptions& options);

// Blocks that several requests hold at once (reference count > 1) after that stage.
int shared_blocks(const ServingStage& stage);
// The stage the shared pool opens at: the first with the most shared
// blocks, computed from the run, so a newcomer sees sharing at once instead of the
// last step, where every request has finished and every block is free. 0 when no stage
// shares a block.
int opening_stage(const ServingSnapshot& sv);

}  // namespace plab::viewer
