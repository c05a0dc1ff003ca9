// Speculative decoding: draft K guesses, verify them in one chunk, roll the
// KV cache back (lessons/18-speculative-decoding.md).
//
// What it teaches: verification is a prefill. A decode step runs the target
// over one position; a verify step runs it over K+1 — the last accepted
// token and K guesses — as one chunk on top of the KV cache, the same forward
// as a prefill chunk (Session::verify). Row i of its logits is the target's
// distribution after guess i, exactly the row a decode step would have made
// (chunked == whole, bit for bit, on the invariant backends), so greedy
// speculation emits greedy decoding's tokens. The longest prefix of guesses
// the rule accepts (runtime/speculative_rule.h) is kept, plus one token from
// the target: the replacement of the first rejected guess, or, when all K
// were accepted, a bonus token from row K. The rejected guesses' K/V are
// rolled back (Session::roll_back: their blocks go back to the pool).
// While decode is memory-bound a verify of K+1 rows costs about one decode
// step, so each accepted guess is a target forward saved.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "runtime/drafter.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "trace/trace.h"

namespace plab {

struct SpeculativeOptions {
    int k = 0;  // guesses per verify step, 1..8; 0 = plain decoding
    DraftSource draft;
    const DeviceModel* draft_model = nullptr;  // loaded by the caller when draft.model is set
};
inline constexpr int kMaxSpeculate = 8;
// --speculate K in 1..8 and a --draft given; with `target_vocab` > 0, a
// loaded draft model's vocabulary the target's (one plab::Error line each).
void check_speculative(const SpeculativeOptions& o, int target_vocab = 0);

// What one request's speculation did.
struct SpeculativeStats {
    int k = 0;
    std::string draft;                   // as given to --draft
    long long verify_steps = 0;          // target forwards after the first token
    long long proposed = 0;              // guesses proposed
    long long accepted = 0;              // guesses accepted
    long long draft_forwards = 0;        // the draft model's forwards (0 for ngram)
    std::vector<int> accepted_per_step;  // per verify step: guesses accepted
    std::vector<int> proposed_per_step;
    // Tokens made after the first one: each verify step makes accepted + 1.
    long long tokens_after_first = 0;

    // One verify step: guesses proposed, accepted, tokens it emitted.
    void add_step(int guesses, int accepted_guesses, int tokens_made);
    // Another request's counts added (its steps after these).
    void merge(const SpeculativeStats& other);
    double acceptance_rate() const { return proposed > 0 ? double(accepted) / proposed : 0; }
    // Mean tokens a verify step made (accepted guesses + the target's one).
    double tokens_per_verify() const {
        return verify_steps > 0 ? double(tokens_after_first) / verify_steps : 0;
    }
    // The same for guesses each accepted independently with probability α
    // (Leviathan et al. 2023, eq. 1): (1 − α^(K+1)) / (1 − α).
    static double iid_tokens_per_verify(double alpha, int k);
    // Target forwards plain decoding would have run for the same tokens, less these.
    long long forwards_saved() const { return tokens_after_first - verify_steps; }
};

// The drafter --draft names: prompt lookup, or the draft model (loaded by the
// caller) on a session of its own with `block_size` positions a block, its
// guesses drawn with `sampler`'s settings.
std::unique_ptr<Drafter> make_drafter(const SpeculativeOptions& o, int target_vocab, int block_size,
                                      const SamplerOptions& sampler);

// The rule's random stream for a request sampled with `sampler` (the first
// token's draw comes from the plain sampler, as in plain decoding).
std::mt19937_64 speculative_stream(const SamplerOptions& sampler);

// What one verify step emits: the accepted guesses, then the target's token
// (the replacement of the first rejected guess, or the bonus token from the
// last row) unless an end-of-sequence token ended an accepted run. Token i
// came from row i of the verify chunk's logits.
struct VerifyOutcome {
    std::vector<int32_t> tokens;
    int accepted = 0;  // guesses accepted: the K/V of the fed token and these are kept
};
// `rows` (guesses + 1, V): the target's logits after the fed token and each
// guess. Draws two uniforms per guess (accept, resample) and one for the
// bonus, in that order, from `rng`.
VerifyOutcome accept_guesses(std::span<const float> rows, std::size_t V, const Draft& draft,
                             const SamplerOptions& sampler, int32_t eos, std::mt19937_64& rng);

// One verify step as it happened, for a caller that watches it (the viewer's
// kv scene draws the chunk's rows and the blocks that grew and shrank back).
struct VerifyStep {
    int position = 0;                           // of the fed token: the chunk's first query
    std::vector<int32_t> chunk;                 // the fed token, then the guesses
    VerifyOutcome outcome;                      // the tokens emitted and the guesses accepted
    int blocks_verified = 0;                    // blocks in use with every guess's K/V written
    int blocks_kept = 0;                        // ... after the rejected guesses were rolled back
    std::vector<int32_t> block_table_verified;  // the sequence's table before the roll-back
};
// One step of speculative decoding on `target` (its cache holds every
// `context` token but the last): up to `k` guesses from `drafter`, one verify
// forward, the rule, the roll-back; the emitted tokens appended to `context`.
VerifyStep speculative_step(Session& target, Drafter& drafter, const SamplerOptions& sampler, int k,
                            int32_t eos, std::vector<int32_t>& context, std::mt19937_64& rng);

// Decodes after the first token: `context` holds the prompt and every token
// made (its last one not yet in `target`'s cache), `new_tokens` the tokens
// made; appends until `max_new_tokens`, an end-of-sequence token when
// `eos` >= 0, or the context's end. `rng` draws the rule's uniforms.
void speculative_decode(Session& target, Drafter& drafter, const SamplerOptions& sampler, int k,
                        int max_new_tokens, int32_t eos, std::vector<int32_t>& context,
                        std::vector<int32_t>& new_tokens, SpeculativeStats& stats, Trace& trace,
                        std::vector<double>& step_us);

}  // namespace plab
