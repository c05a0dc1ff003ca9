// A backend that times every op of another on the host clock, for the
// backends that run on the host (cpu-ref, cpu): `plab bench` prints where a
// prefill's time goes, op by op, as it does for the GPU backends with CUDA
// events (perf/bench.h DeviceOpBreakdown).
//
// What it teaches: a CPU backend finishes each op before it returns, so a
// clock read before and after the call is the op's own time (on a GPU the
// same two reads would time the launch: kernels run after the call returns,
// which is why gpu_backend.cu records events on the device instead). It also
// shows where a short prompt's time goes that its FLOPs do not count: at 128
// tokens of stories15M the classifier reads 37 MB of weights for one row of
// logits, and the small ops (norms, RoPE, the KV append) are a larger share
// than at 2048.
//
// Every Backend method is forwarded to the wrapped backend (its overrides,
// not Backend's defaults, so the ops run exactly as they would unwrapped);
// a wrapped backend it does not own must outlive it. Ops are named by the Backend
// method the forward pass called: "matmul_parts" is the fused Q/K/V (or
// gate/up) product, "add_rmsnorm" the residual add with the next norm.
// Two composite calls are the exception: rope_kv_append and matmul_swiglu
// are left to Backend's defaults here, which split them into the ops they
// are made of (rope, kv_append; matmul_parts, swiglu), each forwarded and
// timed on its own. The host backends do not fuse them, so the bits are the
// same, and the table keeps RoPE and the KV append as lines of their own.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"

namespace plab {

class HostTimedBackend final : public Backend {
public:
    explicit HostTimedBackend(Backend& inner) : inner_(inner) {}
    // Owns the backend it times (a LoadedModel built over it, perf/bench.cpp).
    explicit HostTimedBackend(std::unique_ptr<Backend> inner)
        : owned_(std::move(inner)), inner_(*owned_) {}

    std::string name() const override { return inner_.name(); }
    bool is_reference() const override { return inner_.is_reference(); }

    Buffer alloc(std::size_t n) override { return inner_.alloc(n); }
    void release(Buffer b) noexcept override { inner_.release(b); }
    void upload(Buffer dst, const float* src, std::size_t n) override;
    void download(float* dst, Buffer src, std::size_t n) override;
    void fill(Buffer dst, float value) override;
    void synchronize() override { inner_.synchronize(); }

    void embed(Buffer out, std::span<const int32_t> tokens, Buffer table, int dim) override;
    void rmsnorm(Buffer out, Buffer x, Buffer weight, int rows, int dim, float eps) override;
    void matmul(Buffer out, Buffer x, Buffer w, int m, int n, int k) override;
    void matmul_parts(Buffer x, int m, int k, std::span<const MatmulPart> parts) override;
    void prepare_weight(Buffer w, int n, int k) override { inner_.prepare_weight(w, n, k); }
    void prepare_kv_pool(Buffer k_pool, int block_size, int row_size) override {
        inner_.prepare_kv_pool(k_pool, block_size, row_size);
    }
    void rope(Buffer x, int rows, int n_heads, int head_dim, int pos0, Buffer cos,
              Buffer sin) override;
    void rope_rows(Buffer x, int rows, int n_heads, int head_dim,
                   std::span<const int32_t> positions, Buffer cos, Buffer sin) override;
    void kv_append(Buffer k_pool, Buffer v_pool, Buffer k, Buffer v, std::span<const int32_t> slots,
                   int row_size) override;
    void attention(Buffer out, Buffer q, Buffer k_pool, Buffer v_pool,
                   std::span<const int32_t> block_table, const AttentionShape& shape) override;
    void attention_batch(Buffer k_pool, Buffer v_pool,
                         std::span<const AttentionCall> calls) override;
    void attention_probs(Buffer probs, Buffer scores, Buffer q, Buffer k_pool,
                         std::span<const int32_t> block_table, const AttentionShape& shape,
                         int head) override;
    AttentionTileCounts attention_tile_counts() const override {
        return inner_.attention_tile_counts();
    }
    void reset_attention_tile_counts() override { inner_.reset_attention_tile_counts(); }
    void swiglu(Buffer out, Buffer gate, Buffer up, std::size_t n) override;
    void add(Buffer x, Buffer y, std::size_t n) override;
    void add_rmsnorm(Buffer x, Buffer y, Buffer out, Buffer weight, int rows, int dim,
                     float eps) override;
    int argmax(Buffer x, std::size_t n) override;
    void argmax_rows(Buffer x, int rows, std::size_t n, std::span<int32_t> out) override;

    // The host clock times every op (Backend's "device ops": for these
    // backends the device is the host).
    bool times_device_ops() const override { return true; }
    void set_device_op_timing(bool on) override { on_ = on; }
    std::vector<DeviceOpTime> take_device_op_times() override;

private:
    using Clock = std::chrono::steady_clock;
    // Runs f, timed as op `name` while timing is on.
    template <class F>
    auto timed(const char* name, const F& f);

    std::unique_ptr<Backend> owned_;  // null when the wrapped backend is the caller's
    Backend& inner_;
    bool on_ = false;
    Clock::time_point first_{};  // start of the first op since the last take
    std::vector<DeviceOpTime> ops_;
};

}  // namespace plab
