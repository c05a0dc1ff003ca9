#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace plab {

void SamplerOptions::validate() const {
    PLAB_CHECK(std::isfinite(temperature) && temperature >= 0.0f,
               "temperature " << temperature << " must be >= 0 (0 = greedy)");
    PLAB_CHECK(top_k >= 0, "top-k " << top_k << " must be >= 0 (0 = no limit)");
    PLAB_CHECK(top_p > 0.0f && top_p <= 1.0f, "top-p " << top_p << " must be in (0, 1]");
}

Sampler::Sampler(SamplerOptions options) : options_(options), rng_(options.seed) {
    options_.validate();
}

int32_t argmax(std::span<const float> logits) {
    PLAB_ASSERT(!logits.empty());
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::vector<float> softmax(const std::vector<float>& logits) {
    const float m = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (float x : logits) sum += std::exp(double(x) - m);
    std::vector<float> p(logits.size());
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = float(std::exp(double(logits[i]) - m) / sum);
    return p;
}

std::vector<TokenProb> top_probs(const std::vector<float>& logits, int k) {
    const std::vector<float> p = softmax(logits);
    std::vector<int32_t> idx(p.size());
    std::iota(idx.begin(), idx.end(), 0);
    k = std::min<int>(k, static_cast<int>(idx.size()));
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    std::vector<TokenProb> out;
    for (int i = 0; i < k; ++i) out.push_back({idx[i], p[idx[i]]});
    return out;
}

SamplingCandidates sampling_candidates(const std::vector<float>& logits,
                                       const SamplerOptions& options) {
    PLAB_ASSERT(options.temperature > 0.0f && !logits.empty());
    // 1. Temperature, then softmax (in double: this is not a bitwise path).
    std::vector<float> scaled(logits.size());
    for (std::size_t i = 0; i < logits.size(); ++i) scaled[i] = logits[i] / options.temperature;
    SamplingCandidates c;
    c.probs = softmax(scaled);
    const std::vector<float>& p = c.probs;
    // 2. Candidates sorted by probability (ties: lower id first).
    std::vector<int32_t>& idx = c.ids;
    idx.resize(p.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
    // 3. top-k, then top-p over the top-k set renormalised (as Hugging Face,
    //    vLLM and llama.cpp apply them): the smallest prefix whose share of
    //    the kept mass reaches p. Without a top-k the kept mass is the whole
    //    distribution, 1.
    std::size_t keep =
        options.top_k > 0 ? std::min<std::size_t>(options.top_k, idx.size()) : idx.size();
    double kept_mass = 1.0;
    if (keep < idx.size()) {
        kept_mass = 0;
        for (std::size_t i = 0; i < keep; ++i) kept_mass += p[idx[i]];
    }
    double mass = 0;
    for (std::size_t i = 0; i < keep; ++i) {
        mass += p[idx[i]];
        if (mass >= options.top_p * kept_mass) {
            keep = i + 1;
            break;
        }
    }
    c.keep = keep;
    for (std::size_t i = 0; i < keep; ++i) c.total += p[idx[i]];
    return c;
}

int32_t draw_candidate(const SamplingCandidates& c, double u01) {
    const double u = u01 * c.total;
    double acc = 0;
    for (std::size_t i = 0; i < c.keep; ++i) {
        acc += c.probs[c.ids[i]];
        if (u < acc) return c.ids[i];
    }
    return c.ids[c.keep - 1];
}

int32_t Sampler::sample(const std::vector<float>& logits) {
    if (options_.temperature == 0.0f) return argmax(logits);
    const SamplingCandidates c = sampling_candidates(logits, options_);
    // 4. Draw u in [0, 1) from 53 random bits: the same on every platform.
    return draw_candidate(c, double(rng_() >> 11) * (1.0 / 9007199254740992.0));
}

}  // namespace plab
