// cpu-ref: the reference backend, the oracle every other backend is checked against.
//
// What it teaches: each op is a plain loop that calls the shared spec
// functions of src/core (strict_dot, attention_spec.h, rope_rotate, ...), so
// every sum runs in one fixed order with no FMA contraction. Its results do
// not depend on the chunk plan, on the thread count (threads split *outputs*,
// never a sum) or on the machine: gpu-ref must match it bit for bit.
// Threads: matmul and attention split their outputs (ranges of elements, of
// (query, head) rows) into tasks on the engine's pool, with the thread count
// picked from the op's work by the engine's one rule (cpu_threads.h); rope
// and kv_append split their rows and slots among the threads the product
// before them left awake (cpu_threads_for_light).
// Left out on purpose: speed (see cpu_fast.h).
#pragma once

#include "backends/host_buffers.h"
#include "core/backend.h"
#include "core/cpu_threads.h"

namespace plab {

// Its cost per FLOP in GEMM-FLOP equivalents (kRefMatmulFlopCost,
// kRefAttentionFlopCost) is in core/cpu_threads.h, with the rule it feeds.

class CpuRefBackend : public Backend {
public:
    std::string name() const override { return "cpu-ref"; }
    bool is_reference() const override { return true; }

    Buffer alloc(std::size_t n) override;
    void release(Buffer b) noexcept override;
    void upload(Buffer dst, const float* src, std::size_t n) override;
    void download(float* dst, Buffer src, std::size_t n) override;
    void fill(Buffer dst, float value) override;

    void embed(Buffer out, std::span<const int32_t> tokens, Buffer table, int dim) override;
    void rmsnorm(Buffer out, Buffer x, Buffer weight, int rows, int dim, float eps) override;
    void matmul(Buffer out, Buffer x, Buffer w, int m, int n, int k) override;
    void rope(Buffer x, int rows, int n_heads, int head_dim, int pos0, Buffer cos,
              Buffer sin) override;
    void rope_rows(Buffer x, int rows, int n_heads, int head_dim,
                   std::span<const int32_t> positions, Buffer cos, Buffer sin) override;
    void kv_append(Buffer k_pool, Buffer v_pool, Buffer k, Buffer v, std::span<const int32_t> slots,
                   int row_size) override;
    void attention(Buffer out, Buffer q, Buffer k_pool, Buffer v_pool,
                   std::span<const int32_t> block_table, const AttentionShape& shape) override;
    void attention_probs(Buffer probs, Buffer scores, Buffer q, Buffer k_pool,
                         std::span<const int32_t> block_table, const AttentionShape& shape,
                         int head) override;
    void swiglu(Buffer out, Buffer gate, Buffer up, std::size_t n) override;
    void add(Buffer x, Buffer y, std::size_t n) override;
    int argmax(Buffer x, std::size_t n) override;

    // Takes served from released buffers vs new memory (host_buffers.h says why).
    HostBufferCache::Stats buffer_stats() const { return buffers_.stats(); }

private:
    HostBufferCache buffers_;
};

}  // namespace plab
