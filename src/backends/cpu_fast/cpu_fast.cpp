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

// Queries per attention tile: a multiple of the GEMM's 6-row register tile
// (cpu_gemm.h). With 32 (5 x 6 + 2) every tile ended in a 2-row remainder
// that cost 80% of a whole 6-row block: 13% of attention's time at 2048
// tokens (its B loads were folded into each row's FMA then; see
// keep_in_register in cpu_gemm.cpp). With 48, stories15M attention at 2048
// tokens: 14.0 -> 12.6 ms a layer (medians, interleaved), 512: ~2% faster,
// 128: ~5% slower (tiles of 48, 48, 32 for 6 heads on 2 threads balance
// worse than four of 32).
constexpr int kQueryTile = 48;
constexpr int kKeyTile = 32;  // keys per tile the mask classifies, aligned to position 0
// Chunks of fewer queries than this (decode steps) read K and V straight from
// the pool (cpu_attention_pool.h); longer ones gather them into panels first,
// which every query of a 48-query tile then shares.
constexpr int kPoolQueriesBelow = 4;
// Floats added to each row of the gathered Kᵀ: one 64-byte line (see attend).
constexpr int kKeyRowSkew = 16;
// Calls of a batch one task runs in a row (attention_batch). No software
// prefetch of their K/V: asking for a head's K/V two heads ahead (every line
// of it) once paid, before K had its mirror and the pools huge pages; since,
// a 64-sequence stories15M step's attention was 5-15% faster without it
// (context ~50: 1.84-1.94 vs 1.99-2.31 ms; ~490: 13.4-13.9 vs 15.9-17.6 ms;
// three interleaved runs each): thousands of prefetches a head queued ahead
// of the loads that needed their lines.
constexpr int kCallsPerTask = 4;

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
// An attention FLOP in GEMM-FLOP equivalents: besides its two products it
// gathers K/V, masks, takes exps and divides. Measured on one thread at 128
// tokens of the stories15M shape: 57 MFLOP in 1.0 ms, ~57 GFLOP/s against
// the GEMM's ~190, so ~3. (Counted as 1, a 128-token prompt's attention —
// 14% of its prefill — stayed on one thread.)
constexpr double kAttentionFlopCost = 3;
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

// Scratch kept from call to call only grows. resize() to a larger size zeroes
// the new part (value-initialisation): with the scores of a wider query tile
// following a narrower one's, that was ~3% of attention's time at 2048 tokens,
// all of it memset of values about to be overwritten.
template <class T>
void grow(std::vector<T>& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
}

// f(r) for every row r of `rows`, in tasks of kRowsPerTask rows on `threads`.
template <class F>
void run_rows(int rows, int threads, const F& f) {
    const int tasks = (rows + kRowsPerTask - 1) / kRowsPerTask;
    run_cpu_tasks(threads, tasks, [&](int t) {
        for (int r = t * kRowsPerTask; r < std::min(rows, (t + 1) * kRowsPerTask); ++r) f(r);
    });
}

// Work of one attention call in GEMM-FLOP equivalents, for the thread count:
// its FLOPs (Q·Kᵀ and P·V, 2 each per dim and pair, over the causal pairs: an
// upper bound for the masks that see less) times kAttentionFlopCost, or
// reading its K and V when that takes longer (one decode query: 4 FLOPs per
// 8 bytes read).
double attention_work(const AttentionShape& s) {
    const double pairs = double(s.n_queries) * s.pos0 + 0.5 * s.n_queries * (s.n_queries + 1.0);
    const double kv_bytes = 2.0 * s.n_keys() * s.n_kv_heads * s.head_dim * sizeof(float);
    return std::max(kAttentionFlopCost * 4.0 * s.head_dim * s.n_heads * pairs,
                    kFlopsPerWeightByte * kv_bytes);
}

int row_of(const AttentionShape& s) {
    return s.n_kv_heads * s.head_dim;
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

void CpuFastBackend::attention(Buffer out, Buffer q, Buffer k_pool, Buffer v_pool,
                               std::span<const int32_t> block_table, const AttentionShape& s) {
    attend({out, q, block_table, s}, k_pool, v_pool,
           mirror_of(k_pool, s.block_size, s.n_kv_heads * s.head_dim), /*split=*/true);
}

void CpuFastBackend::attention_batch(Buffer k_pool, Buffer v_pool,
                                     std::span<const AttentionCall> calls) {
    // A call worth more than one thread (a prefill chunk) runs alone, split
    // over the threads; the rest (decode tokens, short chunks) run side by
    // side, one call per task. Either way a call's bits are the same: the
    // split only decides who computes which tile.
    if (calls.empty()) return;
    // Every call reads the same pool: its mirror is looked up once.
    const cpu_attention::KeyMirror* pool_mirror =
        mirror_of(k_pool, calls[0].shape.block_size, row_of(calls[0].shape));
    const auto mirror_for = [&](const AttentionShape& s) {
        return pool_mirror != nullptr && pool_mirror->block_size() == s.block_size &&
                       pool_mirror->row() == row_of(s)
                   ? pool_mirror
                   : nullptr;
    };
    std::vector<const AttentionCall*> small;
    double small_work = 0;
    for (const AttentionCall& c : calls) {
        const double work = attention_work(c.shape);
        if (calls.size() == 1 || cpu_threads_for(work) > 1) {
            attend(c, k_pool, v_pool, mirror_for(c.shape), /*split=*/true);
        } else {
            small.push_back(&c);
            small_work += work;
        }
    }
    // A task runs a few calls in a row; several tasks per thread still let a
    // thread take over from one the OS has descheduled.
    const int n_small = static_cast<int>(small.size());
    const int tasks = (n_small + kCallsPerTask - 1) / kCallsPerTask;
    run_cpu_tasks(cpu_threads_for(small_work), tasks, [&](int t) {
        const int first = t * kCallsPerTask, end = std::min(n_small, first + kCallsPerTask);
        for (int i = first; i < end; ++i) {
            attend(*small[std::size_t(i)], k_pool, v_pool, mirror_for(small[std::size_t(i)]->shape),
                   /*split=*/false);
        }
    });
}

void CpuFastBackend::attend(const AttentionCall& call, Buffer k_pool, Buffer v_pool,
                            const cpu_attention::KeyMirror* mirror, bool split) {
    const Buffer out = call.out, q = call.q;
    const std::span<const int32_t> block_table = call.block_table;
    const AttentionShape& s = call.shape;
    // The thread count of this call's own tasks: 1 when it is one task of a batch.
    const auto threads_for = [&](double flops) { return split ? cpu_threads_for(flops) : 1; };
    const int n_keys = s.n_keys(), dh = s.head_dim, row = s.n_kv_heads * dh;
    PLAB_ASSERT(std::size_t(n_keys + s.block_size - 1) / s.block_size <= block_table.size());
    const Mask& mask = s.mask;
    const bool modifies = mask.alibi || mask.softcap > 0.0f;
    const bool ranges_exact = mask.ranges_exact();
    PLAB_ASSERT(s.scale > 0.0f);  // exp_and_sum's max·scale is the largest scaled score
    const int panel = cpu_gemm::panel_columns();
    static_assert(kKeyTile % 32 == 0, "key tiles hold whole GEMM panels (16 or 32 keys)");
    // 1. Gather the cached K and V of every position, per KV head, in logical
    //    order and in the layouts the GEMMs stream: Kᵀ (Dh, keys padded to whole
    //    panels) for S = Q·Kᵀ, V (keys, Dh padded) for O = P·V. Key j sits in
    //    column j: tiles and vector lanes are aligned to position 0, whatever
    //    the chunk, which is what keeps a query's sums the same in every plan.
    const int kpad = cpu_gemm::padded_columns(n_keys), dpad = cpu_gemm::padded_columns(dh);
    // Kᵀ's row stride: one cache line more than its padded width. With a
    // power-of-two width (2048 keys: 8 KB) all Dh rows of a panel fall in the
    // same few L1 sets and evict each other, and every 6-row tile of Q·Kᵀ
    // reads its panel from L2 again: Q·Kᵀ for 48 queries x 2048 keys took
    // 53-56 us on one thread with the stride 2048, 49-52 with 2064.
    const int kstride = kpad + kKeyRowSkew;
    // Kept from call to call (resize reuses the capacity): allocated afresh, a
    // long prompt's copies would be new pages, faulted in on every layer.
    // (References, so the tasks on the pool's threads read this thread's copies.)
    thread_local std::vector<float> kt_kept, vg_kept;
    std::vector<float>& kt = kt_kept;
    std::vector<float>& vg = vg_kept;
    // A few queries read K and V straight from the pool instead (decode).
    const bool from_pool = s.n_queries < kPoolQueriesBelow;
    // V read in place: when the call's blocks follow each other in the pool
    // (a cold prompt in a fresh cache gets blocks 0, 1, 2, ...), its keys' V
    // rows already are one matrix there, row stride H_kv·Dh, and P·V reads it
    // where it is: the same values in the same order, no copy. Only for a
    // head_dim of whole vector registers: the GEMM then reads no column past
    // Dh (cpu_gemm.h: a last panel of one register skips its padding half),
    // so never another head's values, nor past the pool's end.
    const std::size_t n_blocks = std::size_t(n_keys + s.block_size - 1) / s.block_size;
    const bool v_in_place = !from_pool && dh % cpu_gemm::lanes() == 0 && block_table[0] >= 0 &&
                            consecutive_run(block_table.first(n_blocks), 0) == n_blocks;
    thread_local std::vector<std::ptrdiff_t> key_rows_kept;  // see cpu_attention_pool.h
    std::vector<std::ptrdiff_t>& key_rows = key_rows_kept;
    key_rows.resize(std::size_t(n_keys));
    cpu_attention::key_rows_of(key_rows.data(), block_table, s.block_size, row, n_keys);
    if (!from_pool) {
        grow(kt, std::size_t(s.n_kv_heads) * dh * kstride);
        if (!v_in_place) grow(vg, std::size_t(s.n_kv_heads) * n_keys * dpad);
    }
    // One task per KV head; keys in runs of one vector register's width,
    // transposed in registers (cpu_key_mirror.h), or copied from the K
    // mirror, which holds them transposed already. A freed block's keys
    // and the padding past the cache are zeros: the mask keeps them out of
    // every score and sum.
    const int run = cpu_gemm::lanes();
    const auto gather_head = [&](int g) {
        float* kg = kt.data() + std::size_t(g) * dh * kstride;
        float* vgg = v_in_place ? nullptr : vg.data() + std::size_t(g) * n_keys * dpad;
        const auto at = [&](int j) -> std::ptrdiff_t {  // key j's offset in a pool, -1: none
            if (j >= n_keys || key_rows[std::size_t(j)] < 0) return -1;
            return key_rows[std::size_t(j)] + g * dh;
        };
        const float* zeros = cpu_attention::zero_row(dh);
        std::vector<const float*> rows(static_cast<std::size_t>(run), nullptr);
        for (int j0 = 0; j0 < kpad; j0 += run) {
            const int32_t physical =
                j0 < n_keys ? block_table[std::size_t(j0 / s.block_size)] : kFreedBlock;
            if (mirror != nullptr && physical != kFreedBlock) {
                // Kᵀ is what the mirror holds: copies, no transposes; keys
                // past the cache (the last block's later slots) become 0.
                mirror->copy_keys(kg + j0, std::size_t(kstride), physical, j0 % s.block_size,
                                  g * dh, dh);
                if (j0 + run > n_keys)
                    for (int d = 0; d < dh; ++d)
                        std::fill(kg + std::size_t(d) * kstride + n_keys,
                                  kg + std::size_t(d) * kstride + j0 + run, 0.0f);
            } else {
                for (int jj = 0; jj < run; ++jj) {
                    const std::ptrdiff_t a = at(j0 + jj);
                    rows[std::size_t(jj)] = a >= 0 ? k_pool.data + a : zeros;
                }
                cpu_attention::transpose_keys(kg + j0, std::size_t(kstride), rows.data(), dh);
            }
            for (int j = j0; vgg != nullptr && j < std::min(n_keys, j0 + run); ++j) {
                const std::ptrdiff_t a = at(j);
                float* vdst = vgg + std::size_t(j) * dpad;
                if (a >= 0)
                    std::copy(v_pool.data + a, v_pool.data + a + dh, vdst);
                else
                    std::fill(vdst, vdst + dh, 0.0f);
                std::fill(vdst + dh, vdst + dpad, 0.0f);
            }
        }
    };
    // The gather runs on as many threads as the attention after it: the
    // pool's threads are awake for it anyway (on one thread, a 128-token
    // prompt's gather left the other waiting ~40 us per layer).
    const int threads = threads_for(attention_work(s));
    if (!from_pool) run_cpu_tasks(threads, s.n_kv_heads, gather_head);
    const auto pool_head = [&](Buffer pool, int g) {
        return cpu_attention::PoolHead{pool.data, key_rows.data(), g * dh, dh};
    };
    // 2. Per (query head, tile of queries): classify the key tiles, GEMM the
    //    runs of non-empty ones, mask partial tiles, softmax, GEMM with V.
    const int tiles = (s.n_queries + kQueryTile - 1) / kQueryTile;
    const int key_tiles = (n_keys + kKeyTile - 1) / kKeyTile;
    const int work = s.n_heads * tiles;
    // One task per (head, tile), claimed dynamically; scratch per thread.
    const auto tile_task = [&](int wi) {
        thread_local std::vector<float> scores, ot;
        thread_local std::vector<TileClass> cls;
        grow(cls, static_cast<std::size_t>(key_tiles));
        long long skipped = 0, partial = 0, full = 0;
        const int h = wi / tiles, tile = wi % tiles;
        const int g = kv_head_of(h, s.n_heads, s.n_kv_heads);
        const int i0 = tile * kQueryTile, i1 = std::min(s.n_queries, i0 + kQueryTile);
        const int rows = i1 - i0;
        const int qa = s.pos0 + i0, qb = s.pos0 + i1 - 1;  // the tile's query positions
        // 2a. The mask's verdict on each key tile; the GEMMs span the non-empty ones.
        int first = key_tiles, last = -1;
        const Mask::QueryTileBounds bounds = mask.query_tile_bounds(qa, qb);
        for (int kt_i = 0; kt_i < key_tiles; ++kt_i) {
            const int k0 = kt_i * kKeyTile, k1 = std::min(n_keys, k0 + kKeyTile) - 1;
            cls[kt_i] = mask.classify_tile(bounds, k0, k1);
            if (cls[kt_i] == TileClass::empty) {
                ++skipped;
                continue;
            }
            (cls[kt_i] == TileClass::full ? full : partial) += 1;
            first = std::min(first, kt_i);
            last = kt_i;
        }
        PLAB_ASSERT(last >= 0);  // every query sees a key (mask_spec.cpp checks it)
        // Scores of keys [klo, klo + width): klo on a tile edge, width whole
        // panels. The GEMMs write the runs of non-empty tiles; every other
        // cell (empty tiles between runs, keys past the cache) is set to -inf
        // by `hide` (only those: a fill of the whole row first was 3-5% of
        // attention's time).
        const int klo = first * kKeyTile, khi = std::min(n_keys, (last + 1) * kKeyTile);
        const int width = cpu_gemm::padded_columns(khi - klo);
        grow(scores, std::size_t(rows) * width);
        const auto hide = [&](int c0, int c1) {  // columns [c0, c1) of every row
            for (int r = 0; r < rows && c0 < c1; ++r)
                std::fill(scores.data() + std::size_t(r) * width + c0,
                          scores.data() + std::size_t(r) * width + c1, -INFINITY);
        };
        int written = 0;  // columns [0, written) are written or hidden
        const float* q0 = q.data + (std::size_t(i0) * s.n_heads + h) * dh;  // rows strided by H·Dh
        const cpu_gemm::Panels kpanels{
            from_pool ? nullptr : kt.data() + std::size_t(g) * dh * kstride, dh, n_keys,
            std::size_t(panel), std::size_t(kstride)};
        // 2b. S = Q·Kᵀ over each run of consecutive non-empty key tiles;
        //     partial tiles ask the mask cell by cell; modifiers touch visible
        //     cells, after the scale. Without modifiers the scale waits for
        //     the softmax pass (2c): one pass over the scores fewer.
        for (int t = first; t <= last;) {
            if (cls[t] == TileClass::empty) {
                ++t;
                continue;
            }
            int end = t;
            while (end + 1 <= last && cls[end + 1] != TileClass::empty) ++end;
            const int k0 = t * kKeyTile, k1 = std::min(n_keys, (end + 1) * kKeyTile);
            hide(written, k0 - klo);  // the empty tiles before this run
            written = k1 - klo;
            if (from_pool && mirror != nullptr) {
                const cpu_attention::MirrorHead mh{mirror, block_table.data(), g * dh, dh};
                for (int r = 0; r < rows; ++r)
                    cpu_attention::scores_from_mirror(
                        scores.data() + std::size_t(r) * width + (k0 - klo),
                        q0 + std::size_t(r) * s.n_heads * dh, k0, k1, mh);
            } else if (from_pool) {
                for (int r = 0; r < rows; ++r)
                    cpu_attention::scores_from_pool(
                        scores.data() + std::size_t(r) * width + (k0 - klo),
                        q0 + std::size_t(r) * s.n_heads * dh, k0, k1, pool_head(k_pool, g));
            } else {
                cpu_gemm::gemm(scores.data() + (k0 - klo), std::size_t(width), q0,
                               std::size_t(s.n_heads) * dh, kpanels, 0, rows, k0 / panel,
                               cpu_gemm::padded_columns(k1) / panel);
            }
            if (modifies) {  // the modifiers take scaled scores; else exp_and_sum scales
                const float scale = s.scale;  // a local: the loop below is then vectorised
                for (int r = 0; r < rows; ++r) {
                    float* srow = scores.data() + std::size_t(r) * width;
                    for (int j = k0 - klo; j < k1 - klo; ++j) srow[j] *= scale;
                }
            }
            for (int c = t; c <= end; ++c) {
                if (cls[c] == TileClass::full && !modifies) continue;
                const int c0 = c * kKeyTile, c1 = std::min(n_keys, c0 + kKeyTile);
                if (ranges_exact && !modifies) {
                    // An interval mask (causal, window, chunked, ...): each row
                    // sees exactly its key range, so hide the cells either side
                    // of it instead of asking the mask cell by cell. The same
                    // cells become -inf: no bit changes.
                    for (int r = 0; r < rows; ++r) {
                        float* srow = scores.data() + std::size_t(r) * width - klo;
                        const KeyRange kr = mask.key_range(qa + r);
                        const int lo = std::clamp(kr.lo, c0, c1),
                                  hi = std::clamp(kr.hi + 1, lo, c1);
                        std::fill(srow + c0, srow + lo, -INFINITY);
                        std::fill(srow + hi, srow + c1, -INFINITY);
                    }
                    continue;
                }
                for (int r = 0; r < rows; ++r) {
                    float* srow = scores.data() + std::size_t(r) * width;
                    for (int j = c0; j < c1; ++j) {
                        float& x = srow[j - klo];
                        if (cls[c] == TileClass::partial && !mask.visible(qa + r, j))
                            x = -INFINITY;
                        else if (modifies)
                            x = mask.modify_score(x, h, qa + r, j);
                    }
                }
            }
            t = end + 1;
        }
        hide(written, width);  // keys past the cache (and past the last run)
        // 2c. Softmax numerators e = exp(s·scale - max·scale) in vector lanes
        //     aligned to key 0 (the same bits as scaling first); masked cells
        //     exactly 0. The denominator sums lane by lane in key order
        //     (cpu_vector.h): keys outside [klo, khi) would only add zeros,
        //     so every query tile and chunk gives the same sum.
        thread_local std::vector<float> den;
        grow(den, std::size_t(rows));
        for (int r = 0; r < rows; ++r) {
            float* srow = scores.data() + std::size_t(r) * width;
            den[r] = cpu_vector::exp_and_sum(srow, width, cpu_vector::row_max(srow, width),
                                             modifies ? 1.0f : s.scale);
        }
        // 2d. O = E·V, each component one FMA chain over keys in order (the
        //     zeros before a query's first visible key leave it at +0), then
        //     divided once per output, like the reference.
        grow(ot, std::size_t(rows) * dpad);
        if (from_pool) {
            for (int r = 0; r < rows; ++r)
                cpu_attention::weighted_values_from_pool(ot.data() + std::size_t(r) * dpad,
                                                         scores.data() + std::size_t(r) * width,
                                                         klo, khi, pool_head(v_pool, g));
        } else {
            const cpu_gemm::Panels vpanels =
                v_in_place ? cpu_gemm::Panels{v_pool.data + key_rows[std::size_t(klo)] + g * dh,
                                              khi - klo, dh, std::size_t(panel), std::size_t(row)}
                           : cpu_gemm::Panels{vg.data() + (std::size_t(g) * n_keys + klo) * dpad,
                                              khi - klo, dh, std::size_t(panel), std::size_t(dpad)};
            // Columns past Dh are neither computed nor stored (Dh = 48: the
            // second panel's padding half), nor read below.
            cpu_gemm::gemm(ot.data(), std::size_t(dpad), scores.data(), std::size_t(width), vpanels,
                           0, rows, 0, dpad / panel);
        }
        for (int r = 0; r < rows; ++r) {
            float* o = out.data + (std::size_t(i0 + r) * s.n_heads + h) * dh;
            for (int d = 0; d < dh; ++d) o[d] = ot[std::size_t(r) * dpad + d] / den[r];
        }
        tiles_skipped_ += skipped;
        tiles_partial_ += partial;
        tiles_full_ += full;
    };
    run_cpu_tasks(threads, work, tile_task);
}

AttentionTileCounts CpuFastBackend::attention_tile_counts() const {
    return {kQueryTile, kKeyTile, tiles_skipped_.load(), tiles_partial_.load(), tiles_full_.load()};
}

void CpuFastBackend::reset_attention_tile_counts() {
    tiles_skipped_ = 0;
    tiles_partial_ = 0;
    tiles_full_ = 0;
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
