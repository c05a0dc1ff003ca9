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

}  // namespace plab
