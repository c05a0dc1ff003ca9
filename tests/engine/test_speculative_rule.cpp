// Speculative sampling's rule (runtime/speculative_rule.h) keeps the target's
// distribution: tested by counting.
//
// What it shows: a guess g drawn from the draft's q, accepted with
// probability min(1, p(g)/q(g)) and otherwise replaced by a draw from the
// normalised max(0, p − q), is distributed as p — for three sampler settings
// (temperature, top-k, top-p shape p and q alike), for a point-mass draft
// (prompt lookup: replaced by a draw from p without g), and end to end for
// the first speculated token of a real target and draft. Two broken rules
// (always accept; replace by a draw from p) fail the same test, so it has
// the power to tell. Each test: 10⁶ draws (3,000 end to end) from fixed seeds,
// Pearson's χ² against the exact expected counts, bins expected below 5
// pooled, rejected at α = 0.001.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <random>
#include <string>

#include "model/model_io.h"
#include "runtime/generate.h"
#include "runtime/registry.h"
#include "runtime/speculative_rule.h"
#include "test_util.h"

using namespace plab;

namespace {

constexpr double kAlpha = 0.001;

// Uniform in [0, 1) from 53 bits, as the sampler draws (no std::*_distribution:
// libstdc++ and libc++ differ).
struct Uniform {
    std::mt19937_64 rng;
    explicit Uniform(std::uint64_t seed) : rng(seed) {}
    double operator()() { return double(rng() >> 11) * (1.0 / 9007199254740992.0); }
};

// The χ² quantile 1 − alpha for `df` degrees of freedom (Wilson–Hilferty:
// within 1% of the exact value for df >= 2; z = 3.0902 is the normal's 0.999
// quantile, the only alpha used here).
double chi2_critical(int df) {
    const double z = 3.090232;
    const double a = 2.0 / (9.0 * df);
    return df * std::pow(1.0 - a + z * std::sqrt(a), 3);
}

struct Fit {
    double chi2 = 0;
    int df = 0;
    bool outside_support = false;  // a token drawn that p gives probability 0
    bool rejected() const { return outside_support || chi2 > chi2_critical(df); }
};

// Pearson's χ² of `counts` against n·p, bins expected below 5 pooled into one.
Fit fit(const std::vector<long long>& counts, const std::vector<double>& p, long long n) {
    Fit f;
    double pooled_expected = 0;
    long long pooled_count = 0;
    int bins = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
        const double e = double(n) * p[i];
        if (p[i] == 0) {
            f.outside_support = f.outside_support || counts[i] > 0;
            continue;
        }
        if (e < 5) {
            pooled_expected += e;
            pooled_count += counts[i];
            continue;
        }
        f.chi2 += (counts[i] - e) * (counts[i] - e) / e;
        ++bins;
    }
    if (pooled_expected > 0) {
        f.chi2 += (pooled_count - pooled_expected) * (pooled_count - pooled_expected) /
                  std::max(pooled_expected, 1e-300);
        ++bins;
    }
    f.df = bins - 1;
    return f;
}

using Rule =
    std::function<int32_t(const std::vector<double>& p, const std::vector<double>& q, Uniform& u)>;

// The rule under test: g ~ q, then verify_guess.
int32_t speculative(const std::vector<double>& p, const std::vector<double>& q, Uniform& u) {
    const int32_t g = draw_from(q, u());
    const double ua = u(), ur = u();
    return verify_guess(p, q, g, ua, ur).token;
}
// Broken: every guess accepted (the draft's distribution comes out).
int32_t always_accept(const std::vector<double>&, const std::vector<double>& q, Uniform& u) {
    return draw_from(q, u());
}
// Broken: a rejected guess replaced by a draw from p instead of max(0, p − q).
int32_t resample_from_p(const std::vector<double>& p, const std::vector<double>& q, Uniform& u) {
    const int32_t g = draw_from(q, u());
    const double ua = u(), ur = u();
    const GuessVerdict v = verify_guess(p, q, g, ua, ur);
    return v.accepted ? g : draw_from(p, ur);
}

Fit draw_and_fit(const Rule& rule, const std::vector<double>& p, const std::vector<double>& q,
                 std::uint64_t seed) {
    constexpr long long kDraws = 1000000;
    std::vector<long long> counts(p.size(), 0);
    Uniform u(seed);
    for (long long i = 0; i < kDraws; ++i) ++counts[static_cast<std::size_t>(rule(p, q, u))];
    return fit(counts, p, kDraws);
}

// Target and draft logits over 12 tokens: they disagree on the order.
const std::vector<float> kTargetLogits = {2.0f,  1.5f,  1.4f,  0.9f,  0.5f,  0.1f,
                                          -0.3f, -0.8f, -1.0f, -1.7f, -2.5f, -3.0f};
const std::vector<float> kDraftLogits = {0.2f,  1.9f, -0.5f, 1.2f, 0.8f,  1.0f,
                                         -1.2f, 0.3f, -2.0f, 0.6f, -0.1f, -2.8f};

struct Setting {
    const char* what;
    SamplerOptions s;
};
std::vector<Setting> settings() {
    std::vector<Setting> v(3);
    v[0] = {"temperature 1", {}};
    v[0].s.temperature = 1.0f;
    v[1] = {"temperature 0.7, top-k 5", {}};
    v[1].s.temperature = 0.7f;
    v[1].s.top_k = 5;
    v[2] = {"temperature 1.3, top-p 0.8", {}};
    v[2].s.temperature = 1.3f;
    v[2].s.top_p = 0.8f;
    return v;
}

}  // namespace

TEST_CASE("speculative rule: accepted or replaced, the tokens follow the target's p",
          "[speculative][statistics]") {
    std::uint64_t seed = 101;
    for (const Setting& st : settings()) {
        INFO(st.what);
        const std::vector<double> p = sampling_distribution(kTargetLogits, st.s);
        const std::vector<double> q = sampling_distribution(kDraftLogits, st.s);
        const Fit good = draw_and_fit(speculative, p, q, seed++);
        INFO("chi2 " << good.chi2 << " on " << good.df << " df, critical "
                     << chi2_critical(good.df));
        CHECK_FALSE(good.rejected());
        CHECK(good.df >= 3);
        // The same test tells the broken rules apart.
        CHECK(draw_and_fit(always_accept, p, q, seed++).rejected());
        CHECK(draw_and_fit(resample_from_p, p, q, seed++).rejected());
    }
}

TEST_CASE("speculative rule: a point-mass draft (prompt lookup) keeps p for any guess",
          "[speculative][statistics]") {
    std::uint64_t seed = 301;
    for (const Setting& st : settings()) {
        const std::vector<double> p = sampling_distribution(kTargetLogits, st.s);
        // A likely guess, an unlikely one, and one outside top-k/top-p (p = 0).
        for (int32_t g : {0, 6, 11}) {
            INFO(st.what << ", guess " << g);
            const Rule lookup = [g](const std::vector<double>& pp, const std::vector<double>&,
                                    Uniform& u) {
                const double ua = u(), ur = u();
                return verify_guess(pp, {}, g, ua, ur).token;
            };
            CHECK_FALSE(draw_and_fit(lookup, p, {}, seed++).rejected());
            // Broken: a rejected guess replaced from p itself (g can come back).
            const Rule broken = [g](const std::vector<double>& pp, const std::vector<double>&,
                                    Uniform& u) {
                const double ua = u(), ur = u();
                const GuessVerdict v = verify_guess(pp, {}, g, ua, ur);
                return v.accepted ? g : draw_from(pp, ur);
            };
            if (p[static_cast<std::size_t>(g)] > 0.05 && p[static_cast<std::size_t>(g)] < 0.95)
                CHECK(draw_and_fit(broken, p, {}, seed++).rejected());
        }
    }
}

TEST_CASE("speculative rule: greedy is a point mass, so greedy speculation is greedy decoding",
          "[speculative]") {
    SamplerOptions greedy;
    const std::vector<double> p = sampling_distribution(kTargetLogits, greedy);
    CHECK(p[0] == 1.0);
    const std::vector<double> q = sampling_distribution(kDraftLogits, greedy);  // argmax 1
    CHECK(q[1] == 1.0);
    for (double u : {0.0, 0.5, 0.999}) {
        CHECK(verify_guess(p, q, 1, u, u).token == 0);  // rejected, replaced by the argmax
        CHECK_FALSE(verify_guess(p, q, 1, u, u).accepted);
        CHECK(verify_guess(p, {}, 0, u, u).accepted);  // the argmax guessed: kept
    }
}

TEST_CASE("speculative rule: end to end, the first speculated token follows the target's p",
          "[speculative][statistics]") {
    // The shipped model as the target; the draft is its first three layers
    // and the classifier (an "early exit" draft, as self-speculative decoding
    // uses). The target is confident here (p = 0.99 on one token at
    // temperature 1.5), so temperature 4 and top-k 8 spread p over 8 tokens
    // (each above 0.04) and q over 8, four of them shared: guesses are
    // accepted and replaced.
    static const Model shipped = load_model(std::string(PLAB_TESTS_DIR) + "/../assets/model");
    auto be = make_backend("cpu");
    const DeviceModel target(*be, shipped.weights);
    Weights early_exit = shipped.weights;
    early_exit.layers.resize(3);
    early_exit.config.n_layers = 3;
    auto draft_be = make_backend("cpu");
    const DeviceModel draft(*draft_be, early_exit);
    const std::vector<int32_t> prompt = shipped.tokenizer->encode(kDefaultPrompt, true);
    const int L = static_cast<int>(prompt.size());
    SamplerOptions so;
    so.temperature = 4.0f;
    so.top_k = 8;

    Session session(target);
    const std::vector<float> last =
        session.prefill(prompt, parse_chunk_plan("full", L)).last_logits;
    const int32_t first = argmax(last);  // the first token, fixed
    std::vector<double> p;
    {
        Session plain(target);
        plain.prefill(prompt, parse_chunk_plan("full", L));
        p = sampling_distribution(plain.decode_step(first), so);
    }
    constexpr int kTrials = 3000;
    std::vector<long long> counts(p.size(), 0);
    long long accepted = 0, proposed = 0;
    for (int trial = 0; trial < kTrials; ++trial) {
        so.seed = 5000 + static_cast<std::uint64_t>(trial);
        ModelDrafter drafter(draft, 512, SessionOptions{}, so);
        std::vector<int32_t> context = prompt;
        context.push_back(first);
        std::vector<int32_t> made{first};
        SpeculativeStats stats;
        Trace trace;
        std::vector<double> step_us;
        // Three tokens: one verify step with two guesses after the first.
        speculative_decode(session, drafter, so, 2, 3, -1, context, made, stats, trace, step_us);
        REQUIRE(made.size() >= 2);
        ++counts[static_cast<std::size_t>(made[1])];
        accepted += stats.accepted;
        proposed += stats.proposed;
        session.roll_back(L);
    }
    const Fit f = fit(counts, p, kTrials);
    INFO("chi2 " << f.chi2 << " on " << f.df << " df, critical " << chi2_critical(f.df)
                 << "; guesses accepted " << accepted << " of " << proposed);
    CHECK_FALSE(f.rejected());
    CHECK(f.df >= 4);
    CHECK(accepted > 0);         // acceptances happened
    CHECK(accepted < proposed);  // and replacements
}
