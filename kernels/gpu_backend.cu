// GpuBackend: the Backend interface on CUDA kernels (native or emulated).
//
// What it teaches: the host side of GPU programming. Buffers are device
// memory (cudaMalloc); small integer arrays (tokens, KV slots, a block table)
// are kept on the device and copied again only when they change; every CUDA
// call is checked (PLAB_CUDA_CHECK) and every launch goes
// through PLAB_LAUNCH, which names the kernel in any error. The two variants
// share the elementwise kernels and differ where speed and bits trade off:
//
//   // clang-format off
//   op          gpu-ref (bitwise = cpu-ref)      gpu (within 1e-5 of cpu-ref)
//   matmul      matmul_blocked_ref_kernel                matmul_rows_kernel (1-8 rows: decode;
//                                                Q/K/V one launch, gate/up with SwiGLU),
//                                                matmul_blocked_kernel (large products;
//                                                Q/K/V, gate/up: one launch),
//                                                matmul_tiled_kernel (the others)
//   add+norm    add_kernel, rmsnorm_ref_kernel   add_rmsnorm_fast_kernel
//   rope+kv     rope_kernel x2, kv_append_kernel rope_kv_append_kernel
//   attention   attention_ref_kernel             attention_flash_kernel
//   rmsnorm     rmsnorm_ref_kernel               rmsnorm_fast_kernel
//   argmax      argmax_ref_kernel                argmax_fast_kernel
//   // clang-format on
//
// Timing that measures kernels (gpu_host_state.h): the small integer arrays stay on
// the device between ops (ResidentArray) and cross the bus only when they
// change — once per chunk for the KV slots and the block table, which every
// layer shares — asynchronously from pinned host memory; and with
// set_device_op_timing(true) every op is bracketed by two CUDA events
// (OpClock), so `plab bench` can say how much of a prefill's wall time the
// kernels themselves took.
//
// Decode: a step of one or a few rows is latency-bound, so gpu
// gives it kernels of its own (matmul_rows) and fuses the small ops around
// them (rope_kv_append, add_rmsnorm, matmul_swiglu): 8 launches a layer
// where there were 16, with the same bits (tests/gpu/test_decode_kernels.cpp).
//
// A decode step as one CUDA graph (step_graph.h): gpu records the
// launches between begin_step_graph() and end_step_graph() and, from the
// second identical step on, replays them as one graph. While recording, the
// values a decode step changes reach the kernels through device memory (RoPE
// positions, attention's pos0, block tables at a fixed stride), so the
// records repeat. PLAB_GPU_GRAPHS=0 turns graphs off (bench comparisons; 1,
// the default, keeps them; any other value is refused); device op timing
// turns them off too (a graph is timed as one).
//
// Left out: several streams and overlap (every op and every graph runs on the
// default stream, so stream order alone keeps copies and kernels in sequence).
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/kv_layout.h"
#include "gpu_backend.h"
#include "gpu_host_state.h"
#include "kernels.h"
#include "simt/simt_async.h"
#include "step_graph.h"

namespace plab::PLAB_SIMT_NS {
namespace {

// PLAB_GPU_FORM_NAME_FOR_TESTS=native makes the emulated form call itself
// "(native)". Read here and nowhere else: it changes the name only, never
// which kernels run. It exists so that the tests lesson_*.with_native_name
// (tests/lessons/CMakeLists.txt) can rerun the lessons with the name a GPU
// machine prints and prove that no compared output depends on "(emulated)".
bool emulated_named_native_for_tests() {
    const char* v = std::getenv("PLAB_GPU_FORM_NAME_FOR_TESTS");
    return v != nullptr && std::string(v) == "native";
}

// PLAB_GPU_GRAPHS=0: every step launch by launch (to measure what graphs save).
// Unset or 1: graphs on; any other value is refused, naming the two.
bool step_graphs_allowed() {
    const char* v = std::getenv("PLAB_GPU_GRAPHS");
    if (v == nullptr) return true;
    const std::string value(v);
    PLAB_CHECK(value == "0" || value == "1",
               "PLAB_GPU_GRAPHS is '" << value
                                      << "': use 0 (launch every kernel on its own) or 1 (decode "
                                         "steps as CUDA graphs, the default)");
    return value == "1";
}

using gpu_host::OpClock;
using gpu_host::ResidentArray;
using gpu_host::StepGraph;
using gpu_host::TimedOp;

class GpuBackend final : public Backend {
public:
    explicit GpuBackend(GpuVariant variant)
        : variant_(variant), graphs_(variant == GpuVariant::fast && step_graphs_allowed()) {
        PLAB_CUDA_CHECK(
            cudaMalloc(reinterpret_cast<void**>(&tile_counts_), 3 * sizeof(unsigned long long)));
        reset_attention_tile_counts();
    }
    // Destructors and release() are noexcept: a failing cudaFree there cannot be
    // reported, and the next checked call reports a broken device anyway.
    ~GpuBackend() override {
        cancel_step_graph();
        cudaFree(tile_counts_);
        cudaFree(results_);
        cudaFree(partials_);
    }
    GpuBackend(const GpuBackend&) = delete;
    GpuBackend& operator=(const GpuBackend&) = delete;

    std::string name() const override {
        return std::string(variant_ == GpuVariant::reference ? "gpu-ref" : "gpu") +
               (PLAB_SIMT_EMULATED && !emulated_named_native_for_tests() ? " (emulated)"
                                                                         : " (native)");
    }
    bool is_reference() const override { return variant_ == GpuVariant::reference; }

    Buffer alloc(std::size_t n) override {
        float* p = nullptr;
        PLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), std::max<std::size_t>(n, 1) * 4));
        return Buffer{p, n};
    }
    // While a step graph records, a recorded launch may still read the buffer:
    // it is freed once the step has run.
    void release(Buffer b) noexcept override {
        if (graph_.recording()) {
            freed_after_step_.push_back(b.data);
            return;
        }
        cudaFree(b.data);
    }
    void upload(Buffer dst, const float* src, std::size_t n) override {
        PLAB_ASSERT(n <= dst.size);
        graph_.flush();  // a recorded launch may read dst: it runs first
        TimedOp t(clock_, "upload");
        PLAB_CUDA_CHECK(cudaMemcpy(dst.data, src, n * sizeof(float), cudaMemcpyHostToDevice));
    }
    void download(float* dst, Buffer src, std::size_t n) override {
        PLAB_ASSERT(n <= src.size);
        graph_.flush();  // what the host reads must have been computed
        TimedOp t(clock_, "download");
        PLAB_CUDA_CHECK(cudaMemcpy(dst, src.data, n * sizeof(float), cudaMemcpyDeviceToHost));
    }
    void fill(Buffer dst, float value) override {
        const long long n = static_cast<long long>(dst.size);
        TimedOp t(clock_, "fill");
        PLAB_LAUNCH(fill_kernel, blocks_for(n, kThreadsPerBlock), kThreadsPerBlock, 0, dst.data, n,
                    value);
    }
    void synchronize() override {
        graph_.flush();
        PLAB_CUDA_CHECK(cudaDeviceSynchronize());
    }

    void begin_step_graph() override {
        if (graphs_ && !clock_.on && !graph_.recording()) graph_.begin();
    }
    void end_step_graph() override {
        graph_.end();
        free_after_step();
    }
    void cancel_step_graph() noexcept override {
        graph_.cancel();
        free_after_step();
    }
    StepGraphCounts step_graph_counts() const override { return graph_.counts(); }

    void embed(Buffer out, std::span<const int32_t> tokens, Buffer table, int dim) override {
        PLAB_ASSERT(out.size >= tokens.size() * std::size_t(dim));
        for (int32_t t : tokens) PLAB_ASSERT(t >= 0 && std::size_t(t + 1) * dim <= table.size);
        const int32_t* d_tokens = tokens_.upload(tokens, clock_);
        const long long n = static_cast<long long>(tokens.size()) * dim;
        TimedOp t(clock_, "embed");
        PLAB_LAUNCH(embed_kernel, blocks_for(n, kThreadsPerBlock), kThreadsPerBlock, 0, out.data,
                    table.data, d_tokens, static_cast<int>(tokens.size()), dim);
    }

    void rmsnorm(Buffer out, Buffer x, Buffer weight, int rows, int dim, float eps) override {
        PLAB_ASSERT(out.size >= std::size_t(rows) * dim && x.size >= std::size_t(rows) * dim);
        TimedOp t(clock_, "rmsnorm");
        if (variant_ == GpuVariant::reference) {
            PLAB_LAUNCH(rmsnorm_ref_kernel, rows, kNormThreads, 0, out.data, x.data, weight.data,
                        dim, eps);
        } else {
            PLAB_LAUNCH(rmsnorm_fast_kernel, rows, kNormThreads, 0, out.data, x.data, weight.data,
                        dim, eps);
        }
    }

    void matmul(Buffer out, Buffer x, Buffer w, int m, int n, int k) override {
        PLAB_ASSERT(out.size >= std::size_t(m) * n && x.size >= std::size_t(m) * k &&
                    w.size >= std::size_t(n) * k);
        TimedOp t(clock_, "matmul");
        if (variant_ == GpuVariant::reference) {
            launch_matmul_blocked_ref(out.data, x.data, w.data, m, n, k);
        } else if (matmul_rows_pays(m)) {
            launch_matmul_rows_parts(x.data, m, k, MatmulParts::one(out.data, w.data, n));
        } else if (matmul_blocked_pays(m, n)) {
            launch_matmul_blocked(out.data, x.data, w.data, m, n, k);
        } else {
            launch_matmul_tiled(out.data, x.data, w.data, m, n, k);
        }
    }

    // Q, K and V (gate and up) as one launch: at stories110M's 2048 x 768
    // products each part alone gives 192 blocks of 128x64 for 132
    // multiprocessors (a second wave 45% full); together, 2048 x 2304 (H200,
    // 2026-12-04: 31.4 TFLOP/s as one, 26.8 as three). Same bits as three
    // launches: each output is still one k-order chain.
    void matmul_parts(Buffer x, int m, int k, std::span<const MatmulPart> parts) override {
        int n_total = 0;
        for (const MatmulPart& p : parts) n_total += p.n;
        if (variant_ == GpuVariant::reference || parts.size() < 2 ||
            parts.size() > std::size_t(kMaxMatmulParts) ||
            !(matmul_rows_pays(m) || matmul_blocked_pays(m, n_total))) {
            for (const MatmulPart& p : parts) matmul(p.out, x, p.w, m, p.n, k);
            return;
        }
        PLAB_ASSERT(x.size >= std::size_t(m) * k);
        MatmulParts arg;
        for (const MatmulPart& p : parts) {
            PLAB_ASSERT(p.out.size >= std::size_t(m) * p.n && p.w.size >= std::size_t(p.n) * k);
            arg.out[arg.count] = p.out.data;
            arg.w[arg.count] = p.w.data;
            arg.n[arg.count] = p.n;
            ++arg.count;
        }
        TimedOp t(clock_, "matmul");
        if (matmul_rows_pays(m)) {
            launch_matmul_rows_parts(x.data, m, k, arg);
        } else {
            launch_matmul_blocked_parts(x.data, m, k, arg);
        }
    }

    // A decode step's MLP (few rows): gate and up in one matmul_rows launch
    // with SwiGLU as its epilogue; up is not written. Otherwise the default.
    void matmul_swiglu(Buffer out, Buffer up, Buffer x, Buffer w_gate, Buffer w_up, int m, int f,
                       int k) override {
        if (variant_ == GpuVariant::reference || !matmul_rows_pays(m))
            return Backend::matmul_swiglu(out, up, x, w_gate, w_up, m, f, k);
        PLAB_ASSERT(out.size >= std::size_t(m) * f && x.size >= std::size_t(m) * k &&
                    w_gate.size >= std::size_t(f) * k && w_up.size >= std::size_t(f) * k);
        TimedOp t(clock_, "matmul_swiglu");
        launch_matmul_rows_swiglu(out.data, x.data, w_gate.data, w_up.data, m, f, k);
    }

    void rope(Buffer x, int rows, int n_heads, int head_dim, int pos0, Buffer cos,
              Buffer sin) override {
        PLAB_ASSERT(std::size_t(pos0 + rows) * (head_dim / 2) <= cos.size);
        TimedOp t(clock_, "rope");
        launch_rope(x.data, rows, n_heads, head_dim, pos0, nullptr, pos0 + rows - 1, cos.data,
                    sin.data);
    }

    // A batched step: one launch, whatever the positions (the default would
    // launch once per run of consecutive positions, ~once per sequence).
    void rope_rows(Buffer x, int rows, int n_heads, int head_dim,
                   std::span<const int32_t> positions, Buffer cos, Buffer sin) override {
        PLAB_ASSERT(rows >= 0 && positions.size() >= std::size_t(rows));
        if (rows == 0) return;
        const RowPositions p = row_positions(positions.first(std::size_t(rows)), head_dim, cos);
        TimedOp t(clock_, "rope");
        launch_rope(x.data, rows, n_heads, head_dim, p.pos0, p.positions, p.last, cos.data,
                    sin.data);
    }

    // gpu: one launch for RoPE of Q and K and the K/V append (decode's three
    // smallest ops). gpu-ref keeps them apart, as cpu-ref.
    void rope_kv_append(const RopeKvAppend& a) override {
        if (variant_ == GpuVariant::reference || a.rows == 0) return Backend::rope_kv_append(a);
        PLAB_ASSERT(a.positions.size() >= std::size_t(a.rows) &&
                    a.slots.size() >= std::size_t(a.rows));
        const RowPositions p =
            row_positions(a.positions.first(std::size_t(a.rows)), a.head_dim, a.cos);
        RopeKvAppendArgs args;
        args.q = a.q.data;
        args.k = a.k.data;
        args.v = a.v.data;
        args.k_pool = a.k_pool.data;
        args.v_pool = a.v_pool.data;
        args.cos = a.cos.data;
        args.sin = a.sin.data;
        args.rows = a.rows;
        args.n_heads = a.n_heads;
        args.n_kv_heads = a.n_kv_heads;
        args.head_dim = a.head_dim;
        args.pos0 = p.pos0;
        args.positions = p.positions;
        args.slots = upload_slots(a.slots.first(std::size_t(a.rows)), a.n_kv_heads * a.head_dim,
                                  a.k_pool, a.v_pool);
        TimedOp t(clock_, "rope_kv_append");
        launch_rope_kv_append(args, p.last);
    }

    void kv_append(Buffer k_pool, Buffer v_pool, Buffer k, Buffer v, std::span<const int32_t> slots,
                   int row_size) override {
        const int32_t* d_slots = upload_slots(slots, row_size, k_pool, v_pool);
        const long long n = static_cast<long long>(slots.size()) * row_size;
        TimedOp t(clock_, "kv_append");
        PLAB_LAUNCH(kv_append_kernel, blocks_for(n, kThreadsPerBlock), kThreadsPerBlock, 0,
                    k_pool.data, v_pool.data, k.data, v.data, d_slots,
                    static_cast<int>(slots.size()), row_size);
    }

    void attention(Buffer out, Buffer q, Buffer k_pool, Buffer v_pool,
                   std::span<const int32_t> block_table, const AttentionShape& s) override {
        check_attention(block_table, s);
        if (s.n_queries == 0) return;
        attend(out, q, k_pool, v_pool, block_table_.upload(block_table, clock_), s, s.n_keys());
    }

    // A batched step: every sequence's block table in one array, copied once
    // a step (every layer passes the same tables) instead of once per
    // sequence and layer. Each copy also waited for the one before it (the
    // staging area is reused), so per-sequence copies kept the host in step
    // with the device; now the launches queue up. Still one launch per
    // sequence (left out: one kernel over all of them).
    //
    // While a step graph records, the tables sit at a fixed stride (a power of
    // two, so a sequence that gains a block does not move the others' tables)
    // and each call's pos0 is read from device memory: the launches repeat.
    void attention_batch(Buffer k_pool, Buffer v_pool,
                         std::span<const AttentionCall> calls) override {
        const bool recording = graph_.recording();
        std::size_t stride = 0;
        if (recording) {
            std::size_t longest = 1;
            for (const AttentionCall& c : calls) longest = std::max(longest, c.block_table.size());
            stride = std::bit_ceil(longest);
        }
        batch_tables_host_.clear();
        batch_offsets_.clear();
        batch_pos0_.clear();
        for (const AttentionCall& c : calls) {
            check_attention(c.block_table, c.shape);
            batch_offsets_.push_back(batch_tables_host_.size());
            batch_tables_host_.insert(batch_tables_host_.end(), c.block_table.begin(),
                                      c.block_table.end());
            if (recording) batch_tables_host_.resize(batch_offsets_.back() + stride, 0);
            if (recording) batch_pos0_.push_back(c.shape.pos0);
        }
        const int32_t* d_tables = batch_tables_.upload(batch_tables_host_, clock_);
        const int32_t* d_pos0 = recording ? call_pos0_.upload(batch_pos0_, clock_) : nullptr;
        for (std::size_t i = 0; i < calls.size(); ++i) {
            const AttentionCall& c = calls[i];
            if (c.shape.n_queries == 0) continue;
            // A recorded call may see every key its table's stride holds: the
            // key segments it splits over (and so its launches) are those.
            const long long key_capacity =
                recording ? static_cast<long long>(stride) * c.shape.block_size : c.shape.n_keys();
            attend(c.out, c.q, k_pool, v_pool, d_tables + batch_offsets_[i], c.shape, key_capacity,
                   d_pos0 != nullptr ? d_pos0 + i : nullptr);
        }
    }

    void attention_probs(Buffer probs, Buffer scores, Buffer q, Buffer k_pool,
                         std::span<const int32_t> block_table, const AttentionShape& s,
                         int head) override {
        check_attention(block_table, s);
        const std::size_t cells = std::size_t(s.n_queries) * s.n_keys();
        PLAB_ASSERT(head >= 0 && head < s.n_heads && probs.size >= cells);
        PLAB_ASSERT(scores.data == nullptr || scores.size >= cells);
        if (s.n_queries == 0) return;
        const int32_t* d_table = block_table_.upload(block_table, clock_);
        const AttentionShape ds = with_device_mask(s);
        TimedOp t(clock_, "attention_probs");
        launch_attention_probs(probs.data, scores.data, q.data, k_pool.data, d_table, ds, head,
                               scores_bytes(s));
    }

    // The flash kernel counts its tiles on the device; reading them waits for it.
    AttentionTileCounts attention_tile_counts() const override {
        if (variant_ == GpuVariant::reference) return {};
        graph_.flush();
        unsigned long long c[3] = {0, 0, 0};
        PLAB_CUDA_CHECK(cudaMemcpy(c, tile_counts_, sizeof c, cudaMemcpyDeviceToHost));
        return {flash_tiles_.queries, flash_tiles_.keys, static_cast<long long>(c[0]),
                static_cast<long long>(c[1]), static_cast<long long>(c[2])};
    }
    bool times_device_ops() const override { return true; }
    void set_device_op_timing(bool on) override { clock_.on = on; }
    std::vector<DeviceOpTime> take_device_op_times() override { return clock_.take(); }

    void reset_attention_tile_counts() override {
        graph_.flush();
        PLAB_CUDA_CHECK(cudaMemset(tile_counts_, 0, 3 * sizeof(unsigned long long)));
    }

    void swiglu(Buffer out, Buffer gate, Buffer up, std::size_t n) override {
        const long long count = static_cast<long long>(n);
        TimedOp t(clock_, "swiglu");
        PLAB_LAUNCH(swiglu_kernel, blocks_for(count, kThreadsPerBlock), kThreadsPerBlock, 0,
                    out.data, gate.data, up.data, count);
    }

    // gpu: the residual add and the next norm in one launch (rmsnorm_fast's bits).
    void add_rmsnorm(Buffer x, Buffer y, Buffer out, Buffer weight, int rows, int dim,
                     float eps) override {
        if (variant_ == GpuVariant::reference)
            return Backend::add_rmsnorm(x, y, out, weight, rows, dim, eps);
        const std::size_t n = std::size_t(rows) * dim;
        PLAB_ASSERT(x.size >= n && y.size >= n && out.size >= n && weight.size >= std::size_t(dim));
        if (rows == 0) return;
        TimedOp t(clock_, "add_rmsnorm");
        PLAB_LAUNCH(add_rmsnorm_fast_kernel, rows, kNormThreads, 0, x.data, y.data, out.data,
                    weight.data, dim, eps);
    }

    void add(Buffer x, Buffer y, std::size_t n) override {
        const long long count = static_cast<long long>(n);
        TimedOp t(clock_, "add");
        PLAB_LAUNCH(add_kernel, blocks_for(count, kThreadsPerBlock), kThreadsPerBlock, 0, x.data,
                    y.data, count);
    }

    int argmax(Buffer x, std::size_t n) override {
        int32_t best = 0;
        argmax_rows(x, 1, n, std::span<int32_t>(&best, 1));
        return best;
    }

    // One block per row, one launch and one copy back for the whole step.
    void argmax_rows(Buffer x, int rows, std::size_t n, std::span<int32_t> out) override {
        PLAB_ASSERT(rows >= 0 && out.size() >= std::size_t(rows) && n > 0 &&
                    std::size_t(rows) * n <= x.size);
        if (rows == 0) return;
        graph_.flush();  // the copy back below reads what the launches compute
        if (std::size_t(rows) > results_capacity_) {
            PLAB_CUDA_CHECK(cudaFree(results_));  // waits for the device: nothing reads it
            results_ = nullptr;
            results_capacity_ = std::max<std::size_t>(std::size_t(rows), 64);
            PLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&results_),
                                       results_capacity_ * sizeof(int32_t)));
        }
        const long long count = static_cast<long long>(n);
        TimedOp t(clock_, "argmax");
        if (variant_ == GpuVariant::reference) {
            PLAB_LAUNCH(argmax_ref_kernel, rows, 1, 0, results_, x.data, count);
        } else {
            PLAB_LAUNCH(argmax_fast_kernel, rows, kThreadsPerBlock, 0, results_, x.data, count);
        }
        PLAB_CUDA_CHECK(cudaMemcpy(out.data(), results_, std::size_t(rows) * sizeof(int32_t),
                                   cudaMemcpyDeviceToHost));
    }

private:
    // Where a step's rows sit, for RoPE: from pos0 when they are consecutive
    // (one sequence's chunk: no array to copy), else at the positions copied
    // to the device; and the largest, whose cos/sin row must exist.
    struct RowPositions {
        int pos0 = 0;
        const int32_t* positions = nullptr;
        int last = 0;
    };
    // While a step graph records, always the array: a pos0 passed by value
    // would differ every step, and so would the records.
    RowPositions row_positions(std::span<const int32_t> used, int head_dim, Buffer cos) {
        const auto [lowest, highest] = std::minmax_element(used.begin(), used.end());
        PLAB_ASSERT(*lowest >= 0 && std::size_t(*highest + 1) * (head_dim / 2) <= cos.size);
        if (consecutive_run(used, 0) == used.size() && !graph_.recording())
            return {used[0], nullptr, *highest};
        return {0, positions_.upload(used, clock_), *highest};
    }

    // The KV slots on the device, each checked against both pools first.
    const int32_t* upload_slots(std::span<const int32_t> slots, int row_size, Buffer k_pool,
                                Buffer v_pool) {
        for (int32_t slot : slots) {
            PLAB_ASSERT(slot >= 0 && std::size_t(slot + 1) * row_size <= k_pool.size &&
                        std::size_t(slot + 1) * row_size <= v_pool.size);
        }
        return slots_.upload(slots, clock_);
    }

    // One attention call whose block table is on the device already. Past the
    // largest head size flash attention is compiled for (kFlashMaxHeadDim, 256:
    // Gemma's) the fast backend runs the reference kernel, the generic path:
    // any head size, exact softmax, and bits that do not depend on the
    // chunking either (a block per query row, keys in order).
    //
    // pos0_at: s.pos0 in device memory (a step graph's recording). Flash
    // attention reads it there, and its launch carries pos0 0 so that the
    // records repeat; the reference kernel sizes its shared memory by the
    // keys, so it takes pos0 by value (no replay past head_dim 256).
    //
    // A decode call (at most 16 queries) whose keys, up to key_capacity, span
    // several 256-key segments is split: a block per segment and head, then
    // a merge launch (kernels.h, kFlashSegmentKeys), with the bits of one
    // block per head. A decode step of stories110M at 2048 keys: 96 blocks
    // instead of 12.
    void attend(Buffer out, Buffer q, Buffer k_pool, Buffer v_pool, const int32_t* d_table,
                const AttentionShape& s, long long key_capacity, const int32_t* pos0_at = nullptr) {
        AttentionShape ds = with_device_mask(s);
        TimedOp t(clock_, "attention");
        if (variant_ == GpuVariant::reference || s.head_dim > kFlashMaxHeadDim) {
            launch_attention_ref(out.data, q.data, k_pool.data, v_pool.data, d_table, ds,
                                 scores_bytes(s));
        } else {
            if (pos0_at != nullptr) ds.pos0 = 0;
            FlashSplit split;
            float* totals = nullptr;  // a prefill call's running totals past 256 keys
            const int segments = flash_segments(std::max<long long>(key_capacity, s.n_keys()));
            if (s.n_queries <= kFlashDecodeQueries && segments > 1) {
                split.segments = segments;
                split.partials = partials_for(
                    flash_partial_floats(segments, s.n_queries, s.n_heads, s.head_dim));
            } else if (segments > 1) {
                totals = partials_for(flash_total_floats(s.head_dim, s.n_queries, s.n_heads));
            }
            flash_tiles_ =
                launch_attention_flash(out.data, q.data, k_pool.data, v_pool.data, d_table, ds,
                                       tile_counts_, pos0_at, split, totals);
        }
    }

    // Device memory for a split decode call's partial results, or a long
    // prefill call's running totals, grown to a power of two so that it stays
    // where it is (a step graph replays its address) while a sequence grows.
    // Calls run in stream order, so every call reuses it; a recorded launch
    // may still read the old one: it is freed after the step.
    float* partials_for(long long floats) {
        const std::size_t n = static_cast<std::size_t>(floats);
        if (n > partials_capacity_) {
            if (graph_.recording()) {
                freed_after_step_.push_back(partials_);
            } else {
                PLAB_CUDA_CHECK(cudaFree(partials_));  // waits for the device: nothing reads it
            }
            partials_ = nullptr;
            partials_capacity_ = std::bit_ceil(std::max<std::size_t>(n, 4096));
            PLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&partials_),
                                       partials_capacity_ * sizeof(float)));
        }
        return partials_;
    }

    // The mask's data words (documents, custom bits, ALiBi slopes) live in host
    // memory; kernels get a copy of the shape whose mask points to a device copy.
    AttentionShape with_device_mask(const AttentionShape& s) {
        AttentionShape ds = s;
        if (s.mask.data_words == 0) return ds;
        ds.mask.data = mask_words_.upload(
            std::span<const uint32_t>(s.mask.data, static_cast<std::size_t>(s.mask.data_words)),
            clock_);
        return ds;
    }

    static void check_attention(std::span<const int32_t> block_table, const AttentionShape& s) {
        PLAB_ASSERT(s.n_queries >= 0 && s.pos0 >= 0 && s.block_size > 0 && s.n_kv_heads > 0 &&
                    s.n_heads % s.n_kv_heads == 0);
        PLAB_ASSERT(std::size_t(s.n_keys() + s.block_size - 1) / s.block_size <=
                    block_table.size());
    }

    // Dynamic shared memory of the reference attention: one score per position.
    static std::size_t scores_bytes(const AttentionShape& s) {
        const std::size_t bytes = sizeof(float) * static_cast<std::size_t>(s.n_keys());
        PLAB_CHECK(bytes <= 48 * 1024,
                   "gpu-ref attention keeps a row of scores in 48 KiB of shared "
                   "memory: at most 12288 positions, got "
                       << s.n_keys());
        return bytes;
    }

    GpuVariant variant_;
    int32_t* results_ = nullptr;                 // argmax: one index per row, on the device
    std::size_t results_capacity_ = 0;           // rows results_ holds
    unsigned long long* tile_counts_ = nullptr;  // flash attention: skipped, partial, full tiles
    float* partials_ = nullptr;                  // segment results, or running totals
    std::size_t partials_capacity_ = 0;          // floats partials_ holds
    FlashTiles flash_tiles_;  // the tiles of the last flash launch (they depend on Dh and device)
    OpClock clock_;           // device-side op timing, while clock_.on
    // Integer arrays on the device, copied again only when they change:
    ResidentArray<int32_t> tokens_;           // the chunk's token ids (embed)
    ResidentArray<int32_t> slots_;            // the chunk's KV slots (kv_append, every layer)
    ResidentArray<int32_t> block_table_;      // the sequence's block table (attention, every layer)
    ResidentArray<int32_t> positions_;        // a batched step's RoPE positions (rope_rows)
    ResidentArray<int32_t> batch_tables_;     // a batched step's block tables, end to end
    std::vector<int32_t> batch_tables_host_;  // (attention_batch), and where each starts
    std::vector<std::size_t> batch_offsets_;
    std::vector<int32_t> batch_pos0_;     // each call's pos0 (for call_pos0_)
    ResidentArray<uint32_t> mask_words_;  // the mask's data words
    // Step graphs (step_graph.h). Mutable: a const read of device results
    // (attention_tile_counts) runs the pending launches first.
    bool graphs_ = false;
    mutable StepGraph graph_;
    std::vector<float*> freed_after_step_;  // released while recording
    ResidentArray<int32_t> call_pos0_;      // while recording: each attention call's pos0

    void free_after_step() noexcept {
        for (float* p : freed_after_step_) cudaFree(p);
        freed_after_step_.clear();
    }
};

}  // namespace

std::unique_ptr<Backend> make_gpu_backend(GpuVariant variant) {
    return std::make_unique<GpuBackend>(variant);
}

#if !PLAB_SIMT_EMULATED
NativeProbe probe() {
    NativeProbe p;
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    // The error is sticky for the next cudaGetLastError: clear it, so a later
    // checked call reports its own failure, not this one.
    cudaGetLastError();
    if (err == cudaSuccess && n > 0) {
        p.status = NativeProbe::Status::found;
        p.devices = n;
    } else if (err == cudaSuccess || err == cudaErrorNoDevice) {
        p.status = NativeProbe::Status::no_device;
    } else {
        // Anything else (cudaErrorInsufficientDriver when libcuda is missing or
        // older than this runtime needs) is not "no device": say what it was.
        p.status = NativeProbe::Status::cuda_error;
        p.error = std::string(cudaGetErrorName(err)) + " (" + std::to_string(int(err)) +
                  "): " + cudaGetErrorString(err);
        if (err == cudaErrorInsufficientDriver) {
            p.error += " (libcuda.so is missing, or older than this build's CUDA runtime needs)";
        }
    }
    return p;
}

int device_count() {
    return probe().devices;
}

std::string device_name() {
    if (device_count() == 0) return "";
    cudaDeviceProp prop{};
    PLAB_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    return std::string(prop.name) + " (sm_" + std::to_string(prop.major * 10 + prop.minor) + ")";
}
#endif

}  // namespace plab::PLAB_SIMT_NS
