// attention_flash_kernel: the gpu backend's attention, prefill tiles and decode
// segments (the kernel; attention_flash.cu launches it, attention_flash_merge.cu
// merges a split decode call's segments). Included by those two files only.
// Tiled masked attention with online softmax over the paged KV cache (the gpu backend).
//
// What it teaches: attention without ever storing a row of scores. A block
// handles a tile of 64 queries of one head. It walks the keys in tiles of 64:
// the block loads a K tile and a V tile into shared memory through the block
// table (PagedAttention, Kwon et al. 2023), then folds each tile into a
// running result per query:
//
//   m' = max(m, max_j s_j)                    running max
//   c  = exp(m - m')                          rescales what was summed so far
//   l' = l·c + sum_j exp(s_j - m')            running denominator
//   a' = a·c + sum_j exp(s_j - m') v_j        running numerator (Dh values)
//
// and divides a by l once at the end. This is the online softmax of Milakov &
// Gimelshein 2018, as used by FlashAttention (Dao et al. 2022): memory is
// O(tile) instead of O(T), and K/V are read once per 64 queries instead of
// once per query. The sums run in a different order than cpu-ref's (and use
// the library expf), so results agree to ~1e-6 relative, not bit for bit.
//
// Versions (the idea of each):
//   v1  one thread per query, q and the Dh-long accumulator in per-thread
//       arrays of 128 indexed by a runtime Dh: they lived in local memory
//       (1152 B of stack per thread on sm_90), one warp per block.
//   v2  Dh a template parameter (kFlashHeadDims in kernels.h lists the
//       instantiations); 32 queries x 32 keys a tile, each warp 8 query rows;
//       in S = Q·Kᵀ lane j scored key j against the 8 rows, in O = P·V lane
//       owned components lane, lane + 32, ... Every multiply-add read one
//       float from shared memory (a q or a p broadcast), and shared memory,
//       not arithmetic, set the pace: on the H200, 9.8 of stories110M's
//       21.5 ms prefill at 2048 tokens (~8 TFLOP/s) was this kernel.
//   v3  register blocking, as matmul_blocked does for GEMMs: 64 x 64
//       tiles, 128 threads, thread (ty = 0..15, tx = 0..7) owns query rows
//       ty, ty + 16, ty + 32, ty + 48 and, in S, keys tx, tx + 8, ..., tx + 56
//       (32 scores in registers); in O the same 4 rows and Dh/8 columns.
//       A row's 8 threads sit in one warp, so its max and sum are 3 shuffles.
//       Loads are 16 bytes (4 components of a q or k row; 4 keys' p of a row;
//       4 columns of a v row), strides padded so one load instruction touches
//       each bank once: ~0.1 shared loads per multiply-add instead of ~1.1.
//       Blocks take the last query tiles first (the longest under causal).
//       H200: 5.39 ms for stories110M's 12 layers at 2048 tokens (~14 TFLOP/s).
//       Yet each launch took about as long as its longest block alone: the
//       last query tile's 64 rows x 2048 keys on 4 warps, the critical path.
//   v4  (this) two groups of 4 warps a block, the same 64 queries: group 0
//       folds key tiles 0, 2, 4, ..., group 1 tiles 1, 3, 5, ... (each its
//       own K/V tiles, the Q tile shared), and at the end group 0 merges
//       group 1's running max, sums and outputs into its own (the same
//       online-softmax rescale, one fixed order). The longest rows take half
//       the steps. P overwrites K once the scores are in registers (one more
//       barrier a step), so two blocks still fit a multiprocessor at Dh = 64.
//       H200: 3.73 ms for the same 12 layers (~21 TFLOP/s); the whole
//       stories110M prefill 16.65 -> 14.92 ms, 55.6% of cuBLAS's peak.
//
//   // clang-format off
//   keys ->   tile 0    tile 1    tile 2
//   q 70    [xxxxxxxx][xxxxxxxx][x.......]   x visible, . masked (causal: j > p)
//   q 71    [xxxxxxxx][xxxxxxxx][xx......]   full, full, partial; an empty tile is not loaded
//   // clang-format on
//
// Chunked == whole, bit for bit: key tiles start at key 0, 64, 128, ...
// (0, kKeys, 2 kKeys, ... for other key tiles)
// whatever the chunk, key j is folded by group (j / 64) % 2 into the share of
// thread tx = j % 8 of its row, each score is one chain over d in order, each
// group's output one chain over its keys in order, the merge one fixed
// expression, and a masked key adds p = 0 times a finite v (an exact no-op);
// a group that sees none of a row's keys leaves (m, l, a) = (-inf, 0, 0),
// which the merge scales by exp(-inf) = 0. A row's result does not depend on
// which block or thread slot computes it.
//
// Masking (core/mask.h): the mask classifies each (query tile x key tile);
// an empty tile is skipped — not loaded, not scored — and counted in
// tile_counts[0] (partial [1], full [2]); inside a partial tile each (query,
// key) asks visible(pos, j); score modifiers (ALiBi, soft-capping) apply to
// each visible score. Under the causal mask the tiles past the block's last
// query are the skipped ones. Every thread, with or without a query, takes
// part in the loads, the shuffles and the barriers (no early return before a
// __syncthreads: the emulator reports that as an error).
//
// Shared memory: the Q tile, and per group a K tile (later its
// P) and a V tile, all dynamic (their size depends on Dh): with 64 x 64
// tiles 72704 B at Dh = 48, 84992 B at 64, 166912 B at 128 — over the 48 KiB
// default, so the launcher opts in (simt::reserve_shared_memory, once per
// instantiation) and the emulator checks it did.
//
// Any head size, every architecture: Dh, the query tile and the
// key tile are template parameters. launch_attention_flash picks the
// compiled Dh at or above the model's (a padded bucket: extra components
// zero) and the tiles flash_tiles_for (kernels.h) finds for the device's
// shared memory a block, asked once: 64 KiB on sm_75 does not hold 64 x 64
// tiles at Dh = 48. It shrinks the query tile first (no bits change: a
// row's sums are its own), then the key tile (the bits change: tiles of
// other sizes fold and rescale other runs of keys); chunked == whole holds
// for every choice. kernels/README.md has the table.
// Decode: a call of at most 16 queries (a decode step, a small
// chunk) launches the instantiation with a 16-query tile and the same key
// tile (flash_decode_tiles in kernels.h): each thread computes 1 row instead
// of 4, where 3 of the 4 would be rows past the call, and every row's sums
// are the ones it had (tests/gpu/test_decode_kernels.cpp checks decode-shaped
// chunks against the whole prompt, bitwise).
// Key segments: a row's keys are folded in fixed, absolute
// segments of kFlashSegmentKeys = 256 (kernels.h), each from a fresh running
// max and sums; at a segment's end the groups merge (step 7) and the
// segment's result is merged into the row's total (SegmentMerge, step 8b),
// whose max and denominator wait in `totals` and outputs, not yet divided,
// in the output rows (device memory: in registers, live across every key
// tile, they made the kernel spill). A decode call
// whose keys span several segments runs a block per segment (blockIdx.y),
// writes each segment's result to `partials` (8a) and merges them in
// attention_merge_kernel, in the same order by the same expressions:
// FlashDecoding's split with a fixed split size, so the bits do not depend
// on it. Up to 256 keys there is one segment: the v4 kernel as it was.
// Left out: tensor cores (mma), double-buffered K/V tiles, fp16.
#pragma once

#include <cmath>
#include <iterator>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels.h"
#if PLAB_SIMT_EMULATED
#include "core/flash_trace.h"  // plab flash --model reads the emulated kernel's state
#endif

namespace plab::PLAB_SIMT_NS {
namespace {

constexpr int kLanes = 32;
constexpr int kMergeThreads = 128;  // attention_merge_kernel: one output a thread
constexpr int kFlashThreads = kFlashWarps * kLanes;
// Two groups of 4 warps, each folding every other key tile (v4).
constexpr int kGroupThreads = 128;
constexpr int kKeyGroups = kFlashThreads / kGroupThreads;
constexpr int kKeyGroup = 8;                           // lanes that share a row (tx)
constexpr int kRowGroups = kGroupThreads / kKeyGroup;  // 16 (ty)
static_assert(kFlashThreads % kGroupThreads == 0 && kKeyGroups == 2);
static_assert(kLanes % kKeyGroup == 0, "a row's 8 lanes sit in one warp (shuffles)");

// A thread's share of a tile of kQueries queries x kKeys keys (64 x 64 where
// shared memory allows; flash_tiles_for in kernels.h chooses).
template <int kQueries, int kKeys>
struct FlashThread {
    static constexpr int kRowsPerThread = kQueries / kRowGroups;  // 4 at 64: rows ty + 16r
    static constexpr int kKeysPerThread = kKeys / kKeyGroup;      // 8 at 64: keys tx + 8c
    static_assert(kQueries % kRowGroups == 0 && kKeys % kKeyGroup == 0);
    static_assert(kKeys % 4 == 0, "P·V reads 4 keys' probabilities as one 16-byte load");
};

// The output columns of one thread in O = P·V: groups of 4 consecutive
// columns 32 apart (32g + 4tx .. +3, one 16-byte load each, and the 8 threads
// of a row read 128 consecutive bytes), then the columns past the last full
// group of 32 split evenly (Dh = 48: columns 32 + 2tx and 33 + 2tx).
template <int kDh>
struct FlashColumns {
    static constexpr bool kVec = kDh % 4 == 0;  // 16-byte loads along d
    static constexpr int kGroups = kVec ? kDh / 32 : 0;
    static constexpr int kRest = kDh - 32 * kGroups;
    static constexpr int kRestPerThread = (kRest + kKeyGroup - 1) / kKeyGroup;
    static constexpr int kCount = 4 * kGroups + kRestPerThread;
    PLAB_HD static constexpr int column(int tx, int i) {
        return i < 4 * kGroups ? 32 * (i / 4) + 4 * tx + i % 4
                               : 32 * kGroups + kRestPerThread * tx + (i - 4 * kGroups);
    }
};

// Where each tile sits in dynamic shared memory, in floats. Every offset and
// row stride is a multiple of 4 floats where 16-byte loads read the tile.
template <int kDh, int kQueries, int kKeys>
struct FlashLayout {
    // Q and K rows are read 4 components at a time (d, d+1, d+2, d+3) by
    // threads that hold different rows: a stride of Dh + 4 (Dh a multiple of
    // 4) starts consecutive rows 4 banks apart, so the 8 keys one load
    // instruction asks for (tx = 0..7) lie in 8 different groups of 4 banks.
    static constexpr bool kVec = FlashColumns<kDh>::kVec;
    static constexpr int kStride = kVec ? kDh + 4 : kDh + 1;
    static constexpr int kPStride = kKeys + 4;
    // P overwrites K once the scores are in registers: one region for both.
    static constexpr int kKFloats = kKeys * kStride, kPFloats = kQueries * kPStride;
    static constexpr int kKP = kKFloats > kPFloats ? kKFloats : kPFloats;
    static constexpr int kQ = 0;  // (kQueries, kStride), scaled; both groups read it
    static constexpr int kGroupFloats = kKP + kKeys * kDh;  // K or P, then V
    static constexpr int kGroup0 = kQ + kQueries * kStride;
    static constexpr int kFloats = kGroup0 + kKeyGroups * kGroupFloats;
    static constexpr std::size_t kBytes = sizeof(float) * kFloats;
    static_assert(static_cast<long long>(kBytes) == flash_shared_bytes(kDh, kQueries, kKeys),
                  "kernels.h's flash_shared_bytes is this layout's size");
    // A group's region: K (kKeys, kStride) or P (kQueries, kPStride) at 0, V at kKP.
    PLAB_HD static constexpr int group(int g) { return kGroup0 + g * kGroupFloats; }
    // At a segment's end, group 1 hands its running max, sum shares and outputs
    // to group 0 through the groups' regions (nobody reads a K or V tile then):
    // (2 + Dh/8) values a row of a thread.
    // It sits past the Q tile, which the next key segment reads again, where
    // it fits there; otherwise over the Q tile, which the next segment loads
    // again (Dh = 192 with 64 x 16 tiles).
    static constexpr int kHandoff = kGroupThreads * FlashThread<kQueries, kKeys>::kRowsPerThread *
                                    (2 + FlashColumns<kDh>::kCount);
    static constexpr bool kHandoffOverQ = kHandoff > kFloats - kGroup0;
    static constexpr int kHandoffAt = kHandoffOverQ ? 0 : kGroup0;
    static_assert(kHandoff <= kFloats);
};

// Max and sum over the 8 lanes of a row (tx = lane % 8): a butterfly, so
// every lane ends with the same value, added in the same pairs.
__device__ __forceinline__ float row_max(float x) {
    for (int offset = kKeyGroup / 2; offset > 0; offset /= 2)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
    return x;
}
__device__ __forceinline__ float row_sum(float x) {
    for (int offset = kKeyGroup / 2; offset > 0; offset /= 2)
        x += __shfl_xor_sync(0xffffffffu, x, offset);
    return x;
}

// n consecutive floats (n = 4: one 16-byte load; src aligned) into dst.
template <int n, typename Src>
__device__ __forceinline__ void load_floats(float* dst, Src src) {
    if constexpr (n == 4) {
        load_float4(dst, src);
    } else {
        PLAB_UNROLL
        for (int e = 0; e < n; ++e) dst[e] = src[e];
    }
}

// n components of a row starting at component d of dh: one load_floats, or
// in a padded bucket (dh < the compiled size) one float at a time, zero past
// dh (rows are dh apart, so not 16-byte aligned in general).
template <int n>
__device__ __forceinline__ void load_row(float* dst, const float* src, int d, int dh, bool padded) {
    if (!padded) {
        load_floats<n>(dst, src);
    } else {
        PLAB_UNROLL
        for (int e = 0; e < n; ++e) dst[e] = d + e < dh ? src[e] : 0.0f;
    }
}

// Merging a key segment's result into a row's total (kernels.h,
// kFlashSegmentKeys): the online softmax's rescale once more, between
// segments, with explicit fmaf so that the prefill kernel and the split
// decode's merge launch compute each total with the same roundings. A segment
// that saw none of the row's keys (m = -inf) leaves the total as it was; the
// first that saw some becomes the total as it is (no rescale by exp(0)).
struct SegmentMerge {
    enum Kind { keep_total, take_segment, rescale_both } kind = keep_total;
    float m = -INFINITY;  // the total's max after the merge
    float c_total = 0.0f, c_segment = 0.0f;
    PLAB_HD float apply(float total, float segment) const {
        return kind == keep_total     ? total
               : kind == take_segment ? segment
                                      : fmaf(total, c_total, segment * c_segment);
    }
};
PLAB_HD inline SegmentMerge segment_merge(float m_total, float m_segment) {
    SegmentMerge g;
    if (m_segment == -INFINITY) {
        g.m = m_total;
    } else if (m_total == -INFINITY) {
        g.kind = SegmentMerge::take_segment;
        g.m = m_segment;
    } else {
        g.kind = SegmentMerge::rescale_both;
        g.m = fmaxf(m_total, m_segment);
        g.c_total = expf(m_total - g.m);
        g.c_segment = expf(m_segment - g.m);
    }
    return g;
}

// Launch bounds: two blocks a multiprocessor (128 registers a thread) where
// their shared memory lets two fit; Dh >= 96 fits one, so it may use 255. A
// decode launch has heads x segments blocks, rarely more than the device has
// multiprocessors: one a multiprocessor is enough, and its registers need not
// spill (at 128 they did, at Dh 48 and 64 on sm_90).
// kDh is the compiled size; s.head_dim may be smaller (a padded bucket: its
// loads read s.head_dim components a row and zero the rest, its output
// columns past s.head_dim are not written). At s.head_dim == kDh every
// operation is the one it was before buckets existed: the same bits.
template <int kDh, int kQueries, int kKeys, bool kDecode>
__global__ void __launch_bounds__(kFlashThreads, kDh >= 96 || kDecode ? 1 : 2)
    attention_flash_kernel(float* out, const float* q, const float* k_pool, const float* v_pool,
                           const int32_t* block_table, AttentionShape s,
                           unsigned long long* tile_counts, const int32_t* pos0_at, float* partials,
                           float* totals) {
    // A step graph's launch (kernels/step_graph.h): the chunk's position is
    // read from device memory, so one recorded launch serves every step.
    if (pos0_at != nullptr) s.pos0 = *pos0_at;
    using L = FlashLayout<kDh, kQueries, kKeys>;
    using C = FlashColumns<kDh>;
    constexpr int kRowsPerThread = FlashThread<kQueries, kKeys>::kRowsPerThread;
    constexpr int kKeysPerThread = FlashThread<kQueries, kKeys>::kKeysPerThread;
    constexpr int kFlashQueries = kQueries;
    constexpr int kFlashKeys = kKeys;
    const int dh = s.head_dim;  // == kDh, or fewer in a padded bucket
    const bool padded = dh != kDh;
    constexpr int kVec = L::kVec ? 4 : 1;                             // floats per load along d
    const int group = static_cast<int>(threadIdx.x) / kGroupThreads;  // 0 or 1
    const int t = static_cast<int>(threadIdx.x) % kGroupThreads;      // thread within the group
    const int tx = t % kKeyGroup;
    const int ty = t / kKeyGroup;
    // The block's (query tile, head), the last query tiles first: under the
    // causal mask they see the most keys, and started first they do not
    // finish last while the multiprocessors that took the short ones idle.
    const int query_tiles = (s.n_queries + kFlashQueries - 1) / kFlashQueries;
    const int h = static_cast<int>(blockIdx.x) % s.n_heads;
    const int query_tile = query_tiles - 1 - static_cast<int>(blockIdx.x) / s.n_heads;
    const int g = kv_head_of(h, s.n_heads, s.n_kv_heads);
    const int n_keys = s.n_keys();
    const int first_query = query_tile * kFlashQueries;
    const int last_query = min(s.n_queries, first_query + kFlashQueries) - 1;
    const int first_pos = s.pos0 + first_query, last_q_pos = s.pos0 + last_query;
    const bool modifies = s.mask.alibi || s.mask.softcap > 0.0f;
#if PLAB_SIMT_EMULATED
    // plab flash --model's tap (core/flash_trace.h): one layer's head, or null.
    FlashTrace* const tap = [&]() -> FlashTrace* {
        FlashTrace* t = g_flash_trace.load();
        return t != nullptr && t->wants(k_pool, h) ? t : nullptr;
    }();
#endif

    // The bounds of the block's queries' key ranges, found once: they decide
    // most key tiles' verdicts without asking each query again (core/mask.h).
    // The furthest visible key is the largest end of those ranges (the last
    // query's position under causal; further under prefix-LM). Every thread
    // computes the same values, so the loop below stays uniform.
    const Mask::QueryTileBounds bounds = s.mask.query_tile_bounds(first_pos, last_q_pos);
    const int last_key = min(max(0, bounds.max_hi), n_keys - 1);

    PLAB_DYNAMIC_SHARED(float, tiles);
    // Pointers into it (auto: in the emulator, checked pointers that report a race by name).
    const auto q_tile = tiles + L::kQ;
    const auto k_tile = tiles + L::group(group);  // this group's K, then its P
    const auto p_tile = k_tile;
    const auto v_tile = k_tile + L::kKP;

    // The key segments this block folds (kernels.h, kFlashSegmentKeys). A
    // prefill instantiation: all of them up to its last visible key, one
    // after another. A decode one (kDecode, at most 16 queries): one, segment
    // blockIdx.y of a split call (partials != null), its result to partials
    // for attention_merge_kernel; or, unsplit, keys 0 to 255 at most (the
    // host splits every decode call past 256 keys). Two instantiations, so
    // that neither holds the other's state: the decode kernel keeps the
    // registers it had before segments (no spills at Dh = 48 and 64, sm_90).
    const bool split = kDecode && partials != nullptr;
    const int first_segment = split ? static_cast<int>(blockIdx.y) : 0;
    const int end_segment = kDecode ? first_segment + 1 : last_key / kFlashSegmentKeys + 1;

    // 1. The block's queries, scaled by 1/sqrt(Dh); rows past the chunk are 0.
    //    Once, or once a segment where the handoff (7.) overwrites them.
    auto load_queries = [&] {
        for (int e = threadIdx.x; e < kFlashQueries * (kDh / kVec); e += kFlashThreads) {
            const int r = e / (kDh / kVec), d = e % (kDh / kVec) * kVec;  // constants: no division
            const int i = first_query + r;
            float x[kVec] = {};
            if (i < s.n_queries)
                load_row<kVec>(x, q + (static_cast<long long>(i) * s.n_heads + h) * dh + d, d, dh,
                               padded);
            PLAB_UNROLL
            for (int v = 0; v < kVec; ++v) q_tile[r * L::kStride + d + v] = x[v] * s.scale;
        }
    };
    if constexpr (!L::kHandoffOverQ) load_queries();

    for (int segment = first_segment; segment < end_segment; ++segment) {
        if constexpr (L::kHandoffOverQ) load_queries();  // the last handoff overwrote them
        // Per row of this thread: running max, this thread's share of the
        // denominator (its keys tx + 8c of this group's tiles), its output
        // columns (registers); from fresh in every segment.
        float m[kRowsPerThread], l[kRowsPerThread], acc[kRowsPerThread][C::kCount];
        PLAB_UNROLL
        for (int r = 0; r < kRowsPerThread; ++r) {
            m[r] = -INFINITY;
            l[r] = 0.0f;
            PLAB_UNROLL
            for (int c = 0; c < C::kCount; ++c) acc[r][c] = 0.0f;
        }

        // Group 0 folds key tiles 0, 2, 4, ..., group 1 tiles 1, 3, 5, ...: two
        // tiles a step, so the longest rows (the last query tiles) take half as
        // many steps. Every thread runs every step (the barriers are the
        // block's); a group whose tile is past the last key or empty only waits.
        const int segment_end =
            kDecode && !split ? last_key + 1 : min((segment + 1) * kFlashSegmentKeys, last_key + 1);
        for (int pair0 = segment * kFlashSegmentKeys; pair0 < segment_end;
             pair0 += kKeyGroups * kFlashKeys) {
            const int t0 = pair0 + group * kFlashKeys;
            const int t1 = min(t0 + kFlashKeys, n_keys) - 1;
            const int tile_keys = t1 - t0 + 1;
            // 2. The mask's verdict on this group's (query tile x key tile).
            const bool looked = t0 <= last_key;
            const TileClass cls = looked ? s.mask.classify_tile(bounds, t0, t1) : TileClass::empty;
            if (t == 0 && looked) atomicAdd(&tile_counts[static_cast<int>(cls)], 1ull);
#if PLAB_SIMT_EMULATED
            // The attention ladder's counts (attention_ladder.h): a tile this group
            // folds is read once for the block, K and V rows of its keys, and
            // scored and weighted for every row and key of it, masked cells too.
            if (t == 0 && looked && cls != TileClass::empty) {
                long long loaded = 0;
                for (int key = t0; key <= t1; ++key)
                    loaded += kv_block_freed(block_table, key, s.block_size) ? 0 : 1;
                const long long cells =
                    static_cast<long long>(last_q_pos - first_pos + 1) * tile_keys;
                PLAB_LADDER_COUNT(8LL * dh * loaded, cells * (4LL * dh + 4));
            }
            if (tap != nullptr && t == 0 && looked)
                tap->add(FlashTraceTile{first_pos, last_q_pos, t0, t1, group, cls});
#endif
            const bool folds = looked && cls != TileClass::empty;  // the same for the whole group
            // 3. Load K and V rows through the block table, kVec floats a thread
            //    (consecutive threads, consecutive addresses: coalesced). A freed
            //    block (core/kv_layout.h) holds keys no query of this tile may
            //    see, and rows past the cache do not exist: nothing is read for
            //    them, and their rows are zeros, so a masked cell's p = 0
            //    multiplies a 0, never a stale or poisoned value.
            if (folds) {
                for (int e = t; e < kFlashKeys * (kDh / kVec); e += kGroupThreads) {
                    const int jj = e / (kDh / kVec), d = e % (kDh / kVec) * kVec;
                    const int key = t0 + jj;
                    float kx[kVec] = {}, vx[kVec] = {};
                    if (jj < tile_keys && !kv_block_freed(block_table, key, s.block_size)) {
                        const long long base = kv_offset(kv_slot(block_table, key, s.block_size), g,
                                                         s.n_kv_heads, dh) +
                                               d;
                        load_row<kVec>(kx, k_pool + base, d, dh, padded);
                        load_row<kVec>(vx, v_pool + base, d, dh, padded);
                    }
                    PLAB_UNROLL
                    for (int v = 0; v < kVec; ++v) {
                        k_tile[jj * L::kStride + d + v] = kx[v];
                        v_tile[jj * kDh + d + v] = vx[v];
                    }
                }
            }
            __syncthreads();  // the tiles (and, the first time, the queries) are complete

            // 4. S = Q·Kᵀ: this thread's 4 rows x 8 keys, each score one chain over
            //    d in order. Per 4 components: 4 loads of q rows and 8 of k rows
            //    feed 128 multiply-adds (register blocking, as in matmul_blocked).
            float score[kRowsPerThread][kKeysPerThread] = {};
            if (folds) {
                for (int d = 0; d < kDh; d += kVec) {
                    float qx[kRowsPerThread][kVec];
                    PLAB_UNROLL
                    for (int r = 0; r < kRowsPerThread; ++r)
                        load_floats<kVec>(qx[r], q_tile + (ty + kRowGroups * r) * L::kStride + d);
                    PLAB_UNROLL
                    for (int c = 0; c < kKeysPerThread; ++c) {
                        float kx[kVec];
                        load_floats<kVec>(kx, k_tile + (tx + kKeyGroup * c) * L::kStride + d);
                        PLAB_UNROLL
                        for (int r = 0; r < kRowsPerThread; ++r) {
                            PLAB_UNROLL
                            for (int v = 0; v < kVec; ++v) score[r][c] += qx[r][v] * kx[v];
                        }
                    }
                }
            }
            __syncthreads();  // every score is in registers: P may overwrite K
            if (folds) {
                // 5. Per row: mask, modifiers, the tile's max over the row's 8
                //    lanes, the rescale, and this thread's p_j into p_tile. Rows
                //    past the chunk, and rows that see no key of this tile, write p = 0.
                PLAB_UNROLL
                for (int r = 0; r < kRowsPerThread; ++r) {
                    const int row = ty + kRowGroups * r;
                    const int i = first_query + row;
                    const int pos = s.pos0 + i;
                    float x[kKeysPerThread];
                    float tile_max = -INFINITY;
                    PLAB_UNROLL
                    for (int c = 0; c < kKeysPerThread; ++c) {
                        const int jj = tx + kKeyGroup * c, j = t0 + jj;
                        x[c] = score[r][c];
                        if (i >= s.n_queries || jj >= tile_keys ||
                            (cls == TileClass::partial && !s.mask.visible(pos, j))) {
                            x[c] =
                                -INFINITY;  // masked, past the chunk, or past the end of the cache
                        } else if (modifies) {
                            x[c] = s.mask.modify_score(x[c], h, pos, j);
                        }
                        tile_max = fmaxf(tile_max, x[c]);
                    }
                    tile_max = row_max(tile_max);  // every lane of the warp, before any branch
                    const auto p_row = p_tile + row * L::kPStride;
                    if (tile_max == -INFINITY) {  // the same for the row's 8 lanes
                        PLAB_UNROLL
                        for (int c = 0; c < kKeysPerThread; ++c) p_row[tx + kKeyGroup * c] = 0.0f;
                        continue;
                    }
                    const float m_new = fmaxf(m[r], tile_max);
                    const float correction = expf(m[r] - m_new);  // exp(-inf) = 0 on the first tile
                    l[r] *= correction;
                    PLAB_UNROLL
                    for (int c = 0; c < kKeysPerThread; ++c) {
                        const float p = expf(x[c] - m_new);  // 0 for a masked key
                        l[r] += p;
                        p_row[tx + kKeyGroup * c] = p;
                    }
                    PLAB_UNROLL
                    for (int c = 0; c < C::kCount; ++c) acc[r][c] *= correction;
#if PLAB_SIMT_EMULATED
                    if (tap != nullptr)
                        tap->add(FlashTraceLane{pos, t0, tx, m[r], m_new, correction, l[r]});
#endif
                    m[r] = m_new;
                }
                __syncwarp();  // a row's 8 lanes are in one warp: the warp's p rows are complete
                // 6. O += P·V: this thread's 4 rows x its columns, keys in order;
                //    one 16-byte load brings a row's p for 4 keys. Keys past the
                //    tile (up to the next multiple of 4) have p = 0 and zero V rows.
                for (int j0 = 0; j0 < tile_keys; j0 += 4) {
                    float p[kRowsPerThread][4];
                    PLAB_UNROLL
                    for (int r = 0; r < kRowsPerThread; ++r)
                        load_float4(p[r], p_tile + (ty + kRowGroups * r) * L::kPStride + j0);
                    PLAB_UNROLL
                    for (int e = 0; e < 4; ++e) {
                        const auto v_row = v_tile + (j0 + e) * kDh;
                        float vx[C::kCount];
                        PLAB_UNROLL
                        for (int gr = 0; gr < C::kGroups; ++gr)
                            load_float4(&vx[4 * gr], v_row + 32 * gr + 4 * tx);
                        PLAB_UNROLL
                        for (int c = 4 * C::kGroups; c < C::kCount; ++c) {
                            const int col = C::column(tx, c);
                            vx[c] = col < kDh ? v_row[col] : 0.0f;
                        }
                        PLAB_UNROLL
                        for (int r = 0; r < kRowsPerThread; ++r) {
                            PLAB_UNROLL
                            for (int c = 0; c < C::kCount; ++c) acc[r][c] += p[r][e] * vx[c];
                        }
                    }
                }
#if PLAB_SIMT_EMULATED
                for (int r = 0; tap != nullptr && tx == 0 && r < kRowsPerThread; ++r)
                    if (first_query + ty + kRowGroups * r < s.n_queries)
                        tap->add(FlashTraceAcc{first_pos + ty + kRowGroups * r, t0, acc[r][0]});
#endif
            }
            __syncthreads();  // everyone is done with the tiles before they are overwritten
        }
        // 7. Group 1 hands its state to group 0 (through the groups' regions,
        //    free now), which merges it: m = max(m0, m1), each part scaled by
        //    exp(m_part - m), group 0's first — one order for every chunking —
        //    and l the sum of the row's 8 merged shares: the segment's result.
        const auto handoff = tiles + L::kHandoffAt;
        // Over the Q tile: every thread's writes of the queries must be done
        // first. The loop above ends in a barrier when it folds a tile; a
        // segment that folds none (only a split decode block past the call's
        // keys, whose tiles never lie over Q today) would have none.
        if constexpr (L::kHandoffOverQ) __syncthreads();
        constexpr int kValues = 2 + C::kCount;  // m, l, the outputs: per row
        if (group == 1) {
            PLAB_UNROLL
            for (int r = 0; r < kRowsPerThread; ++r) {
                const auto h1 = handoff + (r * kValues) * kGroupThreads + t;  // thread-contiguous
                h1[0] = m[r];
                h1[kGroupThreads] = l[r];
                PLAB_UNROLL
                for (int c = 0; c < C::kCount; ++c) h1[(2 + c) * kGroupThreads] = acc[r][c];
            }
        }
        __syncthreads();
        if (group == 0) {
            const bool last = segment + 1 == end_segment;
            PLAB_UNROLL
            for (int r = 0; r < kRowsPerThread; ++r) {
                const auto h1 = handoff + (r * kValues) * kGroupThreads + t;
                const float m1 = h1[0];
                const float m_row = fmaxf(m[r], m1);
                // exp(-inf - m_row) = 0: a group that saw no key of this row adds exactly nothing.
                const float c0 = expf(m[r] - m_row), c1 = expf(m1 - m_row);
                const float share = l[r] * c0 + h1[kGroupThreads] * c1;
                const float denominator = row_sum(share);  // every lane, before the branch
                const int i = first_query + ty + kRowGroups * r;
                if (i >= s.n_queries) continue;
                if constexpr (kDecode) {
                    // 8. One segment: out = a / l, as v4 wrote it. 8a. Split:
                    //    the segment's m, l and a as they are, for the merge.
                    float* dst =
                        split
                            ? partials +
                                  ((static_cast<long long>(segment) * s.n_queries + i) * s.n_heads +
                                   h) *
                                      (2 + dh) +
                                  2
                            : out + (static_cast<long long>(i) * s.n_heads + h) * dh;
                    if (split && tx == 0) {
                        dst[-2] = m_row;
                        dst[-1] = denominator;
                    }
                    PLAB_UNROLL
                    for (int c = 0; c < C::kCount; ++c) {
                        const int col = C::column(tx, c);
                        const float a = acc[r][c] * c0 + h1[(2 + c) * kGroupThreads] * c1;
                        if (col < dh) dst[col] = split ? a : a / denominator;
                    }
                } else if (end_segment == 1) {
                    // 8. One segment (up to 256 keys): out = a / l, as v4 wrote it.
                    float* o = out + (static_cast<long long>(i) * s.n_heads + h) * dh;
                    PLAB_UNROLL
                    for (int c = 0; c < C::kCount; ++c) {
                        const int col = C::column(tx, c);
                        const float a = acc[r][c] * c0 + h1[(2 + c) * kGroupThreads] * c1;
                        if (col < dh) o[col] = a / denominator;
                    }
                } else {
                    // 8b. Into the row's total: its max and denominator in this
                    //     thread's slots of `totals` (global memory, read once a
                    //     segment: in registers they would be live across every
                    //     key tile, and under the 128-register cap the kernel
                    //     spilled), its outputs, not yet divided, in out. In the
                    //     block's last segment, out = a / l.
                    float* tot =
                        totals +
                        ((static_cast<long long>(blockIdx.x) * kGroupThreads + t) * kRowsPerThread +
                         r) *
                            2;
                    const float m_total = segment == 0 ? -INFINITY : tot[0];
                    const float l_total = segment == 0 ? 0.0f : tot[1];
                    const bool had_total = m_total != -INFINITY;
                    const SegmentMerge g = segment_merge(m_total, m_row);
                    // Nothing new (the first segment still stores its empty total).
                    if (!last && segment > 0 && g.kind == SegmentMerge::keep_total) continue;
                    const float l_new = g.apply(l_total, denominator);
                    if (!last) {
                        tot[0] = g.m;
                        tot[1] = l_new;
                    }
                    float* o = out + (static_cast<long long>(i) * s.n_heads + h) * dh;
                    PLAB_UNROLL
                    for (int c = 0; c < C::kCount; ++c) {
                        const int col = C::column(tx, c);
                        if (col >= dh) continue;
                        const float a_segment = acc[r][c] * c0 + h1[(2 + c) * kGroupThreads] * c1;
                        const float a = g.apply(had_total ? o[col] : 0.0f, a_segment);
                        o[col] = last ? a / l_new : a;  // not last: the total waits here
                    }
                }
            }
        }
        __syncthreads();  // group 0 has read the handoff: the next segment may load tiles
    }                     // segment

    // Tiles past the block's furthest visible key are empty by the key ranges:
    // skipped too (a split block counts those of its own segment).
    const int key_tiles = (n_keys + kFlashKeys - 1) / kFlashKeys;
    const int looked_at = last_key / kFlashKeys + 1;
    const int tile_lo = split ? first_segment * (kFlashSegmentKeys / kFlashKeys) : 0;
    const int tile_hi =
        split ? min(key_tiles, tile_lo + kFlashSegmentKeys / kFlashKeys) : key_tiles;
    const int beyond = tile_hi - max(tile_lo, looked_at);
    if (threadIdx.x == 0 && beyond > 0)
        atomicAdd(&tile_counts[0], static_cast<unsigned long long>(beyond));
}

}  // namespace
}  // namespace plab::PLAB_SIMT_NS
