// The attention ladder run and measured (kernels/attention_ladder.h): each rung
// on one seeded attention call, its output against cpu-ref, chunked against
// whole, and what the emulated run counted. What `plab bench --attention-ladder`
// prints and tests/gpu/test_attention_ladder.cpp checks.
//
// What it teaches: the steps from a correct kernel to a fast one change how
// many bytes of K and V come from global memory (naive reads K twice, online
// once per query, tiled once per block of queries, flash once per block and
// not at all for tiles the mask empties) while the FLOPs barely move; that is
// why FlashAttention is fast. The counts are the kernels' own, made by the
// SIMT emulator; the emulator's time says nothing about a GPU (it runs the
// threads one after another on a CPU), so only a native run gives times.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attention_ladder_run.h"
#include "core/attention_shape.h"

namespace plab {

// One seeded call: n_queries queries at positions pos0.., heads over kv_heads
// K/V heads of head_dim, a scrambled block table over a pool with spare blocks
// whose unused slots hold NaN (a kernel that reads one fails). Causal mask.
LadderProblem random_ladder_problem(int n_queries, int pos0, int n_heads, int n_kv_heads,
                                    int head_dim, int block_size, std::uint64_t seed);
// The same call's queries from `first` on, `count` of them: a chunk of it.
LadderProblem ladder_chunk(const LadderProblem& whole, int first, int count);
// The rung (emulated) on the call cut at `plan`'s chunks, outputs concatenated:
// what chunk invariance compares with the whole call.
std::vector<float> ladder_chunked(LadderRung rung, const LadderProblem& whole,
                                  const std::vector<int>& plan);
// cpu-ref's attention of the call (the oracle).
std::vector<float> cpu_ref_attention(const LadderProblem& p);

// The tolerance a rung is held to against cpu-ref: 0 for naive (bitwise),
// else |got - want| <= atol + rtol |want| (online rescales: a few ulp).
struct LadderTolerance {
    bool bitwise = false;
    double atol = 0, rtol = 0;
};
LadderTolerance ladder_tolerance(LadderRung rung);

struct LadderRow {
    std::string rung;
    int lines = 0;            // of its kernel file, measured by the caller or 0
    long long kv_bytes = 0;   // K and V bytes read from global memory (emulated count)
    long long flops = 0;      // executed operations (emulated count)
    double max_abs_diff = 0;  // against cpu-ref
    bool bitwise_cpu_ref = false;
    bool within_tolerance = false;
    bool chunk_invariant = false;  // chunks of the call, concatenated, equal the whole bit for bit
    LadderTolerance tolerance;
    double emulated_seconds = 0;           // the emulator's wall time: not a GPU's
    std::optional<double> native_seconds;  // on a CUDA device, when there is one
};

struct LadderReport {
    int n_queries = 0, pos0 = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
    std::vector<int> chunks;  // the chunk plan checked against the whole call
    std::string gpu_form;     // registry's gpu_form_description()
    std::vector<LadderRow> rows;
};

// Runs every rung on random_ladder_problem(...) (prefill of n_queries from 0).
LadderReport run_attention_ladder(int n_queries, int n_heads, int n_kv_heads, int head_dim,
                                  std::uint64_t seed = 1);

}  // namespace plab
