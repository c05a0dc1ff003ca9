// The toy example: attention you can do by hand.
//
// What it teaches: one head, head dimension 1, four positions. With every
// query and key equal to 1 all scores are equal, so causal attention at
// position p is the plain mean of values 0..p:
//   values 2, 4, 8, 10  ->  outputs 2, 3, 14/3, 6.
// It runs through the *same* backend ops as the model (kv_append into a paged
// cache, then attention), full and chunked, to show that chunking changes
// nothing: a chunk's queries read earlier keys from the cache.
#pragma once

#include <string>
#include <vector>

#include "core/backend.h"
#include "runtime/chunk_plan.h"

namespace plab {

struct ToyInput {
    std::vector<float> queries{1, 1, 1, 1};
    std::vector<float> keys{1, 1, 1, 1};
    std::vector<float> values{2, 4, 8, 10};

    int n_tokens() const { return static_cast<int>(values.size()); }
    void validate() const;  // equal lengths, 1..64 positions, finite numbers
};

struct ToyRun {
    ChunkPlan plan;
    std::vector<float> outputs;  // (T): attention output at each position
    std::vector<float> probs;    // (T, T): attention probabilities, masked 0
};

// Runs the toy through `backend` with KV blocks of 2 positions, under `mask`
// (causal by default; a plan the mask does not allow is refused).
ToyRun run_toy(Backend& backend, const ToyInput& input, const ChunkPlan& plan,
               const Mask& mask = {});

// "14/3 = mean of v0..v2" when position p's visible scores are all equal and
// the values are integers (so the exact answer is a fraction); "" otherwise.
std::string toy_exact_output(const ToyInput& input, int position, const Mask& mask = {});

}  // namespace plab
