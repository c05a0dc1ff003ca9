// Chunk plan: how a prompt of T tokens is cut into prefill chunks.
//
// What it teaches: chunked prefill (Agrawal et al. 2023, "SARATHI") processes
// a long prompt in pieces so that other requests can run in between. Chunk c
// starts at offset p (tokens already in the KV cache) and its queries attend
// to cache positions 0..p+len-1 under the causal mask. The result must not
// depend on the plan; tests/engine proves it for every plan of a 10-token prompt.
//
//   // clang-format off
//   plan "3,1,4" over 8 tokens:   [t0 t1 t2 | t3 | t4 t5 t6 t7]
//   chunk 2 (offset 4) queries t4..t7 see keys t0..t7, each only up to itself.
//   // clang-format on
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace plab {

struct ChunkPlan {
    std::vector<int> lengths;  // every length >= 1, summing to the prompt's length

    int n_tokens() const;
    std::string to_string() const;  // "3,1,4"
    // Where each chunk starts, then where the last one ends (one more value
    // than lengths): "3,1,4" -> 0, 3, 4, 8. Chunk c is positions
    // starts[c]..starts[c+1]-1.
    std::vector<int> starts() const;
};

// Parses "full", a fixed size "4" (last chunk shorter if needed), or explicit
// lengths "3,1,4" (must sum to n_tokens). Throws plab::Error with a hint otherwise.
ChunkPlan parse_chunk_plan(std::string_view text, int n_tokens);

// The fixed-size plan: chunks of `size`, the last one possibly shorter.
ChunkPlan fixed_chunk_plan(int n_tokens, int size);

// All 2^(T-1) plans of T tokens (every composition of T), for exhaustive tests.
std::vector<ChunkPlan> all_chunk_plans(int n_tokens);

}  // namespace plab
