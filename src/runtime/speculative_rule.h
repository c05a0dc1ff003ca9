// Speculative sampling's rule: accept a guess, or draw its replacement, so
// that the tokens keep the target model's distribution (Leviathan et al.
// 2023, "Fast Inference from Transformers via Speculative Decoding"; Chen et
// al. 2023, "Accelerating LLM Decoding with Speculative Sampling").
//
// What it teaches: a cheap draft proposes token g with probability q(g); the
// target, which would have drawn it with probability p(g), accepts it with
// probability min(1, p(g)/q(g)); a rejected guess is replaced by a draw from
// the leftover mass max(0, p − q), renormalised. Every token then has exactly
// probability p: min(p, q) of it comes through acceptance, max(0, p − q)
// through the replacement. p and q are the distributions the sampler draws
// from — after temperature, top-k and top-p — and a greedy sampler's is a
// point mass on the argmax, so greedy speculation gives greedy's tokens. A
// draft that proposes without a distribution (prompt lookup, an n-gram) is a
// point mass q(g) = 1: g is accepted with probability p(g), else replaced by a
// draw from p without g.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/sampler.h"

namespace plab {

// The distribution Sampler::sample draws from, dense over the vocabulary:
// a point mass on argmax(logits) when greedy; else the kept candidates'
// probabilities divided by their mass, 0 for the rest.
std::vector<double> sampling_distribution(const std::vector<float>& logits,
                                          const SamplerOptions& options);

// Inverse-CDF draw from a dense distribution (ids in order; u01 in [0, 1)).
int32_t draw_from(std::span<const double> p, double u01);

struct GuessVerdict {
    bool accepted = false;
    int32_t token = 0;  // the guess when accepted, else its replacement
};

// The rule for one guess: p the target's distribution at this position, q the
// draft's (empty: a point mass on `guess`), u_accept and u_resample two
// independent uniform draws in [0, 1). Accepts when u_accept · q(g) < p(g).
GuessVerdict verify_guess(std::span<const double> p, std::span<const double> q, int32_t guess,
                          double u_accept, double u_resample);

}  // namespace plab
