#include "backends/cpu_fast.h"

#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"

namespace plab {
namespace {

// Row-major maps over our buffers: Eigen's default is column-major.
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapMat = Eigen::Map<RowMat>;
using ConstMapMat = Eigen::Map<const RowMat>;

constexpr int kQueryTile = 32;  // queries per attention tile
constexpr int kKeyTile = 32;    // keys per tile the mask classifies, aligned to position 0

// GEMM tasks per thread. More tasks than threads is what makes the split
// dynamic: a thread the OS deschedules delays only the tile it holds, the
// others take the rest. More tasks also re-pack the shared operand more often
// (each tile packs its rows of x and of w again: 5-13 % more CPU time in all
// at 4 per thread, measured; see kMinFlopsPerThread in cpu_threads.h).
constexpr int kTasksPerThread = 4;
constexpr int kRowTile = 256;  // at most this many rows of x per GEMM tile
constexpr int kColAlign = 16;  // tile widths in w rows: a multiple of the AVX-512 lanes
// Few-row products (batched decode): up to this many rows of x meet each row
// of w in dot products instead of one GEMM (see matmul).
constexpr int kSkinnyRows = 4;
// SwiGLU's cost in GEMM-FLOP equivalents per value, for the same threshold:
// measured 0.19 ns a value on one thread, ~20 FLOPs at the ~105 GFLOP/s one
// thread's GEMM runs at (exp is a ~20-op polynomial, then +, /, *).
constexpr double kSwigluFlopsPerValue = 24;

// Eigen runs a product on OpenMP threads of its own whenever
// omp_get_max_threads() > 1 on the calling thread. Here that would put an
// OpenMP team (static split, spin-waits between its threads: the cause of
// issue 12) inside every pool task, so each Eigen product in this file runs
// under this guard: one thread per product, the pool does the splitting.
class SerialEigen {
public:
    SerialEigen() : saved_(omp_get_max_threads()) {
        if (saved_ != 1) omp_set_num_threads(1);
    }
    ~SerialEigen() {
        if (saved_ != 1) omp_set_num_threads(saved_);
    }
    SerialEigen(const SerialEigen&) = delete;
    SerialEigen& operator=(const SerialEigen&) = delete;

private:
    int saved_;
};

// run_cpu_tasks (cpu_threads.h), each task under SerialEigen.
template <class F>
void run_tasks(int threads, int n_tasks, const F& task) {
    run_cpu_tasks(threads, n_tasks, [&](int i) {
        SerialEigen serial;
        task(i);
    });
}

}  // namespace

void CpuFastBackend::matmul(Buffer out, Buffer x, Buffer w, int m, int n, int k) {
    PLAB_ASSERT(out.size >= std::size_t(m) * n && x.size >= std::size_t(m) * k &&
                w.size >= std::size_t(n) * k);
    ConstMapMat X(x.data, m, k);
    ConstMapMat W(w.data, n, k);
    MapMat O(out.data, m, n);
    const int threads = cpu_threads_for(2.0 * m * n * k);
    // Tiles of (rows of x) x (rows of w), each one single-threaded Eigen
    // product (a GEMV when m is 1). Few rows (decode) split w only: the op is
    // memory-bound and each thread streams its share of the weights.
    const int row_tiles = threads == 1 ? 1 : (m + kRowTile - 1) / kRowTile;
    const int col_tiles = threads == 1 ? 1
                                       : std::clamp(threads * kTasksPerThread / row_tiles, 1,
                                                    (n + kColAlign - 1) / kColAlign);
    const int rows_per = (m + row_tiles - 1) / row_tiles;
    const int cols_per = ((n + col_tiles - 1) / col_tiles + kColAlign - 1) / kColAlign * kColAlign;
    const int cols_tiles = (n + cols_per - 1) / cols_per;  // after rounding the width up
    run_tasks(threads, row_tiles * cols_tiles, [&](int t) {
        const int r0 = (t / cols_tiles) * rows_per, r1 = std::min(m, r0 + rows_per);
        const int c0 = (t % cols_tiles) * cols_per, c1 = std::min(n, c0 + cols_per);
        const int rows = r1 - r0;
        if (rows == 1 || rows > kSkinnyRows) {
            O.block(r0, c0, rows, c1 - c0).noalias() =
                X.middleRows(r0, rows) * W.middleRows(c0, c1 - c0).transpose();
            return;
        }
        // A few rows (a batched decode step): Eigen's GEMM is slow here (2 rows
        // of 288 against the 32000-row classifier: 3.0 ms, against 0.7 ms for
        // one row), so each row of w, read from memory once, meets every row
        // of x in a vectorised dot product (2 rows: 1.2 ms, 4 rows: 1.7 ms).
        // From 8 rows the whole model's step is faster with GEMM again
        // (plab bench --batch on this 2-core machine).
        for (int j = c0; j < c1; ++j) {
            const auto wj = W.row(j);
            for (int r = r0; r < r1; ++r) O(r, j) = X.row(r).dot(wj);
        }
    });
}

void CpuFastBackend::attention(Buffer out, Buffer q, Buffer k_pool, Buffer v_pool,
                               std::span<const int32_t> block_table, const AttentionShape& s) {
    const int n_keys = s.n_keys(), dh = s.head_dim, row = s.n_kv_heads * dh;
    PLAB_ASSERT(std::size_t(n_keys + s.block_size - 1) / s.block_size <= block_table.size());
    const Mask& mask = s.mask;
    const bool modifies = mask.alibi || mask.softcap > 0.0f;
    // 1. Gather K and V of every cached position, per KV head, in logical order.
    //    // (Hkv, n_keys, Dh) each
    std::vector<float> kg(std::size_t(s.n_kv_heads) * n_keys * dh);
    std::vector<float> vg(kg.size());
    for (int j = 0; j < n_keys; ++j) {
        // A freed block's keys are hidden from every query of this chunk: they
        // stay 0 here, and the mask keeps them out of every score and sum.
        if (kv_block_freed(block_table.data(), j, s.block_size)) continue;
        const int slot = kv_slot(block_table.data(), j, s.block_size);
        for (int g = 0; g < s.n_kv_heads; ++g) {
            const float* ks = k_pool.data + std::size_t(slot) * row + std::size_t(g) * dh;
            const float* vs = v_pool.data + std::size_t(slot) * row + std::size_t(g) * dh;
            std::copy(ks, ks + dh, kg.data() + (std::size_t(g) * n_keys + j) * dh);
            std::copy(vs, vs + dh, vg.data() + (std::size_t(g) * n_keys + j) * dh);
        }
    }
    // 2. Per (query head, tile of queries): classify the key tiles, GEMM the
    //    runs of non-empty ones, mask partial tiles, softmax, GEMM with V.
    const int tiles = (s.n_queries + kQueryTile - 1) / kQueryTile;
    const int key_tiles = (n_keys + kKeyTile - 1) / kKeyTile;
    const int work = s.n_heads * tiles;
    // FLOPs: Q·Kᵀ and P·V, 2 each per dim and pair, estimated over the causal
    // pairs (an upper bound for the masks that see less; only picks the threads).
    const double pairs = double(s.n_queries) * s.pos0 + 0.5 * s.n_queries * (s.n_queries + 1.0);
    const int threads = cpu_threads_for(4.0 * dh * s.n_heads * pairs);
    // One task per (head, tile), claimed dynamically; scratch per thread.
    const auto tile_task = [&](int wi) {
        thread_local RowMat scores, ot;
        thread_local std::vector<float> den;
        thread_local std::vector<TileClass> cls;
        thread_local Eigen::Array<float, 1, Eigen::Dynamic> e_row;
        den.resize(kQueryTile);
        cls.resize(static_cast<std::size_t>(key_tiles));
        long long skipped = 0, partial = 0, full = 0;
        const int h = wi / tiles, tile = wi % tiles;
        const int g = kv_head_of(h, s.n_heads, s.n_kv_heads);
        const int i0 = tile * kQueryTile, i1 = std::min(s.n_queries, i0 + kQueryTile);
        const int rows = i1 - i0;
        const int qa = s.pos0 + i0, qb = s.pos0 + i1 - 1;  // the tile's query positions
        // 2a. The mask's verdict on each key tile; the GEMM spans the non-empty ones.
        int first = key_tiles, last = -1;
        for (int kt = 0; kt < key_tiles; ++kt) {
            const int k0 = kt * kKeyTile, k1 = std::min(n_keys, k0 + kKeyTile) - 1;
            cls[kt] = mask.classify_tile(qa, qb, k0, k1);
            if (cls[kt] == TileClass::empty) {
                ++skipped;
                continue;
            }
            (cls[kt] == TileClass::full ? full : partial) += 1;
            first = std::min(first, kt);
            last = kt;
        }
        PLAB_ASSERT(last >= 0);  // every query sees a key (mask_spec.cpp checks it)
        const int klo = first * kKeyTile, khi = std::min(n_keys, (last + 1) * kKeyTile);
        // Q rows of head h are strided by H·Dh in the (C, H, Dh) buffer.
        Eigen::Map<const RowMat, 0, Eigen::OuterStride<>> Q(
            q.data + (std::size_t(i0) * s.n_heads + h) * dh, rows, dh,
            Eigen::OuterStride<>(s.n_heads * dh));
        ConstMapMat K(kg.data() + std::size_t(g) * n_keys * dh, n_keys, dh);
        ConstMapMat V(vg.data() + std::size_t(g) * n_keys * dh, n_keys, dh);
        scores.resize(rows, khi - klo);
        // 2b. One GEMM per run of consecutive non-empty key tiles; empty tiles are -inf.
        for (int kt = first; kt <= last;) {
            const int k0 = kt * kKeyTile;
            if (cls[kt] == TileClass::empty) {
                const int k1 = std::min(n_keys, k0 + kKeyTile);
                scores.middleCols(k0 - klo, k1 - k0).setConstant(-INFINITY);
                ++kt;
                continue;
            }
            int end = kt;
            while (end + 1 <= last && cls[end + 1] != TileClass::empty) ++end;
            const int k1 = std::min(n_keys, (end + 1) * kKeyTile);
            scores.middleCols(k0 - klo, k1 - k0).noalias() =
                (Q * K.middleRows(k0, k1 - k0).transpose()) * s.scale;
            // 2c. Partial tiles ask the mask cell by cell; modifiers touch visible cells.
            for (int t = kt; t <= end; ++t) {
                if (cls[t] == TileClass::full && !modifies) continue;
                const int c0 = t * kKeyTile, c1 = std::min(n_keys, c0 + kKeyTile);
                for (int r = 0; r < rows; ++r) {
                    for (int j = c0; j < c1; ++j) {
                        float& x = scores(r, j - klo);
                        if (cls[t] == TileClass::partial && !mask.visible(qa + r, j))
                            x = -INFINITY;
                        else if (modifies)
                            x = mask.modify_score(x, h, qa + r, j);
                    }
                }
            }
            kt = end + 1;
        }
        // 2d. Softmax with Eigen's vectorised exp; masked cells are exactly 0.
        //     (Two steps: Eigen 3.4 evaluates a select() one scalar at a time, so
        //     an exp inside it would call libm's expf per cell: measured 1.7x
        //     slower prefill at 128 tokens on the shipped model.)
        for (int r = 0; r < rows; ++r) {
            auto srow = scores.row(r).array();
            const float m = srow.maxCoeff();
            e_row = (srow - m).exp();
            srow = (srow == -INFINITY).select(0.0f, e_row);
            den[r] = srow.sum();
        }
        // Unnormalised e·V, divided once per output (like the reference).
        ot.noalias() = scores * V.middleRows(klo, khi - klo);
        for (int r = 0; r < rows; ++r) {
            float* o = out.data + (std::size_t(i0 + r) * s.n_heads + h) * dh;
            for (int d = 0; d < dh; ++d) o[d] = ot(r, d) / den[r];
        }
        tiles_skipped_ += skipped;
        tiles_partial_ += partial;
        tiles_full_ += full;
    };
    run_tasks(threads, work, tile_task);
}

AttentionTileCounts CpuFastBackend::attention_tile_counts() const {
    return {kQueryTile, kKeyTile, tiles_skipped_.load(), tiles_partial_.load(), tiles_full_.load()};
}

void CpuFastBackend::reset_attention_tile_counts() {
    tiles_skipped_ = 0;
    tiles_partial_ = 0;
    tiles_full_ = 0;
}

void CpuFastBackend::swiglu(Buffer out, Buffer gate, Buffer up, std::size_t n) {
    constexpr std::size_t kPiece = 16384;  // values per task: large enough to beat the fork cost
    const int pieces = static_cast<int>((n + kPiece - 1) / kPiece);
    run_tasks(cpu_threads_for(kSwigluFlopsPerValue * double(n)), pieces, [&](int p) {
        const std::size_t i0 = std::size_t(p) * kPiece, len = std::min(kPiece, n - i0);
        Eigen::Map<const Eigen::ArrayXf> g(gate.data + i0, len), u(up.data + i0, len);
        Eigen::Map<Eigen::ArrayXf> o(out.data + i0, len);
        o = g / (1.0f + (-g).exp()) * u;  // silu(g) * u
    });
}

}  // namespace plab
