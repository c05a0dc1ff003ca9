// The central invariant, written once and run on every backend: chunked
// prefill == whole prefill == cpu-ref, on the last position's logits and on
// every cached K and V. tests/engine runs these on cpu-ref and cpu,
// tests/gpu on each form (emulated, native) of gpu-ref and gpu.
//
// Oracles. cpu-ref's whole prefill is the oracle of every comparison; it is
// itself checked against a recompute that never carries a KV cache from one
// chunk to the next (position t recomputed from scratch from tokens 0..t). A comparison of
// cpu-ref's whole prefill with itself is determinism, not evidence: it is not
// made, and each check asserts how many real comparisons it did make.
#pragma once

#include <functional>
#include <vector>

#include "core/backend.h"

namespace plab::test {

// One random model shape. The list (random_shapes) is shared by the
// reference checks and the fast-backend check: one definition.
struct RandomShape {
    const char* what;  // why the shape is in the list
    int dim, layers, heads, kv_heads, head_dim, hidden, vocab, max_seq;
};
// GQA 3:1 and 2:1, odd head_dim (last component unrotated), D != H·Dh, plain
// multi-head attention, tiny heads, one head.
const std::vector<RandomShape>& random_shapes();

// Reference backends: all 512 chunk plans of a 10-token prompt, bit for bit
// equal to cpu-ref's full prefill (which equals the cache-free recompute).
void check_all_plans_of_ten_tokens(const std::vector<Backend*>& references);
// A fast backend: all 512 chunk plans of a 10-token prompt bit for bit equal
// to its own whole prefill (chunk-invariant kernels), which is itself within
// rel 1e-5 of cpu-ref's. `head_dim_for` as in check_fast_backend.
void check_all_plans_of_ten_tokens_fast(Backend& fast,
                                        const std::function<int(int)>& head_dim_for = nullptr);
// Reference backends: every random shape, random prompts up to max_seq_len
// (several rope_theta), random, fixed-size and token-by-token plans, random KV
// block sizes — bit for bit equal to cpu-ref (itself = the cache-free recompute).
void check_random_configs(const std::vector<Backend*>& references, int prompts_per_config);
// Reference backends: KV block size 1 with chunks of 5 == block size 16, whole.
void check_block_size_invariance(const std::vector<Backend*>& references);

// The gap between the largest and the second largest logit, by value: below
// twice a fast backend's tolerance its greedy token may legitimately differ.
double top_two_gap(const std::vector<float>& logits);

// What check_fast_backend saw (reported by the tests, not hidden).
struct FastReport {
    double worst = 0;             // max |logit - cpu-ref| / max |cpu-ref logit|, all runs
    int bitwise_to_own_full = 0;  // runs bit for bit equal to the backend's own whole prefill
    int comparisons = 0;          // (prompt, plan) runs compared with cpu-ref
    int argmax_checked = 0;       // of those, runs whose greedy token had to match
    int near_ties = 0;            // runs whose reference top-2 gap allowed a flip
};
// A fast backend on every random shape (random_shapes) and on a larger model
// whose prompts cross its query tiles (cpu 48, gpu 32): each plan's last logits within 1e-5
// of cpu-ref's largest |logit|, and the same greedy token unless cpu-ref's top
// two logits are closer than the tolerance allows (counted in near_ties).
// And chunk invariance (issue 9): every plan's logits and K/V bit for bit
// those of the backend's own whole prefill.
// `head_dim_for` (when given) maps each shape's Dh to one the backend is
// compiled for (the gpu backend's flash kernel has a fixed set, kernels.h).
FastReport check_fast_backend(Backend& fast, const std::function<int(int)>& head_dim_for = nullptr);

}  // namespace plab::test
