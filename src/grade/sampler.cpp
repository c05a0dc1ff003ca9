// `plab grade sampler`: temperature, top-k, top-p, seeded draws, and the
// student's whole sampler matched in distribution (lessons/assignments/sampler/README.md).
//
// The reference is the engine's own sampler (runtime/sampler.h): the
// candidates sampling_candidates keeps — softmax(logits / temperature), sorted,
// top-k, then top-p over the top-k set renormalised — and draw_candidate's
// inverse-CDF draw for a given u. The student's sample(), with its own seeded
// generator, is judged by Pearson's chi-square of its draws against the
// engine's distribution (any correct generator passes). Known mistakes: logits
// multiplied by the temperature, top-p over the whole distribution, top-p
// stopping one token short, kept probabilities not renormalised, draws walked
// in id order; draws uniform over the kept tokens, top-k/top-p ignored when
// drawing, a new generator (the same draw) every time, the seed ignored.
#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>

#include "grade/grade.h"

namespace plab::grade {
namespace sampler_detail {

// The distribution drawn from: the first `keep` candidates, divided by their
// mass when renormalised, zeros elsewhere.
Tensor distribution(const SamplingCandidates& c, std::size_t keep, bool renormalise = true) {
    std::vector<double> p(c.probs.size(), 0.0);
    double total = 0;
    for (std::size_t i = 0; i < keep; ++i) total += c.probs[c.ids[i]];
    for (std::size_t i = 0; i < keep; ++i)
        p[c.ids[i]] = renormalise ? c.probs[c.ids[i]] / total : c.probs[c.ids[i]];
    return tensor({static_cast<int>(p.size())}, p);
}

// The engine's softmax is in double, rounded to float; the student's numpy in
// float64 or float32 differs by ~1e-7 relative: 1e-5 absolute, 1e-4 relative.
constexpr double kAtol = 1e-5, kRtol = 1e-4;

std::string options_text(float temperature, int top_k, float top_p) {
    char b[96];
    std::snprintf(b, sizeof b, "temperature %g, top_k %d, top_p %g", temperature, top_k, top_p);
    return b;
}

Case probs_case(std::mt19937_64& rng, int vocab, float temperature, int top_k, float top_p) {
    const std::vector<float> logits = uniform(rng, vocab, 4.0f);
    Case c;
    c.calls.push_back({{"fn", "sampling_probs"},
                       {"args",
                        {{"logits", to_arg(tensor_f({vocab}, logits))},
                         {"temperature", temperature},
                         {"top_k", top_k},
                         {"top_p", top_p}}}});
    Expectation e;
    e.what = "probabilities";
    e.where = "V=" + std::to_string(vocab) + ", " + options_text(temperature, top_k, top_p);
    e.axes = {"token"};
    e.atol = kAtol;
    e.rtol = kRtol;
    if (temperature == 0.0f) {
        std::vector<double> one_hot(vocab, 0.0);
        one_hot[argmax(logits)] = 1.0;
        e.expected = tensor({vocab}, one_hot);
        e.diagnose = [](const Tensor&) {
            return std::string(
                "temperature 0 is greedy: probability 1 at the argmax (lowest id on ties), "
                "0 elsewhere; do not divide by 0");
        };
        c.expect.push_back(std::move(e));
        return c;
    }
    const SamplerOptions o{temperature, top_k, top_p, 1};
    const SamplingCandidates ref = sampling_candidates(logits, o);
    e.expected = distribution(ref, ref.keep);
    const SamplingCandidates hot =
        sampling_candidates(logits, {1.0f / temperature, top_k, top_p, 1});
    e.mistakes.push_back({distribution(hot, hot.keep),
                          "you multiplied the logits by the temperature; divide them by it"});
    if (top_k > 0 && top_p < 1.0f) {
        const SamplingCandidates whole = sampling_candidates(logits, {temperature, 0, top_p, 1});
        e.mistakes.push_back(
            {distribution(ref, std::min<std::size_t>(whole.keep, top_k)),
             "top-p is taken over the top-k set renormalised (its mass, not 1), as the engine, "
             "Hugging Face and vLLM do"});
    }
    if (ref.keep > 1)
        e.mistakes.push_back({distribution(ref, ref.keep - 1),
                              "top-p keeps the smallest prefix whose mass reaches p, including "
                              "the token that crosses it (>= p)"});
    e.mistakes.push_back(
        {distribution(ref, ref.keep, false), "renormalise: the kept probabilities must sum to 1"});
    c.expect.push_back(std::move(e));
    return c;
}

// Draws from the reference distribution at seeded u in [0, 1).
Case draws_case(std::mt19937_64& rng, int vocab, float temperature, int top_k, float top_p,
                int n_draws) {
    const std::vector<float> logits = uniform(rng, vocab, 4.0f);
    const SamplingCandidates ref = sampling_candidates(logits, {temperature, top_k, top_p, 1});
    const Tensor probs = distribution(ref, ref.keep);
    const nlohmann::json probs_arg = to_arg(probs);
    Case c;
    for (int i = 0; i < n_draws; ++i) {
        const double u = double(rng() >> 11) * (1.0 / 9007199254740992.0);  // as Sampler::sample
        c.calls.push_back({{"fn", "draw"}, {"args", {{"probs", probs_arg}, {"u", u}}}});
        Expectation e;
        e.call = i;
        e.what = "token";
        e.where = "V=" + std::to_string(vocab) + ", " + options_text(temperature, top_k, top_p) +
                  ", draw " + std::to_string(i) + " at u=" + std::to_string(u);
        e.expected = tensor({}, {double(draw_candidate(ref, u))});
        // The same walk in id order instead of most likely first.
        double acc = 0, target = u * ref.total;
        int by_id = ref.ids[ref.keep - 1];
        std::vector<int32_t> kept(ref.ids.begin(), ref.ids.begin() + ref.keep);
        std::sort(kept.begin(), kept.end());
        for (int32_t id : kept) {
            acc += ref.probs[id];
            if (target < acc) {
                by_id = id;
                break;
            }
        }
        e.mistakes.push_back({tensor({}, {double(by_id)}),
                              "walk the candidates from the most likely down (ties: lower id "
                              "first), not in id order"});
        c.expect.push_back(std::move(e));
    }
    return c;
}

// Draws a case's sample() makes: enough that a token of probability 0.05 is
// expected 1000 times (count within ~3 % of it at 1 standard deviation).
constexpr int kDraws = 20000;

// The upper 1e-6 quantile of chi-square with `df` degrees of freedom
// (Wilson-Hilferty; z = 4.7534 is the normal's upper 1e-6 quantile). Checked
// against the exact quantile for df 1..49: never below it (27.5 vs 23.9 at
// df 1, 48.0 vs 46.9 at 10), so a correct sampler fails less than once in a
// million cases, while each planted mistake exceeds it a hundredfold.
double chi_square_bound(int df) {
    const double z = 4.7534, a = 2.0 / (9.0 * df);
    return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

std::string decimals(double x, int digits) {
    char b[32];
    std::snprintf(b, sizeof b, "%.*f", digits, x);
    return b;
}

// Why `got` (n token ids) is not a sample of `p` (V probabilities), or "" when
// it is: an id out of range, a draw of a token of probability 0, or Pearson's
// chi-square over the kept tokens above chi_square_bound. Tokens are binned,
// least likely first, into bins of at least 5 expected draws (the rule of thumb
// for the chi-square approximation); a last bin under 5 joins the one before.
std::string misfit(const Tensor& got, const std::vector<double>& p) {
    const int vocab = static_cast<int>(p.size());
    const double n = static_cast<double>(got.size());
    if (got.shape.size() != 1 || got.size() == 0)
        return "expected a 1-D array of token ids, got an array of shape rank " +
               std::to_string(got.shape.size());
    std::vector<double> count(p.size(), 0.0);
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double x = got.data[i];
        if (!(x >= 0 && x < vocab && x == std::floor(x)))
            return "draw " + std::to_string(i) + " is " + decimals(x, 3) +
                   ", not a token id in 0.." + std::to_string(vocab - 1);
        count[static_cast<int>(x)] += 1;
    }
    std::vector<int> kept;
    for (int t = 0; t < vocab; ++t) {
        if (p[t] > 0) kept.push_back(t);
        if (p[t] == 0 && count[t] > 0)
            return "token " + std::to_string(t) + " drawn " + decimals(count[t], 0) +
                   " times; its probability is 0 (outside the kept tokens)";
    }
    std::stable_sort(kept.begin(), kept.end(), [&](int a, int b) { return p[a] < p[b]; });
    std::vector<std::pair<double, double>> bins;  // (expected, observed)
    double e = 0, o = 0;
    for (int t : kept) {
        e += n * p[t];
        o += count[t];
        if (e >= 5) bins.push_back({e, o}), e = o = 0;
    }
    if (e > 0 && !bins.empty()) bins.back().first += e, bins.back().second += o;
    if (bins.size() < 2) return "";  // one possible token (greedy): out-of-set draws checked above
    double chi2 = 0;
    for (auto [be, bo] : bins) chi2 += (bo - be) * (bo - be) / be;
    const int df = static_cast<int>(bins.size()) - 1;
    const double bound = chi_square_bound(df);
    if (chi2 <= bound) return "";
    int worst = kept[0];
    for (int t : kept)
        if (std::fabs(count[t] - n * p[t]) / std::sqrt(n * p[t]) >
            std::fabs(count[worst] - n * p[worst]) / std::sqrt(n * p[worst]))
            worst = t;
    return "chi-square " + decimals(chi2, 1) + " over " + std::to_string(bins.size()) +
           " bins (df " + std::to_string(df) + "), bound " + decimals(bound, 1) +
           " (a correct sampler exceeds it less than once in a million); token " +
           std::to_string(worst) + ": expected " + decimals(n * p[worst], 1) + " draws (p " +
           decimals(p[worst], 4) + "), got " + decimals(count[worst], 0);
}

// The student's sample() over kDraws seeded draws against the engine's distribution.
Case distribution_case(std::mt19937_64& rng, int vocab, float temperature, int top_k, float top_p) {
    const std::vector<float> logits = uniform(rng, vocab, 4.0f);
    const int seed = uniform_int(rng, 1, 1 << 30);
    Case c;
    c.calls.push_back({{"fn", "sample"},
                       {"args",
                        {{"logits", to_arg(tensor_f({vocab}, logits))},
                         {"temperature", temperature},
                         {"top_k", top_k},
                         {"top_p", top_p},
                         {"seed", seed},
                         {"n", kDraws}}}});
    Expectation e;
    e.what = "draws";
    e.where = "V=" + std::to_string(vocab) + ", " + options_text(temperature, top_k, top_p) + ", " +
              std::to_string(kDraws) + " draws, seed " + std::to_string(seed);
    std::vector<double> p(vocab, 0.0), uniform_kept(vocab, 0.0), whole(vocab, 0.0), hot(vocab, 0.0);
    if (temperature == 0.0f) {
        p[argmax(logits)] = 1.0;
    } else {
        const SamplingCandidates ref = sampling_candidates(logits, {temperature, top_k, top_p, 1});
        p = distribution(ref, ref.keep).data;
        for (std::size_t i = 0; i < ref.keep; ++i) uniform_kept[ref.ids[i]] = 1.0 / ref.keep;
        const SamplingCandidates all = sampling_candidates(logits, {temperature, 0, 1.0f, 1});
        whole = distribution(all, all.keep).data;
        const SamplingCandidates h =
            sampling_candidates(logits, {1.0f / temperature, top_k, top_p, 1});
        hot = distribution(h, h.keep).data;
    }
    e.expected = tensor({vocab}, p);
    e.judge = [](const Tensor& got, const Tensor& ref) { return misfit(got, ref.data); };
    const bool several = std::count_if(p.begin(), p.end(), [](double x) { return x > 0; }) > 1;
    e.diagnose = [=](const Tensor& got) -> std::string {
        if (several && got.size() > 1 &&
            std::all_of(got.data.begin(), got.data.end(),
                        [&](double x) { return x == got.data[0]; }))
            return "every draw is the same token: make one generator from the seed per call and "
                   "draw n times from it (not a new generator, or the same u, for each draw)";
        if (temperature == 0.0f) return "";
        if (misfit(got, uniform_kept).empty())
            return "your draws are uniform over the kept tokens: draw each in proportion to its "
                   "probability (inverse CDF: the token where u * sum(probs) falls in the running "
                   "sum)";
        if (whole != p && misfit(got, whole).empty())
            return "your draws ignore top-k/top-p: draw from sampling_probs(...), not from the "
                   "whole softmax";
        if (misfit(got, hot).empty())
            return "you multiplied the logits by the temperature; divide them by it";
        return "";
    };
    c.expect.push_back(std::move(e));
    return c;
}

// The same seed gives the same draws; another seed, other draws.
Case seed_case(std::mt19937_64& rng, int vocab, int n) {
    const std::vector<float> logits = uniform(rng, vocab, 1.0f);
    const int seed = uniform_int(rng, 1, 1 << 30);
    Case c;
    for (int s : {seed, seed, seed + 1})
        c.calls.push_back({{"fn", "sample"},
                           {"args",
                            {{"logits", to_arg(tensor_f({vocab}, logits))},
                             {"temperature", 1.0},
                             {"top_k", 0},
                             {"top_p", 1.0},
                             {"seed", s},
                             {"n", n}}}});
    const std::string where = "V=" + std::to_string(vocab) + ", " + std::to_string(n) +
                              " draws, seed " + std::to_string(seed);
    const auto ignores_seed = [](const Tensor&) {
        return std::string(
            "make the generator from the seed given, once per call "
            "(np.random.default_rng(seed)): the same seed must give the same draws");
    };
    Expectation same;
    same.call = 1;
    same.same_as_call = 0;
    same.what = "draws of a second call with the same seed";
    same.where = where;
    same.axes = {"draw"};
    same.diagnose = ignores_seed;  // atol 0: the very same ids
    c.expect.push_back(same);
    Expectation other;
    other.call = 2;
    other.same_as_call = 0;
    other.what = "draws with seed " + std::to_string(seed + 1);
    other.where = where;
    other.judge = [seed](const Tensor& got, const Tensor& first) -> std::string {
        if (got.shape != first.shape || got.data != first.data) return "";
        return "the very draws of seed " + std::to_string(seed) + ": the seed is not used";
    };
    other.diagnose = ignores_seed;
    c.expect.push_back(std::move(other));
    return c;
}

}  // namespace sampler_detail

std::vector<Check> sampler_checks(std::mt19937_64& rng) {
    using sampler_detail::distribution_case;
    using sampler_detail::draws_case;
    using sampler_detail::probs_case;
    using sampler_detail::seed_case;
    std::vector<Check> checks(7);
    checks[0] = {"temperature (0 = greedy)", "p = softmax(logits / temperature)", {}};
    for (float t : {1.0f, 0.5f, 2.0f, 0.0f})
        checks[0].cases.push_back(probs_case(rng, 33, t, 0, 1));
    checks[1] = {"top-k", "keep the k most likely tokens, zero the rest, renormalise", {}};
    for (int k : {1, 5, 40}) checks[1].cases.push_back(probs_case(rng, 33, 0.8f, k, 1));
    checks[2] = {"top-p", "keep the smallest most-likely prefix whose mass reaches p", {}};
    for (float p : {0.5f, 0.9f, 0.05f}) checks[2].cases.push_back(probs_case(rng, 33, 1.0f, 0, p));
    checks[3] = {"top-k then top-p (renormalised)",
                 "top-p over the top-k set renormalised to 1, then renormalise the kept tokens",
                 {}};
    for (auto [k, p] : {std::pair{10, 0.7f}, {4, 0.5f}, {20, 0.95f}})
        checks[3].cases.push_back(probs_case(rng, 50, 1.2f, k, p));
    checks[4] = {"seeded draws (inverse CDF)",
                 "most likely first (ties: lower id first); the token where u * sum(probs) "
                 "falls in the running sum",
                 {}};
    checks[4].cases.push_back(draws_case(rng, 20, 1.0f, 0, 1.0f, 40));
    checks[4].cases.push_back(draws_case(rng, 50, 0.7f, 10, 0.9f, 40));
    checks[5] = {"sample(): draws in distribution (chi-square)",
                 "sample draws n tokens from sampling_probs(...) with one generator seeded by "
                 "`seed`: token i about n * p_i times",
                 {}};
    checks[5].cases.push_back(distribution_case(rng, 20, 1.0f, 0, 1.0f));
    checks[5].cases.push_back(distribution_case(rng, 33, 0.7f, 10, 0.9f));
    checks[5].cases.push_back(distribution_case(rng, 50, 1.5f, 0, 0.8f));
    checks[5].cases.push_back(distribution_case(rng, 12, 0.0f, 0, 1.0f));
    checks[6] = {"sample(): seeded (same seed, same draws)",
                 "one generator made from `seed` in each call: the same seed gives the same "
                 "draws, another seed other draws",
                 {}};
    checks[6].cases.push_back(seed_case(rng, 20, 64));
    checks[6].cases.push_back(seed_case(rng, 7, 64));
    return checks;
}

}  // namespace plab::grade
