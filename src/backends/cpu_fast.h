// cpu: the fast CPU backend (Eigen GEMMs on the engine's thread pool).
//
// What it teaches: prefill is mostly matrix-matrix products — C tokens × D
// features against D × N weights — which a blocked GEMM runs near the
// machine's peak. Decode is a matrix-*vector* product per weight (C = 1): each
// weight is read once per token, so decode speed is set by memory bandwidth.
//
// Versions of the ops it replaces (everything else is cpu-ref's code):
//   matmul    C >= 8: Eigen's blocked, multi-threaded GEMM (x · wᵀ, RowMajor maps)
//             C <  8: the weight rows are split between threads, each runs an
//                     Eigen GEMV on its slice (Eigen does not thread GEMV itself)
//   attention per K/V head: gather the cached K and V of positions 0..p+C-1 into
//             contiguous (n_keys, Dh) matrices; per query head and tile of 32
//             queries: the mask classifies each tile of 32 keys (core/mask.h);
//             empty tiles are skipped and counted, runs of the others get
//             S = Q·Kᵀ·scale (GEMM), partial tiles test each cell, score
//             modifiers apply, softmax with the library exp, O = P·V (GEMM).
//             Under the causal mask the tiles past the diagonal are skipped.
//   swiglu    Eigen's vectorised exp over the whole (C, F) block, split between
//             threads (the reference's scalar strict_expf is ~10x slower here)
// All three reorder sums or round differently (GEMM blocking, vector lanes, FMA), so results differ from
// cpu-ref in the last bits and *can* change with the chunk plan; tests report
// by how much (tolerance rel 1e-5 on logits).
//
// Threads (issue 12). Every op runs on the engine's one ThreadPool
// (core/thread_pool.h: dynamic tasks, spin-then-sleep), never in an OpenMP
// region, and Eigen never starts threads of its own. The *engine* picks the
// thread count of each op from its work (backends/cpu_threads.h: one thread
// per kMinFlopsPerThread FLOPs, at most one per CPU). An op below the
// threshold runs on the calling thread alone — waking a second thread for it
// costs more than it saves, and next to a busy core it can cost a whole
// scheduler time slice. So a 29-token prefill of the stories15M shape
// (largest op ~13 MFLOP) stays on one thread, while 128 tokens and up use
// every core for their GEMMs.
#pragma once

#include <atomic>

#include "backends/cpu_ref.h"
#include "backends/cpu_threads.h"

namespace plab {

class CpuFastBackend final : public CpuRefBackend {
public:
    std::string name() const override { return "cpu"; }
    bool is_reference() const override { return false; }

    void matmul(Buffer out, Buffer x, Buffer w, int m, int n, int k) override;
    void attention(Buffer out, Buffer q, Buffer k_pool, Buffer v_pool,
                   std::span<const int32_t> block_table, const AttentionShape& shape) override;
    void swiglu(Buffer out, Buffer gate, Buffer up, std::size_t n) override;
    AttentionTileCounts attention_tile_counts() const override;
    void reset_attention_tile_counts() override;

private:
    std::atomic<long long> tiles_skipped_{0}, tiles_partial_{0}, tiles_full_{0};
};

}  // namespace plab
