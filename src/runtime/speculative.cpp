#include "runtime/speculative.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"
#include "runtime/speculative_rule.h"

namespace plab {

void check_speculative(const SpeculativeOptions& o, int target_vocab) {
    PLAB_CHECK(o.k >= 1 && o.k <= kMaxSpeculate,
               "--speculate " << o.k << ": guesses per verify step, from 1 to " << kMaxSpeculate);
    PLAB_CHECK(!o.draft.text.empty(),
               "--speculate needs --draft SOURCE: ngram[:N] (prompt lookup) or a draft model file");
    if (target_vocab > 0 && o.draft_model != nullptr)
        check_draft_vocabulary(o.draft_model->config().vocab_size, target_vocab);
}

void SpeculativeStats::add_step(int guesses, int accepted_guesses, int tokens_made) {
    ++verify_steps;
    proposed += guesses;
    accepted += accepted_guesses;
    proposed_per_step.push_back(guesses);
    accepted_per_step.push_back(accepted_guesses);
    tokens_after_first += tokens_made;
}

void SpeculativeStats::merge(const SpeculativeStats& other) {
    verify_steps += other.verify_steps;
    proposed += other.proposed;
    accepted += other.accepted;
    draft_forwards += other.draft_forwards;
    tokens_after_first += other.tokens_after_first;
    accepted_per_step.insert(accepted_per_step.end(), other.accepted_per_step.begin(),
                             other.accepted_per_step.end());
    proposed_per_step.insert(proposed_per_step.end(), other.proposed_per_step.begin(),
                             other.proposed_per_step.end());
}

double SpeculativeStats::iid_tokens_per_verify(double alpha, int k) {
    if (alpha >= 1.0) return k + 1;
    return (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
}

std::unique_ptr<Drafter> make_drafter(const SpeculativeOptions& o, int target_vocab, int block_size,
                                      const SamplerOptions& sampler) {
    check_speculative(o);
    if (o.draft.ngram > 0) return std::make_unique<NgramDrafter>(o.draft.ngram);
    PLAB_CHECK(o.draft_model != nullptr,
               "--draft " << o.draft.text << ": the draft model is not loaded");
    SessionOptions draft_session;
    draft_session.block_size = block_size;
    return std::make_unique<ModelDrafter>(*o.draft_model, target_vocab, draft_session, sampler);
}

std::mt19937_64 speculative_stream(const SamplerOptions& sampler) {
    return std::mt19937_64(sampler.seed ^ 0x5851f42d4c957f2dull);
}

VerifyOutcome accept_guesses(std::span<const float> rows, std::size_t V, const Draft& draft,
                             const SamplerOptions& sampler, int32_t eos, std::mt19937_64& rng) {
    const int n_guesses = static_cast<int>(draft.guesses.size());
    PLAB_ASSERT(rows.size() == std::size_t(n_guesses + 1) * V);
    auto uniform = [&rng] { return double(rng() >> 11) * (1.0 / 9007199254740992.0); };
    auto row = [&](int i) {  // a copy: the sampler's distribution reads a whole vector
        const std::span<const float> r = rows.subspan(std::size_t(i) * V, V);
        return std::vector<float>(r.begin(), r.end());
    };
    VerifyOutcome o;
    // The longest prefix the rule accepts, then one token from the target.
    for (int i = 0; i < n_guesses; ++i) {
        const std::vector<double> p = sampling_distribution(row(i), sampler);
        // A draft model's q for this guess; prompt lookup's is a point mass (empty).
        const std::span<const double> q =
            draft.q.empty() ? std::span<const double>() : std::span<const double>(draft.q[i]);
        // Two draws in a fixed order (an argument list's order is the compiler's).
        const double u_accept = uniform();
        const double u_resample = uniform();
        const GuessVerdict v = verify_guess(p, q, draft.guesses[i], u_accept, u_resample);
        o.tokens.push_back(v.token);
        if (!v.accepted) return o;
        ++o.accepted;
        if (eos >= 0 && v.token == eos) return o;  // the sequence ends inside the run
    }
    // Every guess accepted: the bonus token from the last row.
    o.tokens.push_back(draw_from(sampling_distribution(row(n_guesses), sampler), uniform()));
    return o;
}

VerifyStep speculative_step(Session& target, Drafter& drafter, const SamplerOptions& sampler, int k,
                            int32_t eos, std::vector<int32_t>& context, std::mt19937_64& rng) {
    VerifyStep step;
    const Draft draft = drafter.propose(context, k);
    PLAB_ASSERT(static_cast<int>(draft.guesses.size()) <= k);
    // One forward over the last token and the guesses: a prefill chunk.
    step.position = target.length();
    step.chunk.push_back(context.back());
    step.chunk.insert(step.chunk.end(), draft.guesses.begin(), draft.guesses.end());
    const std::vector<float> rows = target.verify(step.chunk);
    step.blocks_verified = target.cache().blocks().blocks_in_use();
    step.block_table_verified = target.sequence().block_table;
    step.outcome = accept_guesses(rows, rows.size() / step.chunk.size(), draft, sampler, eos, rng);
    context.insert(context.end(), step.outcome.tokens.begin(), step.outcome.tokens.end());
    // Keep the fed token and the accepted guesses; the rest is rolled back.
    target.roll_back(step.position + 1 + step.outcome.accepted);
    step.blocks_kept = target.cache().blocks().blocks_in_use();
    return step;
}

void speculative_decode(Session& target, Drafter& drafter, const SamplerOptions& sampler, int k,
                        int max_new_tokens, int32_t eos, std::vector<int32_t>& context,
                        std::vector<int32_t>& new_tokens, SpeculativeStats& stats, Trace& trace,
                        std::vector<double>& step_us) {
    std::mt19937_64 rng = speculative_stream(sampler);
    const int max_seq_len = target.model().config().max_seq_len;
    int32_t token = new_tokens.back();
    while (static_cast<int>(new_tokens.size()) < max_new_tokens) {
        if (eos >= 0 && token == eos) break;
        // The token to feed needs a position; the guesses need more.
        const int room = max_seq_len - target.length() - 1;
        if (room < 0) break;
        const int remaining = max_new_tokens - static_cast<int>(new_tokens.size());
        const int step_k = std::min({k, remaining - 1, room});
        const double t = trace.now_us();
        const VerifyStep s = speculative_step(target, drafter, sampler, step_k, eos, context, rng);
        const VerifyOutcome& o = s.outcome;
        const int n_guesses = static_cast<int>(s.chunk.size()) - 1;
        new_tokens.insert(new_tokens.end(), o.tokens.begin(), o.tokens.end());
        token = new_tokens.back();
        stats.add_step(n_guesses, o.accepted, static_cast<int>(o.tokens.size()));
        trace.span("verify step", "decode", t,
                   {{"position", std::to_string(s.position)},
                    {"positions_computed", std::to_string(s.chunk.size())},
                    {"guesses", std::to_string(n_guesses)},
                    {"accepted", std::to_string(o.accepted)}});
        step_us.push_back(trace.now_us() - t);
    }
    stats.draft_forwards = drafter.forwards();
}

}  // namespace plab
