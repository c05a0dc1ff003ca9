// Speculative decoding on the roofline clock: when does verifying K guesses
// in one forward pay (lessons/18-speculative-decoding.md)?
//
// What it teaches: while decode is memory-bound, a step's time is the weights
// it reads, whatever its rows; a verify step of K+1 rows a sequence then costs
// about one decode step, and each accepted guess is a decode step saved. As
// the batch grows, the rows of b·(K+1) make the step compute-bound: the verify
// costs up to K+1 decode steps and the speed-up turns into a slow-down. With
// acceptance rate α (guesses accepted independently, Leviathan et al. 2023),
//     speed-up = E[tokens per verify] · T_decode / (T_verify + K · T_draft),
//     E[tokens per verify] = (1 − α^(K+1)) / (1 − α),
// T_draft one draft decode step (0 for prompt lookup).
#pragma once

#include <vector>

#include "serving/roofline.h"

namespace plab {

struct SpeculativePoint {
    int batch = 0, k = 0;
    double decode_us = 0;      // one plain decode step of the batch
    double verify_us = 0;      // one verify step: K+1 rows a sequence, all sampled
    double draft_us = 0;       // K draft decode steps
    std::string verify_bound;  // "memory" or "compute"
    double tokens_per_verify = 0;
    double speed_up = 0;  // tokens per second against plain decoding's
};

// The curve over K (1..k_max) and batch sizes at `context` cached positions;
// `draft_ratio`: a draft decode step's time over the target's (0: prompt lookup).
std::vector<SpeculativePoint> speculative_curve(const RooflineCost& cost, double alpha,
                                                double draft_ratio, int context, int k_max,
                                                const std::vector<int>& batches);

}  // namespace plab
