// The Backend interface: the ops a Llama-style forward pass is made of.
//
// What it teaches: the forward pass (src/runtime/forward.cpp) is written once,
// as a sequence of these ops. A backend decides *where* they run (host memory
// or GPU memory) and *how* (plain loops in a fixed order, Eigen GEMMs, CUDA
// kernels). Reference backends (cpu-ref, gpu-ref) promise bitwise identical
// results to each other; fast ones (cpu, gpu) promise a stated tolerance.
//
// Memory: every tensor lives in a Buffer owned by the backend (host memory for
// CPU backends, device memory for GPU backends; the caller never dereferences
// `data`). Small integer arrays — token ids, KV slots, block tables — are
// passed as host spans; a GPU backend copies them to the device itself.
// Every buffer comment gives its shape with the letters of lessons/GLOSSARY.md
// (C chunk, D model dim, H heads, Hkv KV heads, Dh head dim, F hidden dim,
// V vocab, B block size, T tokens). All matrices are row-major.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/attention_math.h"

namespace plab {

// A view of n floats in a backend's memory.
struct Buffer {
    float* data = nullptr;
    std::size_t size = 0;

    // Elements [offset, offset + n) of this buffer (pointer arithmetic only:
    // valid for device pointers too). The caller checks the bounds.
    Buffer slice(std::size_t offset, std::size_t n) const { return Buffer{data + offset, n}; }
};

// What a tiled attention kernel did with its (query tile × key tile) pairs,
// by the mask's classification (core/mask.h classify_tile): empty tiles are
// skipped (never loaded or scored), partial ones test each cell, full ones none.
struct AttentionTileCounts {
    int query_tile = 0;  // queries per tile, counted from the chunk's first query
    int key_tile = 0;    // keys per tile, aligned to absolute positions 0, key_tile, ...
    long long skipped = 0;
    long long partial = 0;
    long long full = 0;
};

// One op as the device ran it, timed by the device itself (GPU backends: a
// CUDA event recorded before and after the op's launches). A host clock around
// a launch would time the launch, not the kernel: launches return at once.
struct DeviceOpTime {
    std::string op;       // the Backend method: "matmul", "attention", "upload", ...
    double start_ms = 0;  // from the start of the first op timed
    double ms = 0;        // device time of this op
};

// One product of a matmul_parts call: out = x · wᵀ, out (M, n), w (n, K).
struct MatmulPart {
    Buffer out;
    Buffer w;
    int n = 0;
};

// One rope_kv_append call: a step's rows of Q and K rotated by their
// positions, and K and V kept in the cache.
struct RopeKvAppend {
    Buffer q, k, v;  // q (rows, H, Dh); k, v (rows, Hkv, Dh)
    int rows = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
    std::span<const int32_t> positions;  // each row's absolute position
    Buffer cos, sin;                     // core/rope.h tables (max_seq_len, Dh/2)
    Buffer k_pool, v_pool;               // one layer's pools (num_blocks·B, Hkv·Dh)
    std::span<const int32_t> slots;      // each row's KV slot
};

// One sequence's share of an attention_batch call (see Backend::attention).
struct AttentionCall {
    Buffer out;
    Buffer q;
    std::span<const int32_t> block_table;
    AttentionShape shape;
};

// Of a backend's step graphs, since it was made: steps run launch by launch
// (direct), steps captured into a graph, steps replayed from one.
struct StepGraphCounts {
    long long direct = 0, captured = 0, replayed = 0;
};

class Backend {
public:
    virtual ~Backend() = default;

    // "cpu-ref", "cpu", "gpu-ref (emulated)", ... exactly as printed to users.
    virtual std::string name() const = 0;
    // True when results are bitwise equal to cpu-ref by construction.
    virtual bool is_reference() const = 0;

    // ---- memory -------------------------------------------------------------
    virtual Buffer alloc(std::size_t n) = 0;
    virtual void release(Buffer b) noexcept = 0;
    virtual void upload(Buffer dst, const float* src, std::size_t n) = 0;
    virtual void download(float* dst, Buffer src, std::size_t n) = 0;
    // Sets every element to `value` (tests poison outputs with NaN first).
    virtual void fill(Buffer dst, float value) = 0;
    // Waits for queued work (a no-op for CPU backends); timing calls it.
    virtual void synchronize() {}

    // ---- ops ------------------------------------------------------------------
    // out[i, :] = table[tokens[i], :]          out (C, D), table (V, D)
    virtual void embed(Buffer out, std::span<const int32_t> tokens, Buffer table, int dim) = 0;
    // out[r, :] = x[r, :] / rms(x[r, :]) * weight     out, x (R, D), weight (D)
    virtual void rmsnorm(Buffer out, Buffer x, Buffer weight, int rows, int dim, float eps) = 0;
    // out = x · wᵀ        out (M, N), x (M, K), w (N, K) — a torch Linear's layout
    virtual void matmul(Buffer out, Buffer x, Buffer w, int m, int n, int k) = 0;
    // Several products of the same x — Q, K and V; gate and up — in one call,
    // so a backend may run them as one product: one pass over x, one parallel
    // region, no thread waiting between them (fused projections).
    // Each part's out equals matmul(out, x, w, m, n, k) bit for bit. The
    // default runs them one after the other.
    virtual void matmul_parts(Buffer x, int m, int k, std::span<const MatmulPart> parts);
    // w holds an (N, K) weight matrix that stays unchanged until it is
    // released, uploaded to or filled again (DeviceModel calls this once per
    // weight after uploading it). A backend may keep a copy in the layout its
    // matmul streams fastest (cpu: column panels, backends/cpu_fast/cpu_gemm.h) —
    // weights repacked once at load time. Results must not depend on it.
    virtual void prepare_weight(Buffer /*w*/, int /*n*/, int /*k*/) {}
    // k_pool is a layer's K pool of the KV cache, in blocks of block_size
    // positions of row_size floats (KvCache calls this once per layer when
    // it makes the pool). A backend may keep a copy of K in the layout its
    // decode attention reads fastest (cpu: transposed block by block,
    // backends/cpu_fast/cpu_key_mirror.h), kept up to date by kv_append, upload and
    // fill. Results must not depend on it.
    virtual void prepare_kv_pool(Buffer /*k_pool*/, int /*block_size*/, int /*row_size*/) {}
    // Rotates each head of row i by position pos0 + i, in place.
    // x (C, nh, Dh); cos, sin (max_seq_len, Dh/2) from core/rope.h
    virtual void rope(Buffer x, int rows, int n_heads, int head_dim, int pos0, Buffer cos,
                      Buffer sin) = 0;
    // Rotates each head of row i by position positions[i], in place: the rows
    // of a batched step (every sequence at its own position) or of packed
    // documents (positions restart at each document) in one call. The
    // default calls rope once per run of consecutive positions.
    virtual void rope_rows(Buffer x, int rows, int n_heads, int head_dim,
                           std::span<const int32_t> positions, Buffer cos, Buffer sin);
    // RoPE of every row of q and k at its position, then row i of k (rotated)
    // and v into slot slots[i] of the pools: what the forward pass does
    // between the Q/K/V product and attention, in one call, so a backend may
    // do it in one pass (gpu: one launch instead of three, which a decode
    // step, a few kilobytes each, feels). Equals rope_rows(q), rope_rows(k),
    // kv_append bit for bit; the default calls the three.
    virtual void rope_kv_append(const RopeKvAppend& a);
    // Writes row i of k and v into slot slots[i] of the pools.
    // k, v (C, Hkv·Dh); k_pool, v_pool (num_blocks·B, Hkv·Dh)
    virtual void kv_append(Buffer k_pool, Buffer v_pool, Buffer k, Buffer v,
                           std::span<const int32_t> slots, int row_size) = 0;
    // Attention of a chunk's queries over the cached positions 0..pos0+C-1
    // under shape.mask (core/mask.h; causal by default): query i sees the
    // keys the mask lets position pos0+i see, with the mask's score modifiers.
    // A backend that cannot obey a mask throws a plab::Error saying so.
    // out, q (C, H, Dh); block_table: physical block of each logical block
    virtual void attention(Buffer out, Buffer q, Buffer k_pool, Buffer v_pool,
                           std::span<const int32_t> block_table, const AttentionShape& shape) = 0;
    // The attention of every sequence of a step over one layer's pools, so a
    // backend may run the sequences side by side: a decode step of 64
    // sequences is 64 small attentions, each too small to split on its own
    // (batched decode). Each call's out equals attention() of it alone, bit
    // for bit. The default runs them one after the other.
    virtual void attention_batch(Buffer k_pool, Buffer v_pool,
                                 std::span<const AttentionCall> calls);
    // A probe for the viewer, one head: the attention probabilities (masked
    // cells exactly 0) and, when `scores` is not empty (data != nullptr), the
    // modified scaled scores the probabilities were computed from (masked
    // cells -inf) — both from this backend, never recomputed beside it.
    // probs, scores (C, pos0 + C)
    virtual void attention_probs(Buffer probs, Buffer scores, Buffer q, Buffer k_pool,
                                 std::span<const int32_t> block_table, const AttentionShape& shape,
                                 int head) = 0;
    // Tile counts of attention() since the last reset, summed over heads and
    // calls; all zero for backends that do not tile (the reference ones).
    virtual AttentionTileCounts attention_tile_counts() const { return {}; }
    virtual void reset_attention_tile_counts() {}
    // out = silu(gate) * up, elementwise over n values (SwiGLU)
    virtual void swiglu(Buffer out, Buffer gate, Buffer up, std::size_t n) = 0;
    // out = silu(x · w_gateᵀ) * (x · w_upᵀ): the MLP's two products and its
    // SwiGLU in one call, so a backend may apply SwiGLU as the products'
    // epilogue (gpu, few rows: one launch instead of two or three). up is
    // scratch (m, f) the default writes x · w_upᵀ into; a fused backend may
    // leave it as it was. out equals matmul_parts then swiglu bit for bit.
    // out, up (M, F); x (M, K); w_gate, w_up (F, K)
    virtual void matmul_swiglu(Buffer out, Buffer up, Buffer x, Buffer w_gate, Buffer w_up, int m,
                               int f, int k);
    // x += y over n values (the residual stream)
    virtual void add(Buffer x, Buffer y, std::size_t n) = 0;
    // x += y, then out = rmsnorm(x) * weight: a sublayer's residual add and
    // the next sublayer's norm, which read and write the same rows, in one
    // call (vLLM's fused_add_rms_norm), so a backend may make one pass over
    // them while they are in cache. Equals add() then rmsnorm() bit for bit;
    // the default calls the two.    x, y, out (R, D), weight (D)
    virtual void add_rmsnorm(Buffer x, Buffer y, Buffer out, Buffer weight, int rows, int dim,
                             float eps);
    // Index of the largest of n values, lowest index on ties (greedy decoding).
    virtual int argmax(Buffer x, std::size_t n) = 0;
    // argmax of each of `rows` rows of n values (a batched step's greedy
    // tokens, one row per sequence), into out[0, rows). The default calls
    // argmax row by row.                    x (rows, n)
    virtual void argmax_rows(Buffer x, int rows, std::size_t n, std::span<int32_t> out);

    // ---- device timing (GPU backends) -----------------------------------------
    // Whether this backend can time its ops on the device (CUDA events).
    virtual bool times_device_ops() const { return false; }
    // While on, every op is bracketed by two events. Off by default: recording
    // events costs a little on every launch.
    virtual void set_device_op_timing(bool /*on*/) {}
    // The ops timed since timing was turned on or last taken, in launch order;
    // waits for the device first. Empty for backends that do not time ops.
    virtual std::vector<DeviceOpTime> take_device_op_times() { return {}; }

    // ---- step graphs (CUDA graphs; kernels/step_graph.h) ----------------------
    // A decode step launches the same kernels with the same arguments every
    // step; only values in device memory change. Between begin_step_graph()
    // and end_step_graph() a backend may record its launches instead of
    // running them, and from the second identical step on run them as one
    // graph. end_step_graph() runs what was recorded (before any copy back);
    // cancel_step_graph() drops it (an op threw). Defaults: nothing.
    virtual void begin_step_graph() {}
    virtual void end_step_graph() {}
    virtual void cancel_step_graph() noexcept {}
    // Steps run launch by launch, captured into a graph, replayed from one.
    virtual StepGraphCounts step_graph_counts() const { return {}; }
};

// Owns one Buffer of a backend; frees it on destruction (RAII).
class DeviceArray {
public:
    DeviceArray() = default;
    DeviceArray(Backend& backend, std::size_t n);
    ~DeviceArray();
    DeviceArray(DeviceArray&& other) noexcept;
    DeviceArray& operator=(DeviceArray&& other) noexcept;
    DeviceArray(const DeviceArray&) = delete;
    DeviceArray& operator=(const DeviceArray&) = delete;

    Buffer buf() const { return buf_; }
    std::size_t size() const { return buf_.size; }

private:
    Backend* backend_ = nullptr;
    Buffer buf_;
};

}  // namespace plab
