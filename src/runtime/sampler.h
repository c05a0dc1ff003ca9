// Sampler: turning the last position's logits into one token.
//
// What it teaches: the model gives a distribution; *sampling* picks from it.
// Greedy takes the argmax (temperature 0). Otherwise logits are divided by the
// temperature, softmaxed, cut to the k most likely (top-k), then to the
// smallest prefix of those whose share of the top-k mass reaches p (top-p,
// "nucleus", Holtzman et al. 2019; over the top-k set renormalised, as
// Hugging Face, vLLM and llama.cpp apply the two), renormalised, and drawn
// with a seeded generator so runs are repeatable.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace plab {

struct SamplerOptions {
    float temperature = 0.0f;  // 0 = greedy
    int top_k = 0;             // 0 = no limit
    float top_p = 1.0f;        // 1 = no limit
    std::uint64_t seed = 1;

    void validate() const;  // temperature >= 0, top_k >= 0, 0 < top_p <= 1
};

class Sampler {
public:
    explicit Sampler(SamplerOptions options);
    int32_t sample(const std::vector<float>& logits);

private:
    SamplerOptions options_;
    std::mt19937_64 rng_;
};

// What a draw is made from (temperature > 0): every token's probability after
// the temperature, the ids sorted by it (ties: lower id first), how many of
// them top-k and top-p keep, and their mass. The kept tokens' probabilities
// divided by `total` are the distribution sampled (`plab grade sampler` checks a
// student's against it).
struct SamplingCandidates {
    std::vector<float> probs;  // (V) softmax(logits / temperature)
    std::vector<int32_t> ids;  // (V) sorted by probs, descending
    std::size_t keep = 0;      // the first `keep` of ids survive top-k and top-p
    double total = 0;          // their mass
};
SamplingCandidates sampling_candidates(const std::vector<float>& logits,
                                       const SamplerOptions& options);
// The kept token where u01 * total falls in the running sum of kept
// probabilities (u01 in [0, 1)): the inverse-CDF draw of Sampler::sample.
int32_t draw_candidate(const SamplingCandidates& c, double u01);

// Index of the largest logit, lowest index on ties: the one argmax on the
// host (greedy sampling, eval's accuracy, the equivalence report's token).
int32_t argmax(std::span<const float> logits);

// Softmax of logits (in double for the sum, returned as float) — for printing
// top-5 probabilities, not part of any bitwise promise.
std::vector<float> softmax(const std::vector<float>& logits);

struct TokenProb {
    int32_t token;
    float prob;
};
std::vector<TokenProb> top_probs(const std::vector<float>& logits, int k);

}  // namespace plab
