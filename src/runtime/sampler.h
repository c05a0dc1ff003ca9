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
