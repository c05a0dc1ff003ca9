#include "backends/cpu_fast/cpu_fast.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu_fast/cpu_attention_pool.h"
#include "backends/cpu_fast/cpu_gemm.h"
#include "backends/cpu_fast/cpu_vector.h"
#include "core/error.h"

namespace plab {
namespace {

// GEMM tasks per thread. More tasks than threads is what makes the split
// dynamic: a thread the OS deschedules delays only the tile it holds, the
// others take the rest.
constexpr int kTasksPerThread = 4;
// At most this many rows of x per GEMM task (a multiple of 6): a 128-token
// chunk is one row task, so each panel of a weight comes from memory once
// (with 96, two tasks read every panel: 128-token prefill ~7% slower).
constexpr int kRowTile = 132;
// A narrow product's rows are split in two (matmul_parts) from this many
// micro-tiles of rows on.
constexpr int kRowSplitTiles = 8;
// SwiGLU's cost in GEMM-FLOP equivalents per value, for the thread threshold:
// measured 0.19 ns a value on one thread, ~20 FLOPs at the ~105 GFLOP/s one
// thread's GEMM runs at (exp is a ~20-op polynomial, then +, /, *).
constexpr double kSwigluFlopsPerValue = 24;
// RMSNorm's: a multiply-add for the sum, two multiplies for the output.
constexpr double kRmsnormFlopsPerValue = 4;
// A value written to the K mirror in GEMM-FLOP equivalents, for the thread
// threshold: each is a store to its own cache line, usually not in cache.
constexpr double kMirrorWriteFlopsPerValue = 16;
// Rows per task of the row-wise ops (rmsnorm, add_rmsnorm).
constexpr int kRowsPerTask = 16;

// f(r) for every row r of `rows`, in tasks of kRowsPerTask rows on `threads`.
template <class F>
void run_rows(int rows, int threads, const F& f) {
    const int tasks = (rows + kRowsPerTask - 1) / kRowsPerTask;
    run_cpu_tasks(threads, tasks, [&](int t) {
        for (int r = t * kRowsPerTask; r < std::min(rows, (t + 1) * kRowsPerTask); ++r) f(r);
    });
}

// Panels per column task of a product: about panels / col_tiles, but a
// multiple of the main tile's panels (an odd run ends in a one-panel tile:
// stories110M's 768-wide products, 3 panels a task, ran 5-10% slower than
// with 4), and of those widths the one whose tasks, shared out whole, leave
// the slowest thread the least to do (ties: the narrower, more tasks).
int panels_per_task(int panels, int col_tiles, int threads, int row_tasks) {
    const int base = (panels + col_tiles - 1) / col_tiles;
    if (threads == 1) return base;
    const int step = cpu_gemm::tile_panels();
    int best = base, best_cost = std::numeric_limits<int>::max();
    for (int pp = (base + step - 1) / step * step; pp <= std::max(2 * base, step); pp += step) {
        const int tasks = row_tasks * ((panels + pp - 1) / pp);
        const int cost = (tasks + threads - 1) / threads * pp;  // panels of the slowest thread
        if (cost < best_cost) {
            best = pp;
            best_cost = cost;
        }
    }
    return best;
}

bool overlaps(const float* a, std::size_t na, const float* b, std::size_t nb) {
    return a < b + nb && b < a + na;
}

}  // namespace

void CpuFastBackend::prepare_weight(Buffer w, int n, int k) {
    PLAB_ASSERT(w.size >= std::size_t(n) * k);
    if (kernels_ == Kernels::fastest) return;  // the library reads w as uploaded
    PackedWeight& p = packed_[w.data];
    p.source_size = std::size_t(n) * k;
    p.panels = cpu_gemm::pack_transposed(w.data, n, k, p.storage);
}

void CpuFastBackend::forget_packed(const float* data, std::size_t n) {
    std::erase_if(packed_,
                  [&](const auto& e) { return overlaps(e.first, e.second.source_size, data, n); });
}

CpuFastBackend::~CpuFastBackend() {
    // Mirrors of pools never released: their storage goes back with the rest.
    while (!mirrors_.empty()) drop_mirror(mirrors_.begin());
}

void CpuFastBackend::drop_mirror(std::map<const float*, cpu_attention::KeyMirror>::iterator it) {
    CpuRefBackend::release(Buffer{it->second.storage(), it->second.floats()});
    mirrors_.erase(it);
}

void CpuFastBackend::prepare_kv_pool(Buffer k_pool, int block_size, int row_size) {
    const std::lock_guard<std::mutex> lock(mirrors_mutex_);
    if (const auto old = mirrors_.find(k_pool.data); old != mirrors_.end()) drop_mirror(old);
    if (!cpu_attention::KeyMirror::fits(block_size) || row_size <= 0 ||
        k_pool.size % (std::size_t(block_size) * row_size) != 0)
        return;  // the transposing path reads this pool
    const Buffer storage = CpuRefBackend::alloc(k_pool.size);
    mirrors_.emplace(
        std::piecewise_construct, std::forward_as_tuple(k_pool.data),
        std::forward_as_tuple(k_pool.data, storage.data, k_pool.size, block_size, row_size));
}

const cpu_attention::KeyMirror* CpuFastBackend::mirror_of(Buffer k_pool, int block_size,
                                                          int row) const {
    const std::lock_guard<std::mutex> lock(mirrors_mutex_);
    const auto found = mirrors_.find(k_pool.data);
    if (found == mirrors_.end()) return nullptr;
    const cpu_attention::KeyMirror& m = found->second;
    return m.block_size() == block_size && m.row() == row && m.floats() == k_pool.size ? &m
                                                                                       : nullptr;
}

void CpuFastBackend::refresh_mirrors(const float* data, std::size_t n) {
    const std::lock_guard<std::mutex> lock(mirrors_mutex_);
    for (auto& [pool, mirror] : mirrors_) {
        if (!overlaps(pool, mirror.floats(), data, n)) continue;
        const float* lo = std::max(pool, data);
        const float* hi = std::min(pool + mirror.floats(), data + n);
        mirror.copy_from_pool(pool, std::size_t(lo - pool), std::size_t(hi - lo));
    }
}

void CpuFastBackend::release(Buffer b) noexcept {
    forget_packed(b.data, b.size);
    {
        const std::lock_guard<std::mutex> lock(mirrors_mutex_);
        for (auto it = mirrors_.begin(); it != mirrors_.end();) {
            const auto next = std::next(it);
            if (overlaps(it->first, it->second.floats(), b.data, b.size)) drop_mirror(it);
            it = next;
        }
    }
    CpuRefBackend::release(b);
}

void CpuFastBackend::upload(Buffer dst, const float* src, std::size_t n) {
    forget_packed(dst.data, n);
    CpuRefBackend::upload(dst, src, n);
    refresh_mirrors(dst.data, n);
}

void CpuFastBackend::fill(Buffer dst, float value) {
    forget_packed(dst.data, dst.size);
    CpuRefBackend::fill(dst, value);
    refresh_mirrors(dst.data, dst.size);
}

void CpuFastBackend::kv_append(Buffer k_pool, Buffer v_pool, Buffer k, Buffer v,
                               std::span<const int32_t> slots, int row_size) {
    CpuRefBackend::kv_append(k_pool, v_pool, k, v, slots, row_size);
    cpu_attention::KeyMirror* found = nullptr;
    {
        const std::lock_guard<std::mutex> lock(mirrors_mutex_);
        const auto it = mirrors_.find(k_pool.data);
        if (it == mirrors_.end()) return;
        if (it->second.row() != row_size || it->second.floats() != k_pool.size) {
            drop_mirror(it);  // a pool used with another geometry: no mirror
            return;
        }
        found = &it->second;  // map nodes stay put; only this pool's owner drops it
    }
    // A slot's row goes to `row_size` cache lines of the mirror: split the
    // slots among the threads the append's copy left awake.
    cpu_attention::KeyMirror& mirror = *found;
    const int n = static_cast<int>(slots.size());
    const int threads = cpu_threads_for_light(kMirrorWriteFlopsPerValue * double(n) * row_size);
    const int tasks = std::min(n, threads);
    const int lanes = cpu_gemm::lanes();  // task edges on whole vectors of slots
    run_cpu_tasks(threads, tasks, [&](int t) {
        const int lo = t == 0 ? 0 : n * t / tasks / lanes * lanes;
        const int hi = t + 1 == tasks ? n : n * (t + 1) / tasks / lanes * lanes;
        mirror.write_slots(k.data + std::size_t(lo) * row_size,
                           slots.subspan(std::size_t(lo), std::size_t(hi - lo)));
    });
}

void CpuFastBackend::matmul(Buffer out, Buffer x, Buffer w, int m, int n, int k) {
    const MatmulPart part{out, w, n};
    matmul_parts(x, m, k, std::span<const MatmulPart>(&part, 1));
}

void CpuFastBackend::matmul_parts(Buffer x, int m, int k, std::span<const MatmulPart> parts) {
    PLAB_ASSERT(x.size >= std::size_t(m) * k);
    if (kernels_ == Kernels::fastest) {
        double work = 0;
        for (const MatmulPart& p : parts) work += product_work(m, p.n, k);
        cpu_library_gemm::products(x, m, k, parts, cpu_threads_for_light(work));
        return;
    }
    // Each weight's panels, packed once by prepare_weight; a matrix that was
    // never prepared (a test's, a tool's) is packed here, for this call.
    std::vector<cpu_gemm::Panels> b(parts.size());
    std::vector<HostVector> scratch;
    double work = 0;
    std::vector<int> first_panel(parts.size() + 1, 0);  // of each part, laid end to end
    for (std::size_t i = 0; i < parts.size(); ++i) {
        const MatmulPart& p = parts[i];
        PLAB_ASSERT(p.out.size >= std::size_t(m) * p.n && p.w.size >= std::size_t(p.n) * k);
        const auto found = packed_.find(p.w.data);
        if (found != packed_.end() && found->second.panels.n == p.n &&
            found->second.panels.k == k) {
            b[i] = found->second.panels;
        } else {
            b[i] = cpu_gemm::pack_transposed(p.w.data, p.n, k, scratch.emplace_back());
        }
        work += product_work(m, p.n, k);
        first_panel[i + 1] =
            first_panel[i] + cpu_gemm::padded_columns(p.n) / cpu_gemm::panel_columns();
    }
    const int panels = first_panel.back();  // of all parts together
    // A product of few rows (a decode step) is set by reading its weights,
    // not by its FLOPs: it is worth a second thread when the weights are.
    // And when the pool's threads are still awake from the op before, a
    // second thread costs no wake-up, so it pays even for a product below
    // that threshold (cpu_threads_for_light): stories15M's decode step, whose
    // layer products (1-4.4 MB of weights, 5-9 MFLOP-equivalents) ran on one
    // thread, 1.19-1.44 -> 1.03-1.30 ms (one sequence; five interleaved
    // harness runs, medians 1.26 -> 1.11); a 64-sequence step's W_o (10.6
    // MFLOP) 82-84 -> 43-48 us, the step 9.10-9.47 -> 8.84-9.12 ms.
    const int threads = cpu_threads_for_light(work);
    // Tasks of (rows of x) x (panels of w). The split changes no
    // bit (each output is one FMA chain over k, cpu_gemm.h), only who computes
    // what. Rows go in whole micro-tiles, so only the last task has a remainder.
    const int tile = cpu_gemm::tile_rows();
    // Column tasks for `row_tasks` row tasks: equal runs of the parts'
    // panels laid end to end (a run may end in one part and go on in the
    // next), so the tasks are the same size whatever the parts' widths; runs
    // of whole main tiles. Returns the panels per run.
    const auto column_run = [&](int row_tasks) {
        const int col_tiles =
            threads == 1 ? 1 : std::clamp(threads * kTasksPerThread / row_tasks, 1, panels);
        return panels_per_task(panels, col_tiles, threads, row_tasks);
    };
    int row_tiles = threads == 1 ? 1 : (m + kRowTile - 1) / kRowTile;
    // A narrow product split by columns alone (stories15M's W_o and W_down,
    // 9 panels: tasks of one panel group) leaves the GEMM no next group to
    // read ahead (cpu_gemm.cpp): every task starts on weights not in cache,
    // and every task reads all of x, half of it from the other core's cache.
    // Split in two by rows as well, each task then holds two groups and half
    // the rows. Harness, cold weights, x just written by both threads,
    // three interleaved runs: 64 x 288 x 768 87-91 -> 80-84 us, 128 x 288 x
    // 768 168-172 -> 154 us, 128 x 288 x 288 70-71 -> 63-64 us, 48 x 288 x
    // 768 68 -> 63-65 us; at 16-32 rows no gain, and a wider product (Q/K/V,
    // 27 panels: two groups a task already) none either.
    if (row_tiles == 1 && threads > 1 && m >= kRowSplitTiles * tile &&
        column_run(1) <= cpu_gemm::tile_panels())
        row_tiles = 2;
    const int rows_per = ((m + row_tiles - 1) / row_tiles + tile - 1) / tile * tile;
    const int row_tasks = (m + rows_per - 1) / rows_per;
    const int panels_per = column_run(row_tasks);
    const int n_columns = (panels + panels_per - 1) / panels_per;
    run_cpu_tasks(threads, row_tasks * n_columns, [&](int t) {
        const int r0 = (t / n_columns) * rows_per, r1 = std::min(m, r0 + rows_per);
        const int g0 = (t % n_columns) * panels_per, g1 = std::min(panels, g0 + panels_per);
        for (std::size_t i = 0; i < parts.size(); ++i) {
            const int p0 = std::max(g0, first_panel[i]) - first_panel[i];
            const int p1 = std::min(g1, first_panel[i + 1]) - first_panel[i];
            if (p0 >= p1) continue;
            cpu_gemm::gemm(parts[i].out.data + std::size_t(p0) * cpu_gemm::panel_columns(),
                           std::size_t(parts[i].n), x.data, std::size_t(k), b[i], r0, r1, p0, p1);
        }
    });
}

void CpuFastBackend::rmsnorm(Buffer out, Buffer x, Buffer weight, int rows, int dim, float eps) {
    run_rows(rows, cpu_threads_for_light(kRmsnormFlopsPerValue * double(rows) * dim), [&](int r) {
        cpu_vector::rmsnorm_row(out.data + std::size_t(r) * dim, x.data + std::size_t(r) * dim,
                                weight.data, dim, eps);
    });
}

void CpuFastBackend::add_rmsnorm(Buffer x, Buffer y, Buffer out, Buffer weight, int rows, int dim,
                                 float eps) {
    // It follows the output or down projection (runtime/forward.cpp): it
    // runs at memory speed, on every thread that product left awake
    // (cpu_threads_for_light).
    const double flops = (1 + kRmsnormFlopsPerValue) * double(rows) * dim;
    run_rows(rows, cpu_threads_for_light(flops), [&](int r) {
        const std::size_t at = std::size_t(r) * dim;
        cpu_vector::add_rmsnorm_row(x.data + at, y.data + at, out.data + at, weight.data, dim, eps);
    });
}

int CpuFastBackend::argmax(Buffer x, std::size_t n) {
    PLAB_ASSERT(n > 0 && x.size >= n);
    const int best = cpu_vector::argmax(x.data, n);
    return best >= 0 ? best : CpuRefBackend::argmax(x, n);  // a NaN: the reference's scan
}

void CpuFastBackend::argmax_rows(Buffer x, int rows, std::size_t n, std::span<int32_t> out) {
    PLAB_ASSERT(n > 0 && rows >= 0 && out.size() >= std::size_t(rows) &&
                x.size >= std::size_t(rows) * n);
    // A batched decode step's greedy tokens: 64 rows of a 32000-word
    // vocabulary are 8 MB of logits, read while the classifier's threads are
    // still awake. A value is one compare and one max per lane.
    const int threads = cpu_threads_for_light(2.0 * double(rows) * double(n));
    run_cpu_tasks(threads, rows, [&](int r) {
        out[std::size_t(r)] = CpuFastBackend::argmax(x.slice(std::size_t(r) * n, n), n);
    });
}

void CpuFastBackend::swiglu(Buffer out, Buffer gate, Buffer up, std::size_t n) {
    constexpr std::size_t kPiece = 16384;  // values per task: large enough to beat the fork cost
    const int pieces = static_cast<int>((n + kPiece - 1) / kPiece);
    // It follows the gate/up product: memory speed, every awake thread.
    run_cpu_tasks(cpu_threads_for_light(kSwigluFlopsPerValue * double(n)), pieces, [&](int p) {
        const std::size_t i0 = std::size_t(p) * kPiece, len = std::min(kPiece, n - i0);
        cpu_vector::silu_mul(out.data + i0, gate.data + i0, up.data + i0, len);
    });
}

}  // namespace plab
