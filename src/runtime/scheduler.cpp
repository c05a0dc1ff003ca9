#include "runtime/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace plab {

const PolicyRow& policy_row(Policy p) {
    for (const PolicyRow& r : kPolicies)
        if (r.policy == p) return r;
    PLAB_ASSERT(false);  // every enumerator has its row (test_scheduler checks)
    return kPolicies[0];
}

std::string policy_name(Policy p) {
    return policy_row(p).name;
}

std::string policy_names() {
    std::string s;
    for (const PolicyRow& r : kPolicies) s += (s.empty() ? "" : ", ") + std::string(r.name);
    return s;
}

Policy parse_policy(std::string_view name) {
    for (const PolicyRow& r : kPolicies)
        if (name == r.name) return r.policy;
    PLAB_CHECK(false, "unknown policy '" << name << "'; valid policies: " << policy_names());
    return Policy::chunked;
}

void SchedulerOptions::validate() const {
    PLAB_CHECK(max_step_tokens >= 1,
               "the step token budget " << max_step_tokens << " must be at least 1");
    PLAB_CHECK(max_running >= 1, "max running sequences " << max_running << " must be at least 1");
}

Scheduler::Scheduler(BlockManager& blocks, PrefixCache& prefix, SchedulerOptions options)
    : pool_(blocks), prefix_(prefix), options_(options) {
    options_.validate();
}

bool Scheduler::uses_prefix_cache(const Request& r) const {
    return options_.prefix_cache && r.options.mask.is_causal();
}

void Scheduler::add(Request& r) {
    PLAB_ASSERT(r.state == RequestState::waiting && r.seq.length == 0 && !r.tokens.empty());
    PLAB_ASSERT(r.kv_positions == 0 || r.kv_positions + 1 == static_cast<int>(r.tokens.size()));
    waiting_.push_back(&r);
}

void Scheduler::preempt(Request& r, Schedule& s) {
    // Recompute policy: drop its blocks (named ones stay cached and may even
    // be hit when it comes back) and compute its tokens again later.
    pool_.release(r.seq);
    r.state = RequestState::waiting;
    running_.erase(std::find(running_.begin(), running_.end(), &r));
    waiting_.push_front(&r);
    ++r.preemptions;
    ++preemptions_;
    s.preempted.push_back(r.id);
}

void Scheduler::finish(Request& r) {
    pool_.release(r.seq);
    r.state = RequestState::finished;
    running_.erase(std::find(running_.begin(), running_.end(), &r));
}

int sampled_rows(const ScheduledSpan& span) {
    const Request& r = *span.request;
    if (span.guesses > 0) return span.guesses + 1;
    return r.seq.length == static_cast<int>(r.tokens.size()) ? 1 : 0;
}

void Scheduler::roll_back(Request& r, int length) {
    PLAB_ASSERT(length <= static_cast<int>(r.tokens.size()));
    pool_.truncate(r.seq, length);
    if (uses_prefix_cache(r)) prefix_.name_full_blocks(r.seq, r.tokens, options_.salt);
}

void Scheduler::take(Request& r, int n, bool decode, Schedule& s, int& budget, int guesses) {
    PLAB_ASSERT(n >= 1 && n <= budget && guesses < n);
    ScheduledSpan span;
    span.request = &r;
    span.n_tokens = n;
    span.slots = pool_.reserve(r.seq, n);
    span.decode = decode;
    span.guesses = guesses;
    // Guesses are not tokens yet: only blocks of known tokens are named (the
    // rest once the verify step has accepted some, in roll_back).
    if (uses_prefix_cache(r) && guesses == 0)
        prefix_.name_full_blocks(r.seq, r.tokens, options_.salt);
    (decode ? s.decode_tokens : s.prefill_tokens) += n;
    r.computed_tokens += n;
    budget -= n;
    s.spans.push_back(std::move(span));
}

bool Scheduler::admit_handed_over(Request& r, Schedule& s, int& budget) {
    // Its prompt's K/V come from the prefill engine: reserve the positions
    // (the engine copies them in before the step) and take its first decode
    // token at once.
    const int n = r.kv_positions;
    if (pool_.new_blocks_for(r.seq, n + 1) > pool_.free_blocks()) return false;
    waiting_.pop_front();
    pool_.reserve(r.seq, n);
    s.handed_over.push_back(&r);
    r.kv_positions = 0;
    r.admitted_once = true;
    if (uses_prefix_cache(r)) prefix_.name_full_blocks(r.seq, r.tokens, options_.salt);
    r.state = RequestState::running;
    running_.push_back(&r);
    take(r, 1, true, s, budget);
    return true;
}

bool Scheduler::admit(Request& r, Schedule& s, int& budget) {
    if (r.kv_positions > 0) return admit_handed_over(r, s, budget);
    const int B = pool_.block_size();
    const int len = static_cast<int>(r.tokens.size());
    // Only the first len-1 tokens are looked up: the last one is always
    // computed, because its logits give the next token (as vLLM does). So a
    // prompt of k·B+1 tokens seen before computes exactly one token.
    std::vector<int> hits;
    if (uses_prefix_cache(r)) {
        hits = prefix_.match(std::span<const int32_t>(r.tokens).first(std::size_t(len - 1)),
                             options_.salt);
    }
    const int cached = static_cast<int>(hits.size()) * B;
    const int remaining = len - cached;
    // Without chunking a prompt is computed whole in one step, or not yet.
    if (!policy_row(options_.policy).chunks_prompts && remaining > budget) return false;
    const int n = std::min(remaining, budget);
    int hits_on_free = 0;  // cached free blocks leave the free count when shared
    for (int b : hits) hits_on_free += pool_.ref_count(b) == 0 ? 1 : 0;
    const int new_blocks = (cached + n + B - 1) / B - static_cast<int>(hits.size());
    if (new_blocks + hits_on_free > pool_.free_blocks()) return false;
    waiting_.pop_front();
    prefix_.share(r.seq, hits);
    if (!r.admitted_once) {
        r.admitted_once = true;
        r.cached_tokens = cached;
        r.hit_blocks = static_cast<int>(hits.size());
        r.miss_blocks = uses_prefix_cache(r) ? (len - 1) / B - r.hit_blocks : 0;
        hit_blocks_ += r.hit_blocks;
        miss_blocks_ += r.miss_blocks;
    }
    r.state = RequestState::running;
    running_.push_back(&r);
    take(r, n, false, s, budget);
    return true;
}

Schedule Scheduler::schedule() {
    Schedule s;
    int budget = options_.max_step_tokens;
    const int B = pool_.block_size();
    auto remaining = [](const Request& r) {
        return static_cast<int>(r.tokens.size()) - r.seq.length;
    };

    // 1. Decode tokens first. When the pool has no block for one, the newest
    //    running request is preempted (maybe this one, if it is the newest).
    //    Admission keeps running <= budget, so every decode token fits; a
    //    verify span's guesses take only the budget beyond one token for each
    //    decoding request, and only blocks already free (else it decodes plainly).
    int decoding = 0;
    for (const Request* r : running_) decoding += remaining(*r) == 1 ? 1 : 0;
    int spare = budget - decoding;
    for (std::size_t i = 0; i < running_.size() && budget > 0;) {
        Request& r = *running_[i];
        if (remaining(r) != 1) {
            ++i;
            continue;
        }
        bool preempted_self = false;
        while (pool_.new_blocks_for(r.seq, 1) > pool_.free_blocks()) {
            Request* victim = running_.back();
            preempt(*victim, s);
            if (victim == &r) {
                preempted_self = true;
                break;
            }
        }
        if (preempted_self) break;
        const bool decode = r.seq.length >= static_cast<int>(r.prompt.size());
        const int chunk = static_cast<int>(r.speculation.chunk.size());
        const bool verify = decode && chunk > 1 && chunk - 1 <= spare &&
                            pool_.new_blocks_for(r.seq, chunk) <= pool_.free_blocks();
        if (verify) spare -= chunk - 1;
        take(r, verify ? chunk : 1, decode, s, budget, verify ? chunk - 1 : 0);
        ++i;
    }
    // 2. Prompt chunks of running requests still prefilling, within the budget
    //    left and the blocks free (a chunk shrinks to fit rather than preempt a
    //    request that already has its token in this step).
    for (std::size_t i = 0; i < running_.size() && budget > 0;) {
        Request& r = *running_[i];
        // A request given its decode token above has nothing left (0 <= 1).
        const int left = remaining(r);
        if (left <= 1) {
            ++i;
            continue;
        }
        const int room_in_last =
            static_cast<int>(r.seq.block_table.size()) * B - r.seq.length;  // positions
        const int room = room_in_last + pool_.free_blocks() * B;
        const int n = std::min({left, budget, room});
        if (n >= 1) {
            take(r, n, false, s, budget);
            ++i;
            continue;
        }
        // No room at all and nothing else in the step: free some by preempting.
        if (!s.spans.empty()) break;
        Request* victim = running_.back();
        preempt(*victim, s);
        if (victim == &r) break;
    }
    // 3. Waiting requests, first come first served — not in a step that had to
    //    preempt. Static batches admit only into an empty engine.
    const PolicyRow& policy = policy_row(options_.policy);
    const bool batch_policy = policy.admits_into_empty;
    const int max_running =
        std::min(policy.one_at_a_time ? 1 : options_.max_running, options_.max_step_tokens);
    if (s.preempted.empty() && !(batch_policy && !running_.empty())) {
        while (budget > 0 && !waiting_.empty() && static_cast<int>(running_.size()) < max_running) {
            if (!admit(*waiting_.front(), s, budget)) break;
        }
    }
    return s;
}

}  // namespace plab
