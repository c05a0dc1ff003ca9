#include "runtime/speculative.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"
#include "runtime/speculative_rule.h"

namespace plab {

void check_speculative(const SpeculativeOptions& o) {
    PLAB_CHECK(o.k >= 1 && o.k <= kMaxSpeculate,
               "--speculate " << o.k << ": guesses per verify step, from 1 to " << kMaxSpeculate);
    PLAB_CHECK(!o.draft.text.empty(),
               "--speculate needs --draft SOURCE: ngram[:N] (prompt lookup) or a draft model file");
}

double SpeculativeStats::iid_tokens_per_verify(double alpha, int k) {
    if (alpha >= 1.0) return k + 1;
    return (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
}

void speculative_decode(Session& target, Drafter& drafter, const SamplerOptions& sampler, int k,
                        int max_new_tokens, int32_t eos, std::vector<int32_t>& context,
                        std::vector<int32_t>& new_tokens, SpeculativeStats& stats, Trace& trace,
                        std::vector<double>& step_us) {
    // The rule's uniforms, from their own stream (the first token's draw came
    // from the plain sampler, as in plain decoding).
    std::mt19937_64 rng(sampler.seed ^ 0x5851f42d4c957f2dull);
    auto uniform = [&rng] { return double(rng() >> 11) * (1.0 / 9007199254740992.0); };
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
        Draft draft = drafter.propose(context, step_k);
        const int n_guesses = static_cast<int>(draft.guesses.size());
        PLAB_ASSERT(n_guesses <= step_k);

        // One forward over the last token and the guesses: a prefill chunk.
        std::vector<int32_t> chunk{token};
        chunk.insert(chunk.end(), draft.guesses.begin(), draft.guesses.end());
        const int kept_before = target.length();
        const std::vector<float> rows = target.verify(chunk);
        const std::size_t V = rows.size() / chunk.size();
        auto row = [&](int i) {
            return std::vector<float>(rows.begin() + std::ptrdiff_t(i * V),
                                      rows.begin() + std::ptrdiff_t((i + 1) * V));
        };

        // Accept the longest agreeing prefix, then one token from the target.
        const std::size_t made_before = new_tokens.size();
        int accepted = 0;
        bool stop = false;
        for (int i = 0; i < n_guesses && !stop; ++i) {
            const std::vector<double> p = sampling_distribution(row(i), sampler);
            // A draft model's q for this guess; prompt lookup's is a point mass (empty).
            const std::span<const double> q =
                draft.q.empty() ? std::span<const double>() : std::span<const double>(draft.q[i]);
            // Two draws in a fixed order (an argument list's order is the compiler's).
            const double u_accept = uniform();
            const double u_resample = uniform();
            const GuessVerdict v = verify_guess(p, q, draft.guesses[i], u_accept, u_resample);
            new_tokens.push_back(v.token);
            context.push_back(v.token);
            if (!v.accepted) {
                stop = true;
                break;
            }
            ++accepted;
            if (eos >= 0 && v.token == eos) stop = true;  // the sequence ends inside the run
        }
        if (!stop) {  // every guess accepted: the bonus token from the last row
            const std::vector<double> p = sampling_distribution(row(n_guesses), sampler);
            const int32_t bonus = draw_from(p, uniform());
            new_tokens.push_back(bonus);
            context.push_back(bonus);
        }
        token = new_tokens.back();
        // Keep the fed token and the accepted guesses; the rest is rolled back.
        target.roll_back(kept_before + 1 + accepted);

        ++stats.verify_steps;
        stats.proposed += n_guesses;
        stats.accepted += accepted;
        stats.proposed_per_step.push_back(n_guesses);
        stats.accepted_per_step.push_back(accepted);
        stats.tokens_after_first += static_cast<long long>(new_tokens.size() - made_before);
        trace.span("verify step", "decode", t,
                   {{"position", std::to_string(kept_before)},
                    {"positions_computed", std::to_string(chunk.size())},
                    {"guesses", std::to_string(n_guesses)},
                    {"accepted", std::to_string(accepted)}});
        step_us.push_back(trace.now_us() - t);
    }
    stats.draft_forwards = drafter.forwards();
}

}  // namespace plab
