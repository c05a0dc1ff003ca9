// The central invariant, written once and run on every backend: chunked
// prefill == whole prefill == cpu-ref, on the last position's logits and on
// every cached K and V. tests/engine runs these on cpu-ref and cpu,
// tests/gpu on each form (emulated, native) of gpu-ref and gpu.
#pragma once

#include <vector>

#include "backends/backend.h"

namespace plab::test {

// Reference backends: all 512 chunk plans of a 10-token prompt, bit for bit
// equal to cpu-ref's full prefill.
void check_all_plans_of_ten_tokens(const std::vector<Backend*>& references);
// Reference backends: random configs (GQA, odd head_dim, D != H·Dh, several
// rope_theta) and random prompts up to max_seq_len; random, fixed-size and
// token-by-token plans, random KV block sizes — bit for bit equal to cpu-ref.
void check_random_configs(const std::vector<Backend*>& references, int prompts_per_config);
// Reference backends: KV block size 1 with chunks of 5 == block size 16, whole.
void check_block_size_invariance(const std::vector<Backend*>& references);
// A fast backend: within 1e-5 of cpu-ref's largest logit and the same greedy
// token for several plans. Returns the worst relative difference seen and
// sets `across_plans` to the worst drift between its own plans (reported).
double check_fast_backend(Backend& fast, double& across_plans);

}  // namespace plab::test
