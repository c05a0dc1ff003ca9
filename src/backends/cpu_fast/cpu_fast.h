// cpu: the fast CPU backend (its own chunk-invariant GEMM on the engine's thread pool).
//
// What it teaches: prefill is mostly matrix-matrix products — C tokens × D
// features against D × N weights — which a blocked GEMM runs near the
// machine's peak. Decode is a matrix-*vector* product per weight (C = 1): each
// weight is read once per token, so decode speed is set by memory bandwidth.
//
// Versions of the ops it replaces (everything else is cpu-ref's code):
//   matmul    the chunk-invariant GEMM of cpu_gemm.h: weights repacked once into
//             column panels (prepare_weight), each output one FMA chain over k
//             in vector lanes, tasks of (rows x panels) on the engine's pool.
//   attention per K/V head: gather the cached Kᵀ and V of positions 0..p+C-1,
//             key j in column j; per query head and tile of 48 queries: the
//             mask classifies each tile of 32 keys (core/mask.h); empty tiles
//             are skipped and counted, runs of the others get S = Q·Kᵀ (the
//             same GEMM), partial tiles test each cell, score modifiers
//             apply (to scaled scores); softmax in vector lanes aligned to key 0
//             (cpu_vector.h); O = P·V (the same GEMM) / the row's sum.
//             Under the causal mask the tiles past the diagonal are skipped.
//             A chunk of 1-3 queries (decode) skips the gather and reads K and
//             V straight from the pool instead (cpu_attention_pool.h), K from
//             a copy transposed block by block when the cache keeps one
//             (prepare_kv_pool, cpu_key_mirror.h); the sequences of a
//             batched step run side by side (attention_batch).
//   matmul_parts  Q, K, V (and gate, up) as one set of GEMM tasks: one
//             parallel region instead of three.
//   swiglu    Eigen's vectorised exp, every element in a vector lane (cpu_vector.h)
//   rmsnorm   the sum of squares in vector lanes (cpu_vector.h), rows on the pool
//   add_rmsnorm  the residual add and the next norm in one pass over each
//             row, in vector lanes (the same bits as add, then rmsnorm)
//   argmax    greedy decoding's token in vector lanes (cpu_vector.h), a
//             batched step's rows on the pool (argmax_rows)
// They round differently from cpu-ref (FMA, a polynomial exp, lane-wise sums),
// so results differ from it in the last bits (tolerance rel 1e-5 on logits).
// But they are *chunk-invariant*: a token's every value is computed by the
// same operations in the same order whichever chunk it is in, how many rows
// share its GEMM, or which thread runs it. So every chunk plan gives the same
// bits as full prefill on `cpu`, as on the reference backends (lesson 15:
// "Why fast kernels differ in the last bits").
//
// Threads. Every op runs on the engine's one ThreadPool
// (core/thread_pool.h: dynamic tasks, spin-then-sleep), never in an OpenMP
// region, and no Eigen product runs here (one would start OpenMP threads of
// its own; only Eigen's packet math is used) — except the `fastest` kernel
// set's, one thread each (cpu_library_gemm.h). The *engine* picks the
// thread count of each op from its work (core/cpu_threads.h: one thread
// per kMinFlopsPerThread FLOPs, at most one per CPU). An op below the
// threshold runs on the calling thread alone — waking a second thread for it
// costs more than it saves, and next to a busy core it can cost a whole
// scheduler time slice. So a 29-token prefill of the stories15M shape
// (largest op ~13 MFLOP) stays on one thread, while 128 tokens and up use
// every core for their GEMMs.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <vector>

#include "backends/cpu_fast/cpu_gemm.h"
#include "backends/cpu_fast/cpu_key_mirror.h"
#include "backends/cpu_fast/cpu_library_gemm.h"
#include "backends/cpu_ref.h"
#include "core/cpu_threads.h"
#include "core/kernel_choice.h"

namespace plab {

class CpuFastBackend final : public CpuRefBackend {
public:
    // `fastest`: the products go to the library's kernel for their shape
    // (cpu_library_gemm.h), whose order follows the step; everything else
    // stays as here. Its name says so: "cpu-fastest".
    explicit CpuFastBackend(Kernels kernels = Kernels::invariant) : kernels_(kernels) {}
    ~CpuFastBackend() override;
    std::string name() const override { return backend_name_with("cpu", kernels_); }
    Kernels kernels() const { return kernels_; }
    bool is_reference() const override { return false; }

    void release(Buffer b) noexcept override;
    void upload(Buffer dst, const float* src, std::size_t n) override;
    void fill(Buffer dst, float value) override;
    void matmul(Buffer out, Buffer x, Buffer w, int m, int n, int k) override;
    void matmul_parts(Buffer x, int m, int k, std::span<const MatmulPart> parts) override;
    void prepare_weight(Buffer w, int n, int k) override;
    void prepare_kv_pool(Buffer k_pool, int block_size, int row_size) override;
    void kv_append(Buffer k_pool, Buffer v_pool, Buffer k, Buffer v, std::span<const int32_t> slots,
                   int row_size) override;
    void attention(Buffer out, Buffer q, Buffer k_pool, Buffer v_pool,
                   std::span<const int32_t> block_table, const AttentionShape& shape) override;
    void attention_batch(Buffer k_pool, Buffer v_pool,
                         std::span<const AttentionCall> calls) override;
    void rmsnorm(Buffer out, Buffer x, Buffer weight, int rows, int dim, float eps) override;
    void swiglu(Buffer out, Buffer gate, Buffer up, std::size_t n) override;
    void add_rmsnorm(Buffer x, Buffer y, Buffer out, Buffer weight, int rows, int dim,
                     float eps) override;
    int argmax(Buffer x, std::size_t n) override;
    void argmax_rows(Buffer x, int rows, std::size_t n, std::span<int32_t> out) override;
    AttentionTileCounts attention_tile_counts() const override;
    void reset_attention_tile_counts() override;

private:
    // A weight repacked into column panels, keyed by its buffer's address;
    // dropped when that memory is released or written again.
    struct PackedWeight {
        std::size_t source_size = 0;  // floats of the original (N, K) matrix
        HostVector storage;
        cpu_gemm::Panels panels;
    };
    void forget_packed(const float* data, std::size_t n);
    // Mirrors whose pool overlaps [data, data + n) copy those floats again.
    void refresh_mirrors(const float* data, std::size_t n);
    // The K mirror of this pool, if one is kept for its geometry.
    const cpu_attention::KeyMirror* mirror_of(Buffer k_pool, int block_size, int row) const;
    // One call's attention; split: over the engine's threads, else on the
    // calling thread alone (one task of attention_batch).
    // mirror: k_pool's K mirror, read by a call of few queries, or null.
    void attend(const AttentionCall& call, Buffer k_pool, Buffer v_pool,
                const cpu_attention::KeyMirror* mirror, bool split);

    Kernels kernels_ = Kernels::invariant;
    std::map<const float*, PackedWeight> packed_;
    // K pools' mirrors (backends/cpu_fast/cpu_key_mirror.h), keyed by the pool's
    // address, their storage from this backend's buffers (no fresh pages
    // for a new session's cache); dropped when the pool is released. The
    // map is guarded (sessions on one backend may be made in several
    // threads); a mirror itself is used only by its pool's session.
    void drop_mirror(std::map<const float*, cpu_attention::KeyMirror>::iterator it);
    mutable std::mutex mirrors_mutex_;
    std::map<const float*, cpu_attention::KeyMirror> mirrors_;
    std::atomic<long long> tiles_skipped_{0}, tiles_partial_{0}, tiles_full_{0};
};

}  // namespace plab
