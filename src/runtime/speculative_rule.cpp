#include "runtime/speculative_rule.h"

#include "core/error.h"

namespace plab {

std::vector<double> sampling_distribution(const std::vector<float>& logits,
                                          const SamplerOptions& options) {
    std::vector<double> p(logits.size(), 0.0);
    if (options.temperature == 0.0f) {
        p[static_cast<std::size_t>(argmax(logits))] = 1.0;
        return p;
    }
    const SamplingCandidates c = sampling_candidates(logits, options);
    for (std::size_t i = 0; i < c.keep; ++i)
        p[static_cast<std::size_t>(c.ids[i])] =
            c.probs[static_cast<std::size_t>(c.ids[i])] / c.total;
    return p;
}

int32_t draw_from(std::span<const double> p, double u01) {
    double total = 0;
    for (double x : p) total += x;
    PLAB_ASSERT(total > 0);
    const double u = u01 * total;
    double acc = 0;
    int32_t last = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
        if (p[i] <= 0) continue;
        acc += p[i];
        last = static_cast<int32_t>(i);
        if (u < acc) return last;
    }
    return last;  // u at the very top of the rounding of the sum
}

GuessVerdict verify_guess(std::span<const double> p, std::span<const double> q, int32_t guess,
                          double u_accept, double u_resample) {
    PLAB_ASSERT(guess >= 0 && static_cast<std::size_t>(guess) < p.size());
    PLAB_ASSERT(q.empty() || q.size() == p.size());
    const std::size_t g = static_cast<std::size_t>(guess);
    const double qg = q.empty() ? 1.0 : q[g];
    if (u_accept * qg < p[g]) return {true, guess};
    // Rejected: the leftover mass max(0, p - q). With a point-mass draft that
    // is p with the guess removed (p(g) - 1 <= 0).
    std::vector<double> residual(p.size());
    double left = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
        const double qi = q.empty() ? (i == g ? 1.0 : 0.0) : q[i];
        residual[i] = p[i] > qi ? p[i] - qi : 0.0;
        left += residual[i];
    }
    // Nothing left only when p <= q everywhere, i.e. p == q: then p(g) >= q(g)
    // and the guess was accepted above. Rounding can leave a sliver; fall back
    // to p itself, which is what the leftover would be in exact arithmetic's limit.
    if (left <= 0) return {false, draw_from(p, u_resample)};
    return {false, draw_from(residual, u_resample)};
}

}  // namespace plab
