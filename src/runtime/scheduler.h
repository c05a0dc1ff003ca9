// Scheduler: which tokens of which requests the next step computes.
//
// What it teaches: an engine step is a scheduling decision and a forward
// pass. The decision is pure bookkeeping — token counts, a token budget, KV
// blocks — with no model inside, so it can be tested alone (as nano-vllm
// keeps its scheduler). Each step:
//   1. decode tokens first: every running request that has computed all its
//      known tokens but the newest gets that one token (decode is never
//      starved by prefill) — with speculative decoding, that token and its
//      guesses as one verify span, when the budget and the pool allow, else
//      the token alone;
//   2. then the prompt chunks of running requests still prefilling, within
//      the budget left (a long prompt is split across steps: chunked prefill);
//   3. then waiting requests, first come first served, while the budget, the
//      running limit and the pool allow; each is looked up in the prefix cache
//      first, so its cached prefix is not computed again.
// When the pool has no block for a running request, the most recently
// admitted running request is preempted (maybe itself): its blocks go back
// and it waits at the front of the queue to be recomputed.
//
// Policies, to compare: one request at a time; static batches (a
// batch is admitted only when the last one has finished); continuous batching
// (the group changes every step) with whole prompts; continuous batching with
// chunked prefill (the default, as vLLM's V1 engine).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/block_manager.h"
#include "runtime/prefix_cache.h"
#include "runtime/request.h"

namespace plab {

enum class Policy { one_at_a_time, static_batch, continuous, chunked };

// The policies, one row each: the one list that `plab serve --policy` and
// --compare-policies, the viewer's Serving panel and parse_policy read, and
// what makes each differ in the scheduler. A new policy is a row here and its
// behaviour in scheduler.cpp.
struct PolicyRow {
    Policy policy;
    const char* name;        // `plab serve --policy NAME`
    bool chunks_prompts;     // a prompt may be split across steps within the budget
    bool admits_into_empty;  // waiting requests join only an empty engine (a batch)
    bool one_at_a_time;      // at most one running request
    const char* what;        // one line for help texts and tooltips
};
inline constexpr PolicyRow kPolicies[] = {
    {Policy::one_at_a_time, "one-at-a-time", false, true, true,
     "one request at a time, its whole prompt in one step"},
    {Policy::static_batch, "static", false, true, false,
     "a batch admitted only when the last one has finished"},
    {Policy::continuous, "continuous", false, false, false,
     "continuous batching: the group changes every step, whole prompts"},
    {Policy::chunked, "chunked", true, false, false,
     "continuous batching with chunked prefill (vLLM's V1 default)"},
};
const PolicyRow& policy_row(Policy p);
// The row's name: "one-at-a-time", "static", "continuous", "chunked".
std::string policy_name(Policy p);
// "one-at-a-time, static, continuous, chunked": every name, for help and errors.
std::string policy_names();
// Throws plab::Error listing the valid names for an unknown one.
Policy parse_policy(std::string_view name);

struct SchedulerOptions {
    Policy policy = Policy::chunked;
    // Tokens one step may compute, decode and prefill together (vLLM's
    // max_num_batched_tokens). Policies without chunking prefill whole
    // prompts, so the engine asks them for at least max_seq_len.
    int max_step_tokens = 512;
    int max_running = 64;  // sequences in one step at most (vLLM's max_num_seqs)
    bool prefix_cache = true;
    std::uint64_t salt = 0;  // the model's identity, in every block name

    void validate() const;  // one-line plab::Error for a budget or running limit below 1
};

// One request's share of a step: n_tokens of its known tokens, from
// seq.length - n_tokens on, with their slots already reserved in the pool.
struct ScheduledSpan {
    Request* request = nullptr;
    int n_tokens = 0;
    std::vector<int32_t> slots;
    bool decode = false;  // its newest token, fed back (not a prompt chunk or a recompute)
    // A verify span (speculative decoding): the newest token and this many
    // guesses (Request::speculation.chunk), every row sampled.
    int guesses = 0;
};
// Rows of a span whose logits are read: every row of a verify span, the last
// of a span that ends the known tokens, none of a prompt's earlier chunk.
int sampled_rows(const ScheduledSpan& span);

struct Schedule {
    std::vector<ScheduledSpan> spans;  // decode tokens, then prompt chunks, then admissions
    // Requests handed over from a prefill engine and admitted in this step:
    // their positions are reserved, and the engine writes their K/V (r.kv)
    // into the storage before it runs the step.
    std::vector<Request*> handed_over;
    std::vector<int> preempted;  // request ids, in the order they were preempted
    int prefill_tokens = 0;
    int decode_tokens = 0;
    // How long the engine sat idle before this step (since its previous step
    // ended, or since it was made), set by the engine: a machine that idled
    // runs its next step cold, and a step-cost model may charge that.
    double idle_before_us = 0;
};

class Scheduler {
public:
    // Decides with the KV cache's two host parts only: it never touches a device.
    Scheduler(BlockManager& blocks, PrefixCache& prefix, SchedulerOptions options);

    // Appends a request to the waiting queue (its tokens set, nothing computed;
    // or, handed over from a prefill engine, its prompt's K/V in r.kv).
    void add(Request& r);
    // The next step's spans. Reserves their positions in the pool and names
    // the blocks they fill, so a request admitted later in the same step can
    // find them in the prefix cache: a step appends every K/V of a layer
    // before any attention of that layer reads them.
    Schedule schedule();
    // A finished request gives its blocks back (named ones stay cached).
    void finish(Request& r);
    // After a verify step: keep `length` positions (the fed token and the
    // accepted guesses), give the rejected guesses' blocks back, and name the
    // blocks the accepted tokens filled — never one that held a rejected guess.
    void roll_back(Request& r, int length);

    bool has_unfinished() const { return !running_.empty() || !waiting_.empty(); }
    const std::deque<Request*>& waiting() const { return waiting_; }
    const std::vector<Request*>& running() const { return running_; }
    const SchedulerOptions& options() const { return options_; }
    bool uses_prefix_cache(const Request& r) const;

    long long hit_blocks() const { return hit_blocks_; }
    long long miss_blocks() const { return miss_blocks_; }
    long long preemptions() const { return preemptions_; }

private:
    void preempt(Request& r, Schedule& s);
    void take(Request& r, int n, bool decode, Schedule& s, int& budget, int guesses = 0);
    bool admit(Request& r, Schedule& s, int& budget);
    bool admit_handed_over(Request& r, Schedule& s, int& budget);

    BlockManager& pool_;
    PrefixCache& prefix_;
    SchedulerOptions options_;
    std::deque<Request*> waiting_;   // FIFO; a preempted request goes back to the front
    std::vector<Request*> running_;  // admission order: the last is preempted first
    long long hit_blocks_ = 0, miss_blocks_ = 0, preemptions_ = 0;
};

}  // namespace plab
