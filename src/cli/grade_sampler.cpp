// `plab grade sampler`: temperature, top-k, top-p, and seeded draws
// (lessons/assignments/sampler/README.md).
//
// The reference is the engine's own sampler (runtime/sampler.h): the
// candidates sampling_candidates keeps — softmax(logits / temperature), sorted,
// top-k, then top-p over the top-k set renormalised — and draw_candidate's
// inverse-CDF draw for a given u. Known mistakes: logits multiplied by the
// temperature, top-p over the whole distribution, top-p stopping one token
// short, kept probabilities not renormalised, draws walked in id order.
#include <algorithm>
#include <cmath>

#include "cli/grade.h"
#include "runtime/sampler.h"

namespace plab::cli::grade {
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

}  // namespace sampler_detail

std::vector<Check> sampler_checks(std::mt19937_64& rng) {
    using sampler_detail::draws_case;
    using sampler_detail::probs_case;
    std::vector<Check> checks(5);
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
    return checks;
}

}  // namespace plab::cli::grade
