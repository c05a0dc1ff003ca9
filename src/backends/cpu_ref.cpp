#include "backends/cpu_ref.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cpu_threads.h"
#include "core/error.h"
#include "core/rope.h"

namespace plab {
namespace {

// Tasks per thread: more tasks than threads, so a thread the OS deschedules
// delays only the rows it holds; the others take the rest (core/thread_pool.h).
constexpr int kTasksPerThread = 4;

// Splits [0, n) into `tasks` contiguous ranges; range t is [lo, hi).
struct Range {
    long long lo, hi;
};
Range task_range(long long n, int tasks, int t) {
    return {n * t / tasks, n * (t + 1) / tasks};
}

// f(range) for [0, n) split into kTasksPerThread ranges per thread (at most
// n), on `threads`: how every threaded op of this backend splits its outputs.
template <class F>
void run_ranges(long long n, int threads, const F& f) {
    const int tasks = static_cast<int>(std::min<long long>(n, threads * kTasksPerThread));
    run_cpu_tasks(threads, tasks, [&](int t) { f(task_range(n, tasks, t)); });
}

}  // namespace

Buffer CpuRefBackend::alloc(std::size_t n) {
    return Buffer{buffers_.take(n), n};
}

void CpuRefBackend::release(Buffer b) noexcept {
    buffers_.give_back(b.data, b.size);
}

void CpuRefBackend::upload(Buffer dst, const float* src, std::size_t n) {
    PLAB_ASSERT(n <= dst.size);
    if (n > 0) std::memcpy(dst.data, src, n * sizeof(float));
}

void CpuRefBackend::download(float* dst, Buffer src, std::size_t n) {
    PLAB_ASSERT(n <= src.size);
    if (n > 0) std::memcpy(dst, src.data, n * sizeof(float));
}

void CpuRefBackend::fill(Buffer dst, float value) {
    for (std::size_t i = 0; i < dst.size; ++i) dst.data[i] = value;
}

void CpuRefBackend::embed(Buffer out, std::span<const int32_t> tokens, Buffer table, int dim) {
    PLAB_ASSERT(out.size >= tokens.size() * std::size_t(dim));
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        PLAB_ASSERT(tokens[i] >= 0 && std::size_t(tokens[i] + 1) * dim <= table.size);
        std::memcpy(out.data + i * dim, table.data + std::size_t(tokens[i]) * dim,
                    sizeof(float) * dim);
    }
}

void CpuRefBackend::rmsnorm(Buffer out, Buffer x, Buffer weight, int rows, int dim, float eps) {
    for (int r = 0; r < rows; ++r) {
        const float* xr = x.data + std::size_t(r) * dim;
        float* o = out.data + std::size_t(r) * dim;
        const float inv = strict_rms_inverse(strict_dot(xr, xr, dim), dim, eps);
        for (int i = 0; i < dim; ++i) o[i] = strict_mul(strict_mul(xr[i], inv), weight.data[i]);
    }
}

// Threads split the *outputs* (ranges of out's m·n elements), never a sum:
// each element is one strict_dot, run whole by whichever thread holds its
// range, so the bits are the same for any thread count or task split.
void CpuRefBackend::matmul(Buffer out, Buffer x, Buffer w, int m, int n, int k) {
    PLAB_ASSERT(out.size >= std::size_t(m) * n && x.size >= std::size_t(m) * k &&
                w.size >= std::size_t(n) * k);
    const long long outputs = static_cast<long long>(m) * n;
    const int threads = cpu_threads_for(kRefMatmulFlopCost * 2.0 * double(outputs) * k);
    run_ranges(outputs, threads, [&](Range r) {
        for (long long idx = r.lo; idx < r.hi; ++idx) {
            const long long i = idx / n, j = idx % n;
            out.data[idx] = strict_dot(x.data + std::size_t(i) * k, w.data + std::size_t(j) * k, k);
        }
    });
}

// Threads split the rows (each head rotated whole by one task): it follows
// the Q/K/V product, so it takes the threads that product left awake
// (cpu_threads_for_light; 6 multiplies and adds per pair).
namespace {

// Row r at position position(r): rope and rope_rows share this loop.
template <class Position>
void rope_rows_at(Buffer x, int rows, int n_heads, int head_dim, const Position& position,
                  Buffer cos, Buffer sin) {
    const int half = head_dim / 2;
    run_ranges(rows, cpu_threads_for_light(6.0 * rows * n_heads * half), [&](Range range) {
        for (int r = int(range.lo); r < int(range.hi); ++r) {
            const std::size_t table_row = std::size_t(position(r)) * half;
            for (int h = 0; h < n_heads; ++h) {
                rope_rotate(x.data + (std::size_t(r) * n_heads + h) * head_dim,
                            cos.data + table_row, sin.data + table_row, half);
            }
        }
    });
}

}  // namespace

void CpuRefBackend::rope(Buffer x, int rows, int n_heads, int head_dim, int pos0, Buffer cos,
                         Buffer sin) {
    PLAB_ASSERT(std::size_t(pos0 + rows) * (head_dim / 2) <= cos.size);
    rope_rows_at(
        x, rows, n_heads, head_dim, [&](int r) { return pos0 + r; }, cos, sin);
}

// A batched step's rows, each at its own position, in one parallel region
// (a 64-sequence decode step had 128 rope calls of one row per layer).
void CpuRefBackend::rope_rows(Buffer x, int rows, int n_heads, int head_dim,
                              std::span<const int32_t> positions, Buffer cos, Buffer sin) {
    PLAB_ASSERT(rows >= 0 && positions.size() >= std::size_t(rows));
    for (int r = 0; r < rows; ++r)  // here, not in a task: a task must not throw
        PLAB_ASSERT(positions[std::size_t(r)] >= 0 &&
                    std::size_t(positions[std::size_t(r)] + 1) * (head_dim / 2) <= cos.size);
    rope_rows_at(
        x, rows, n_heads, head_dim, [&](int r) { return positions[std::size_t(r)]; }, cos, sin);
}

// Threads split the slots: a copy right after the Q/K/V product and its
// RoPE, so it takes the threads those left awake (cpu_threads_for_light; a
// copied float counted as a FLOP).
void CpuRefBackend::kv_append(Buffer k_pool, Buffer v_pool, Buffer k, Buffer v,
                              std::span<const int32_t> slots, int row_size) {
    for (const int32_t slot : slots)  // here, not in a task: a task must not throw
        PLAB_ASSERT(slot >= 0 && (std::size_t(slot) + 1) * row_size <= k_pool.size &&
                    (std::size_t(slot) + 1) * row_size <= v_pool.size);
    const int n = static_cast<int>(slots.size());
    run_ranges(n, cpu_threads_for_light(2.0 * n * row_size), [&](Range r) {
        for (std::size_t i = std::size_t(r.lo); i < std::size_t(r.hi); ++i) {
            const std::size_t dst = std::size_t(slots[i]) * row_size;
            std::memcpy(k_pool.data + dst, k.data + i * row_size, sizeof(float) * row_size);
            std::memcpy(v_pool.data + dst, v.data + i * row_size, sizeof(float) * row_size);
        }
    });
}

// One (query, head) row at a time: scores over the query's key range (masked
// cells -inf), their softmax statistics, then each output component — all
// through core/attention_math.h. Threads split the rows, never a row: each
// row is computed whole, in the spec's order, by one task.
void CpuRefBackend::attention(Buffer out, Buffer q, Buffer k_pool, Buffer v_pool,
                              std::span<const int32_t> block_table, const AttentionShape& s) {
    PLAB_ASSERT(std::size_t(s.n_keys() + s.block_size - 1) / s.block_size <= block_table.size());
    const int rows = s.n_queries * s.n_heads;
    // FLOPs: q·k and p·v, 2 each per dim and pair, counted over the causal
    // pairs like cpu_fast_attention.cpp (an upper bound for masks that see less; only
    // picks the threads).
    const double pairs = double(s.n_queries) * s.pos0 + 0.5 * s.n_queries * (s.n_queries + 1.0);
    const int threads =
        cpu_threads_for(kRefAttentionFlopCost * 4.0 * s.head_dim * s.n_heads * pairs);
    run_ranges(rows, threads, [&](Range r) {
        std::vector<float> scores(static_cast<std::size_t>(s.n_keys()));  // this task's scratch
        for (int row = int(r.lo); row < int(r.hi); ++row) {
            const int i = row / s.n_heads, h = row % s.n_heads;
            const int pos = s.pos0 + i;
            const int g = kv_head_of(h, s.n_heads, s.n_kv_heads);
            const float* qr = q.data + std::size_t(row) * s.head_dim;
            const KeyRange kr = attention_key_range(s, pos);
            for (int j = kr.lo; j <= kr.hi; ++j) {
                scores[j] = attention_score(qr, k_pool.data, block_table.data(), s, h, pos, j);
            }
            const SoftmaxStats st = attention_softmax_stats(scores.data(), s, pos);
            float* o = out.data + std::size_t(row) * s.head_dim;
            for (int d = 0; d < s.head_dim; ++d) {
                o[d] = attention_output(scores.data(), st, v_pool.data, block_table.data(), s, g,
                                        pos, d);
            }
        }
    });
}

void CpuRefBackend::attention_probs(Buffer probs, Buffer scores_out, Buffer q, Buffer k_pool,
                                    std::span<const int32_t> block_table, const AttentionShape& s,
                                    int head) {
    const int n_keys = s.n_keys();
    PLAB_ASSERT(probs.size >= std::size_t(s.n_queries) * n_keys);
    PLAB_ASSERT(scores_out.data == nullptr || scores_out.size >= std::size_t(s.n_queries) * n_keys);
    std::vector<float> scores(static_cast<std::size_t>(n_keys));
    for (int i = 0; i < s.n_queries; ++i) {
        const int pos = s.pos0 + i;
        const float* qr = q.data + (std::size_t(i) * s.n_heads + head) * s.head_dim;
        const KeyRange r = attention_key_range(s, pos);
        for (int j = r.lo; j <= r.hi; ++j) {
            scores[j] = attention_score(qr, k_pool.data, block_table.data(), s, head, pos, j);
        }
        const SoftmaxStats st = attention_softmax_stats(scores.data(), s, pos);
        for (int j = 0; j < n_keys; ++j) {
            const std::size_t cell = std::size_t(i) * n_keys + j;
            probs.data[cell] = attention_probability(scores.data(), st, s, pos, j);
            if (scores_out.data != nullptr)
                scores_out.data[cell] = attention_probe_score(scores.data(), s, pos, j);
        }
    }
}

void CpuRefBackend::swiglu(Buffer out, Buffer gate, Buffer up, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out.data[i] = strict_swiglu(gate.data[i], up.data[i]);
}

void CpuRefBackend::add(Buffer x, Buffer y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) x.data[i] = strict_add(x.data[i], y.data[i]);
}

int CpuRefBackend::argmax(Buffer x, std::size_t n) {
    PLAB_ASSERT(n > 0);
    std::size_t best = 0;
    for (std::size_t i = 1; i < n; ++i) {
        if (x.data[i] > x.data[best]) best = i;
    }
    return static_cast<int>(best);
}

}  // namespace plab
