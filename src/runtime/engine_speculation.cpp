// Speculative decoding inside the engine's steps (EngineOptions::speculative).
//
// What it teaches: many requests speculate exactly as one does
// (runtime/speculative.h) — a verify step is one more span of the step, k + 1
// positions on top of the request's KV cache, scheduled under the token
// budget like a prefill chunk. Two things are the engine's own: the guesses
// live beside Request::tokens until the rule accepts them, and rolling back
// goes through the scheduler, which names in the prefix cache only blocks
// whose every position holds an accepted token.
#include <algorithm>

#include "core/error.h"
#include "runtime/engine.h"

namespace plab {

// Before the scheduler decides: every running request whose next span is its
// newest token gets its guesses for this step (the scheduler may still run
// the token alone, when the budget or the free blocks do not hold them).
void Engine::propose_guesses() {
    const SpeculativeOptions& o = options_.speculative;
    const int max_seq_len = model().config().max_seq_len;
    for (Request* rp : scheduler_->running()) {
        Request& r = *rp;
        RequestSpeculation& s = r.speculation;
        s.chunk.clear();
        s.draft = {};
        const int known = static_cast<int>(r.tokens.size());
        const int made = known - static_cast<int>(r.prompt.size());
        if (made < 1 || r.seq.length + 1 != known) continue;  // prefilling, or recomputing
        // Room for the guesses: the tokens the request may still make after
        // this step's target token, and the model's context.
        const int step_k = std::min({o.k, r.new_limit - made - 1, max_seq_len - known});
        if (step_k < 1) continue;
        if (!s.drafter) {
            s.drafter = make_drafter(o, model().config().vocab_size, options_.block_size,
                                     r.options.sampler);
        }
        s.draft = s.drafter->propose(r.tokens, step_k);
        if (s.draft.guesses.empty()) continue;  // prompt lookup found nothing: decode plainly
        s.chunk.push_back(r.tokens.back());
        s.chunk.insert(s.chunk.end(), s.draft.guesses.begin(), s.draft.guesses.end());
    }
}

// Once a request has its first token, every token it makes comes from the
// rule's stream, as on the one-prompt path (runtime/speculative.cpp): also
// a step whose guesses did not fit, or found none, verifies zero guesses —
// so a request makes the same tokens alone or among others.
bool Engine::speculates(const ScheduledSpan& span) const {
    const Request& r = *span.request;
    return options_.speculative.k > 0 && sampled_rows(span) > 0 &&
           r.tokens.size() > r.prompt.size();
}

// After a verify step: the rule's tokens appended, each stamped now; the K/V
// of the fed token and the accepted guesses kept, the rest given back; the
// request finished at an end-of-sequence token or its limit.
int Engine::accept_verified(Request& r, std::span<const float> rows, int guesses) {
    RequestSpeculation& s = r.speculation;
    const std::size_t V = static_cast<std::size_t>(model().config().vocab_size);
    const int fed_at = r.seq.length - guesses - 1;
    // The guesses this span ran (none when the scheduler ran the token alone).
    const Draft none;
    const Draft& draft = guesses > 0 ? s.draft : none;
    PLAB_ASSERT(static_cast<int>(draft.guesses.size()) == guesses);
    const VerifyOutcome o =
        accept_guesses(rows, V, draft, r.options.sampler, r.options.eos_id, s.rng);
    for (std::size_t i = 0; i < o.tokens.size(); ++i) {
        r.tokens.push_back(o.tokens[i]);
        r.token_us.push_back(now_us());
        // Token i came from row i: the digest covers exactly the rows plain
        // decoding would have sampled from.
        if (r.options.keep_logits)
            r.logits.emplace_back(rows.begin() + std::ptrdiff_t(i * V),
                                  rows.begin() + std::ptrdiff_t((i + 1) * V));
    }
    scheduler_->roll_back(r, fed_at + 1 + o.accepted);
    s.stats.add_step(guesses, o.accepted, static_cast<int>(o.tokens.size()));
    s.stats.draft_forwards = s.drafter ? s.drafter->forwards() : s.stats.draft_forwards;
    s.chunk.clear();
    s.draft = {};
    const int made = static_cast<int>(r.tokens.size() - r.prompt.size());
    const bool eos = r.options.eos_id >= 0 && r.tokens.back() == r.options.eos_id;
    if (eos || made >= r.new_limit) finish(r, eos ? "eos" : "length");
    return o.accepted;
}

}  // namespace plab
