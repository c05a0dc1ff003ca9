// CpuFastBackend's attention (cpu_fast.h): tiles of 48 queries x 32 keys
// over the gathered K/V (or, for decode steps, straight from the pool), the
// mask's verdict per tile, and the calls of a batch side by side. The rest of
// the backend (products, norms, the K mirror's upkeep) is in cpu_fast.cpp.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu_fast/cpu_attention_pool.h"
#include "backends/cpu_fast/cpu_fast.h"
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

// An attention FLOP in GEMM-FLOP equivalents: besides its two products it
// gathers K/V, masks, takes exps and divides. Measured on one thread at 128
// tokens of the stories15M shape: 57 MFLOP in 1.0 ms, ~57 GFLOP/s against
// the GEMM's ~190, so ~3. (Counted as 1, a 128-token prompt's attention —
// 14% of its prefill — stayed on one thread.)
constexpr double kAttentionFlopCost = 3;

// Scratch kept from call to call only grows. resize() to a larger size zeroes
// the new part (value-initialisation): with the scores of a wider query tile
// following a narrower one's, that was ~3% of attention's time at 2048 tokens,
// all of it memset of values about to be overwritten.
template <class T>
void grow(std::vector<T>& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
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

}  // namespace

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

namespace {

// One attention call as each of its tasks reads it, worked out once per call
// on the calling thread: the shapes, the mask's flags, where K and V are read
// from, and the layouts of step 1's panels (attend).
struct AttendJob {
    AttendJob(const AttentionCall& call, Buffer k_cache, Buffer v_cache,
              const cpu_attention::KeyMirror* k_mirror);

    const AttentionShape& s;
    const Mask& mask;                        // s.mask
    Buffer out, q;                           // (C, H, Dh) each
    Buffer k_pool, v_pool;                   // one layer's pools (num_blocks·B, Hkv·Dh)
    std::span<const int32_t> block_table;    // the sequence's
    const cpu_attention::KeyMirror* mirror;  // k_pool's K mirror, or null
    int n_keys, dh, row;                     // keys in the cache, Dh, a pool row (Hkv·Dh)
    bool modifies;      // score modifiers (ALiBi, soft-capping) touch visible cells
    bool ranges_exact;  // each query sees exactly its key range (Mask::ranges_exact)
    int panel;          // the GEMMs' panel width (16 or 32 columns)
    int kpad, dpad;     // keys and Dh, padded to whole panels
    int kstride;        // the gathered Kᵀ's row stride
    bool from_pool;     // K and V read straight from the pool, not gathered
    bool v_in_place;    // P·V reads V where it sits in the pool
    int tiles;          // query tiles per query head
    int key_tiles;      // key tiles of the cache
    // The calling thread's scratch (attend_scratch): each key's row in the
    // pools, the gathered Kᵀ (Hkv, Dh, kstride) and V (Hkv, keys, dpad).
    const std::ptrdiff_t* key_rows = nullptr;
    float* kt = nullptr;
    float* vg = nullptr;
};

AttendJob::AttendJob(const AttentionCall& call, Buffer k_cache, Buffer v_cache,
                     const cpu_attention::KeyMirror* k_mirror)
    : s(call.shape),
      mask(call.shape.mask),
      out(call.out),
      q(call.q),
      k_pool(k_cache),
      v_pool(v_cache),
      block_table(call.block_table),
      mirror(k_mirror),
      n_keys(s.n_keys()),
      dh(s.head_dim),
      row(s.n_kv_heads * s.head_dim) {
    PLAB_ASSERT(std::size_t(n_keys + s.block_size - 1) / s.block_size <= block_table.size());
    modifies = mask.alibi || mask.softcap > 0.0f;
    ranges_exact = mask.ranges_exact();
    PLAB_ASSERT(s.scale > 0.0f);  // exp_and_sum's max·scale is the largest scaled score
    panel = cpu_gemm::panel_columns();
    static_assert(kKeyTile % 32 == 0, "key tiles hold whole GEMM panels (16 or 32 keys)");
    kpad = cpu_gemm::padded_columns(n_keys);
    dpad = cpu_gemm::padded_columns(dh);
    // Kᵀ's row stride: one cache line more than its padded width. With a
    // power-of-two width (2048 keys: 8 KB) all Dh rows of a panel fall in the
    // same few L1 sets and evict each other, and every 6-row tile of Q·Kᵀ
    // reads its panel from L2 again: Q·Kᵀ for 48 queries x 2048 keys took
    // 53-56 us on one thread with the stride 2048, 49-52 with 2064.
    kstride = kpad + kKeyRowSkew;
    // A few queries read K and V straight from the pool instead (decode).
    from_pool = s.n_queries < kPoolQueriesBelow;
    // V read in place: when the call's blocks follow each other in the pool
    // (a cold prompt in a fresh cache gets blocks 0, 1, 2, ...), its keys' V
    // rows already are one matrix there, row stride H_kv·Dh, and P·V reads it
    // where it is: the same values in the same order, no copy. Only for a
    // head_dim of whole vector registers: the GEMM then reads no column past
    // Dh (cpu_gemm.h: a last panel of one register skips its padding half),
    // so never another head's values, nor past the pool's end.
    const std::size_t n_blocks = std::size_t(n_keys + s.block_size - 1) / s.block_size;
    v_in_place = !from_pool && dh % cpu_gemm::lanes() == 0 && block_table[0] >= 0 &&
                 consecutive_run(block_table.first(n_blocks), 0) == n_blocks;
    tiles = (s.n_queries + kQueryTile - 1) / kQueryTile;
    key_tiles = (n_keys + kKeyTile - 1) / kKeyTile;
}

// Points the job at this thread's scratch, sized for it: each key's row in
// the pools, and (unless read from the pool) the panels step 1 gathers into.
// Kept from call to call (resize reuses the capacity): allocated afresh, a
// long prompt's copies would be new pages, faulted in on every layer.
// (Pointers in the job, so the tasks on the pool's threads read this
// thread's copies.)
void attend_scratch(AttendJob& job) {
    thread_local std::vector<float> kt_kept, vg_kept;
    thread_local std::vector<std::ptrdiff_t> key_rows_kept;  // see cpu_attention_pool.h
    key_rows_kept.resize(std::size_t(job.n_keys));
    cpu_attention::key_rows_of(key_rows_kept.data(), job.block_table, job.s.block_size, job.row,
                               job.n_keys);
    if (!job.from_pool) {
        grow(kt_kept, std::size_t(job.s.n_kv_heads) * job.dh * job.kstride);
        if (!job.v_in_place) grow(vg_kept, std::size_t(job.s.n_kv_heads) * job.n_keys * job.dpad);
    }
    job.key_rows = key_rows_kept.data();
    job.kt = kt_kept.data();
    job.vg = vg_kept.data();
}

// Step 1 for KV head g, one task: keys in runs of one vector register's
// width, transposed in registers (cpu_key_mirror.h), or copied from the K
// mirror, which holds them transposed already; V row by row, unless read in
// place. A freed block's keys and the padding past the cache are zeros: the
// mask keeps them out of every score and sum.
void gather_kv_head(const AttendJob& job, int g) {
    const int dh = job.dh, n_keys = job.n_keys, kstride = job.kstride, dpad = job.dpad;
    const int block_size = job.s.block_size;
    float* kg = job.kt + std::size_t(g) * dh * kstride;
    float* vgg = job.v_in_place ? nullptr : job.vg + std::size_t(g) * n_keys * dpad;
    const auto at = [&](int j) -> std::ptrdiff_t {  // key j's offset in a pool, -1: none
        if (j >= n_keys || job.key_rows[std::size_t(j)] < 0) return -1;
        return job.key_rows[std::size_t(j)] + g * dh;
    };
    const float* zeros = cpu_attention::zero_row(dh);
    const int run = cpu_gemm::lanes();
    std::vector<const float*> rows(static_cast<std::size_t>(run), nullptr);
    for (int j0 = 0; j0 < job.kpad; j0 += run) {
        const int32_t physical =
            j0 < n_keys ? job.block_table[std::size_t(j0 / block_size)] : kFreedBlock;
        if (job.mirror != nullptr && physical != kFreedBlock) {
            // Kᵀ is what the mirror holds: copies, no transposes; keys
            // past the cache (the last block's later slots) become 0.
            job.mirror->copy_keys(kg + j0, std::size_t(kstride), physical, j0 % block_size, g * dh,
                                  dh);
            if (j0 + run > n_keys)
                for (int d = 0; d < dh; ++d)
                    std::fill(kg + std::size_t(d) * kstride + n_keys,
                              kg + std::size_t(d) * kstride + j0 + run, 0.0f);
        } else {
            for (int jj = 0; jj < run; ++jj) {
                const std::ptrdiff_t a = at(j0 + jj);
                rows[std::size_t(jj)] = a >= 0 ? job.k_pool.data + a : zeros;
            }
            cpu_attention::transpose_keys(kg + j0, std::size_t(kstride), rows.data(), dh);
        }
        for (int j = j0; vgg != nullptr && j < std::min(n_keys, j0 + run); ++j) {
            const std::ptrdiff_t a = at(j);
            float* vdst = vgg + std::size_t(j) * dpad;
            if (a >= 0)
                std::copy(job.v_pool.data + a, job.v_pool.data + a + dh, vdst);
            else
                std::fill(vdst, vdst + dh, 0.0f);
            std::fill(vdst + dh, vdst + dpad, 0.0f);
        }
    }
}

// KV head g of a pool, read in place (decode: cpu_attention_pool.h).
cpu_attention::PoolHead pool_head_of(const AttendJob& job, Buffer pool, int g) {
    return cpu_attention::PoolHead{pool.data, job.key_rows, g * job.dh, job.dh};
}

// One task of step 2: queries [i0, i0 + rows) of query head h (KV head g),
// at positions qa..qb, against the key tiles the mask lets them see.
struct QueryTile {
    int h = 0, g = 0;
    int i0 = 0, rows = 0;
    int qa = 0, qb = 0;         // the tile's query positions
    const float* q0 = nullptr;  // query i0's head h; rows strided by H·Dh
    int first = 0, last = -1;   // the first and last non-empty key tiles (2a)
    // Scores of keys [klo, klo + width): klo on a tile edge, width whole
    // panels; keys [klo, khi) are in the cache.
    int klo = 0, khi = 0, width = 0;
};

// Task wi's head and queries: tasks run head by head, tile by tile.
QueryTile query_tile_of(const AttendJob& job, int wi) {
    const AttentionShape& s = job.s;
    QueryTile qt;
    qt.h = wi / job.tiles;
    qt.g = kv_head_of(qt.h, s.n_heads, s.n_kv_heads);
    qt.i0 = (wi % job.tiles) * kQueryTile;
    const int i1 = std::min(s.n_queries, qt.i0 + kQueryTile);
    qt.rows = i1 - qt.i0;
    qt.qa = s.pos0 + qt.i0;
    qt.qb = s.pos0 + i1 - 1;
    qt.q0 = job.q.data + (std::size_t(qt.i0) * s.n_heads + qt.h) * job.dh;
    return qt;
}

// Key tiles of one query tile by the mask's verdict (AttentionTileCounts).
struct KeyTileCounts {
    long long skipped = 0, partial = 0, full = 0;
};

// 2a. The mask's verdict on each key tile, into cls; the GEMMs span the
//     non-empty ones (qt.first..qt.last, and the key span they set).
KeyTileCounts classify_key_tiles(const AttendJob& job, QueryTile& qt, TileClass* cls) {
    KeyTileCounts n;
    int first = job.key_tiles, last = -1;
    const Mask::QueryTileBounds bounds = job.mask.query_tile_bounds(qt.qa, qt.qb);
    for (int kt_i = 0; kt_i < job.key_tiles; ++kt_i) {
        const int k0 = kt_i * kKeyTile, k1 = std::min(job.n_keys, k0 + kKeyTile) - 1;
        cls[kt_i] = job.mask.classify_tile(bounds, k0, k1);
        if (cls[kt_i] == TileClass::empty) {
            ++n.skipped;
            continue;
        }
        (cls[kt_i] == TileClass::full ? n.full : n.partial) += 1;
        first = std::min(first, kt_i);
        last = kt_i;
    }
    PLAB_ASSERT(last >= 0);  // every query sees a key (mask_spec.cpp checks it)
    qt.first = first;
    qt.last = last;
    qt.klo = first * kKeyTile;
    qt.khi = std::min(job.n_keys, (last + 1) * kKeyTile);
    qt.width = cpu_gemm::padded_columns(qt.khi - qt.klo);
    return n;
}

// Columns [c0, c1) of every row of the tile's scores to -inf. The GEMMs
// write the runs of non-empty tiles; every other cell (empty tiles between
// runs, keys past the cache) is set to -inf here (only those: a fill of the
// whole row first was 3-5% of attention's time).
void hide_columns(const QueryTile& qt, float* scores, int c0, int c1) {
    for (int r = 0; r < qt.rows && c0 < c1; ++r)
        std::fill(scores + std::size_t(r) * qt.width + c0, scores + std::size_t(r) * qt.width + c1,
                  -INFINITY);
}

// Unscaled scores of keys [k0, k1) (a run of non-empty key tiles) for every
// row of the tile: from the K mirror or the pool (a few queries), else one
// GEMM over the gathered Kᵀ's panels.
void key_run_scores(const AttendJob& job, const QueryTile& qt, const cpu_gemm::Panels& kpanels,
                    int k0, int k1, float* scores) {
    const int dh = job.dh, n_heads = job.s.n_heads;
    if (job.from_pool && job.mirror != nullptr) {
        const cpu_attention::MirrorHead mh{job.mirror, job.block_table.data(), qt.g * dh, dh};
        for (int r = 0; r < qt.rows; ++r)
            cpu_attention::scores_from_mirror(scores + std::size_t(r) * qt.width + (k0 - qt.klo),
                                              qt.q0 + std::size_t(r) * n_heads * dh, k0, k1, mh);
    } else if (job.from_pool) {
        for (int r = 0; r < qt.rows; ++r)
            cpu_attention::scores_from_pool(scores + std::size_t(r) * qt.width + (k0 - qt.klo),
                                            qt.q0 + std::size_t(r) * n_heads * dh, k0, k1,
                                            pool_head_of(job, job.k_pool, qt.g));
    } else {
        cpu_gemm::gemm(scores + (k0 - qt.klo), std::size_t(qt.width), qt.q0,
                       std::size_t(n_heads) * dh, kpanels, 0, qt.rows, k0 / job.panel,
                       cpu_gemm::padded_columns(k1) / job.panel);
    }
}

// Scores of keys [k0, k1) times the scale, for the modifiers, which take
// scaled scores (without them exp_and_sum scales).
void scale_key_run(const AttendJob& job, const QueryTile& qt, int k0, int k1, float* scores) {
    const float scale = job.s.scale;  // a local: the loop below is then vectorised
    for (int r = 0; r < qt.rows; ++r) {
        float* srow = scores + std::size_t(r) * qt.width;
        for (int j = k0 - qt.klo; j < k1 - qt.klo; ++j) srow[j] *= scale;
    }
}

// An interval mask (causal, window, chunked, ...): each row sees exactly its
// key range, so hide the cells of keys [c0, c1) either side of it instead of
// asking the mask cell by cell. The same cells become -inf: no bit changes.
void hide_outside_key_ranges(const AttendJob& job, const QueryTile& qt, int c0, int c1,
                             float* scores) {
    for (int r = 0; r < qt.rows; ++r) {
        float* srow = scores + std::size_t(r) * qt.width - qt.klo;
        const KeyRange kr = job.mask.key_range(qt.qa + r);
        const int lo = std::clamp(kr.lo, c0, c1), hi = std::clamp(kr.hi + 1, lo, c1);
        std::fill(srow + c0, srow + lo, -INFINITY);
        std::fill(srow + hi, srow + c1, -INFINITY);
    }
}

// Keys [c0, c1) of a key tile of class cls, cell by cell: -inf where a
// partial tile's mask hides the key, else the modifiers, if any.
void mask_cells(const AttendJob& job, const QueryTile& qt, TileClass cls, int c0, int c1,
                float* scores) {
    for (int r = 0; r < qt.rows; ++r) {
        float* srow = scores + std::size_t(r) * qt.width;
        for (int j = c0; j < c1; ++j) {
            float& x = srow[j - qt.klo];
            if (cls == TileClass::partial && !job.mask.visible(qt.qa + r, j))
                x = -INFINITY;
            else if (job.modifies)
                x = job.mask.modify_score(x, qt.h, qt.qa + r, j);
        }
    }
}

// The mask and the modifiers on the run of key tiles t..end: full tiles need
// neither test nor change unless there are modifiers.
void mask_key_run(const AttendJob& job, const QueryTile& qt, const TileClass* cls, int t, int end,
                  float* scores) {
    for (int c = t; c <= end; ++c) {
        if (cls[c] == TileClass::full && !job.modifies) continue;
        const int c0 = c * kKeyTile, c1 = std::min(job.n_keys, c0 + kKeyTile);
        if (job.ranges_exact && !job.modifies)
            hide_outside_key_ranges(job, qt, c0, c1, scores);
        else
            mask_cells(job, qt, cls[c], c0, c1, scores);
    }
}

// 2b. S = Q·Kᵀ over each run of consecutive non-empty key tiles; partial
//     tiles ask the mask cell by cell; modifiers touch visible cells, after
//     the scale. Without modifiers the scale waits for the softmax pass (2c):
//     one pass over the scores fewer.
void tile_scores(const AttendJob& job, const QueryTile& qt, const TileClass* cls, float* scores) {
    const cpu_gemm::Panels kpanels{
        job.from_pool ? nullptr : job.kt + std::size_t(qt.g) * job.dh * job.kstride, job.dh,
        job.n_keys, std::size_t(job.panel), std::size_t(job.kstride)};
    int written = 0;  // columns [0, written) are written or hidden
    for (int t = qt.first; t <= qt.last;) {
        if (cls[t] == TileClass::empty) {
            ++t;
            continue;
        }
        int end = t;
        while (end + 1 <= qt.last && cls[end + 1] != TileClass::empty) ++end;
        const int k0 = t * kKeyTile, k1 = std::min(job.n_keys, (end + 1) * kKeyTile);
        hide_columns(qt, scores, written, k0 - qt.klo);  // the empty tiles before this run
        written = k1 - qt.klo;
        key_run_scores(job, qt, kpanels, k0, k1, scores);
        if (job.modifies) scale_key_run(job, qt, k0, k1, scores);
        mask_key_run(job, qt, cls, t, end, scores);
        t = end + 1;
    }
    hide_columns(qt, scores, written, qt.width);  // keys past the cache (and past the last run)
}

// 2c. Softmax numerators e = exp(s·scale - max·scale) in vector lanes
//     aligned to key 0 (the same bits as scaling first); masked cells
//     exactly 0. The denominator sums lane by lane in key order
//     (cpu_vector.h): keys outside [klo, khi) would only add zeros,
//     so every query tile and chunk gives the same sum.
void tile_softmax(const AttendJob& job, const QueryTile& qt, float* scores, float* den) {
    for (int r = 0; r < qt.rows; ++r) {
        float* srow = scores + std::size_t(r) * qt.width;
        den[r] = cpu_vector::exp_and_sum(srow, qt.width, cpu_vector::row_max(srow, qt.width),
                                         job.modifies ? 1.0f : job.s.scale);
    }
}

// 2d. O = E·V, each component one FMA chain over keys in order (the
//     zeros before a query's first visible key leave it at +0), into ot
//     (rows, dpad); tile_outputs divides.
void tile_weighted_values(const AttendJob& job, const QueryTile& qt, const float* scores,
                          float* ot) {
    const int dh = job.dh, dpad = job.dpad, panel = job.panel;
    if (job.from_pool) {
        for (int r = 0; r < qt.rows; ++r)
            cpu_attention::weighted_values_from_pool(ot + std::size_t(r) * dpad,
                                                     scores + std::size_t(r) * qt.width, qt.klo,
                                                     qt.khi, pool_head_of(job, job.v_pool, qt.g));
        return;
    }
    const int n = qt.khi - qt.klo;
    const cpu_gemm::Panels vpanels =
        job.v_in_place
            ? cpu_gemm::Panels{job.v_pool.data + job.key_rows[std::size_t(qt.klo)] + qt.g * dh, n,
                               dh, std::size_t(panel), std::size_t(job.row)}
            : cpu_gemm::Panels{job.vg + (std::size_t(qt.g) * job.n_keys + qt.klo) * dpad, n, dh,
                               std::size_t(panel), std::size_t(dpad)};
    // Columns past Dh are neither computed nor stored (Dh = 48: the
    // second panel's padding half), nor read below.
    cpu_gemm::gemm(ot, std::size_t(dpad), scores, std::size_t(qt.width), vpanels, 0, qt.rows, 0,
                   dpad / panel);
}

// The tile's outputs: each component divided once by its row's denominator,
// like the reference.
void tile_outputs(const AttendJob& job, const QueryTile& qt, const float* ot, const float* den) {
    const int dh = job.dh, dpad = job.dpad;
    for (int r = 0; r < qt.rows; ++r) {
        float* o = job.out.data + (std::size_t(qt.i0 + r) * job.s.n_heads + qt.h) * dh;
        for (int d = 0; d < dh; ++d) o[d] = ot[std::size_t(r) * dpad + d] / den[r];
    }
}

// Step 2 for task wi, on whichever thread claims it, in that thread's
// scratch (kept from task to task, grown as needed). Returns how its key
// tiles were classified.
KeyTileCounts attend_tile(const AttendJob& job, int wi) {
    thread_local std::vector<float> scores, den, ot;
    thread_local std::vector<TileClass> cls;
    grow(cls, static_cast<std::size_t>(job.key_tiles));
    QueryTile qt = query_tile_of(job, wi);
    const KeyTileCounts counts = classify_key_tiles(job, qt, cls.data());  // 2a
    grow(scores, std::size_t(qt.rows) * qt.width);
    tile_scores(job, qt, cls.data(), scores.data());  // 2b
    grow(den, std::size_t(qt.rows));
    tile_softmax(job, qt, scores.data(), den.data());  // 2c
    grow(ot, std::size_t(qt.rows) * job.dpad);
    tile_weighted_values(job, qt, scores.data(), ot.data());  // 2d
    tile_outputs(job, qt, ot.data(), den.data());
    return counts;
}

}  // namespace

void CpuFastBackend::attend(const AttentionCall& call, Buffer k_pool, Buffer v_pool,
                            const cpu_attention::KeyMirror* mirror, bool split) {
    const AttentionShape& s = call.shape;
    AttendJob job(call, k_pool, v_pool, mirror);
    attend_scratch(job);
    // The thread count of this call's own tasks: 1 when it is one task of a
    // batch. The gather runs on as many threads as the attention after it:
    // the pool's threads are awake for it anyway (on one thread, a 128-token
    // prompt's gather left the other waiting ~40 us per layer).
    const int threads = split ? cpu_threads_for(attention_work(s)) : 1;
    // 1. Gather the cached K and V of every position, per KV head, in logical
    //    order and in the layouts the GEMMs stream: Kᵀ (Dh, keys padded to whole
    //    panels) for S = Q·Kᵀ, V (keys, Dh padded) for O = P·V. Key j sits in
    //    column j: tiles and vector lanes are aligned to position 0, whatever
    //    the chunk, which is what keeps a query's sums the same in every plan.
    //    A few queries (decode) skip it: they read K and V from the pool.
    if (!job.from_pool)
        run_cpu_tasks(threads, s.n_kv_heads, [&](int g) { gather_kv_head(job, g); });
    // 2. Per (query head, tile of queries): classify the key tiles, GEMM the
    //    runs of non-empty ones, mask partial tiles, softmax, GEMM with V.
    //    One task per (head, tile), claimed dynamically; scratch per thread.
    run_cpu_tasks(threads, s.n_heads * job.tiles, [&](int wi) {
        const KeyTileCounts n = attend_tile(job, wi);
        tiles_skipped_ += n.skipped;
        tiles_partial_ += n.partial;
        tiles_full_ += n.full;
    });
}

AttentionTileCounts CpuFastBackend::attention_tile_counts() const {
    return {kQueryTile, kKeyTile, tiles_skipped_.load(), tiles_partial_.load(), tiles_full_.load()};
}

void CpuFastBackend::reset_attention_tile_counts() {
    tiles_skipped_ = 0;
    tiles_partial_ = 0;
    tiles_full_ = 0;
}

}  // namespace plab
