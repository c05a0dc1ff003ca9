// Tiled masked attention with online softmax over the paged KV cache (the gpu backend).
//
// What it teaches: attention without ever storing a row of scores. A block
// handles a tile of 32 queries of one head. It walks the keys in tiles of 32:
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
// O(tile) instead of O(T), and K/V are read once per 32 queries instead of
// once per query. The sums run in a different order than cpu-ref's (and use
// the library expf), so results agree to ~1e-6 relative, not bit for bit.
//
// Versions (the idea of each):
//   v1  one thread per query, q and the Dh-long accumulator in per-thread
//       arrays of 128 indexed by a runtime Dh: they lived in local memory
//       (1152 B of stack per thread on sm_90), one warp per block.
//   v2  (this) Dh is a template parameter (kFlashHeadDims in kernels.h lists
//       the instantiations); 4 warps per block, each warp owns 8 query rows,
//       and its 32 lanes change roles between the two products:
//         S = Q·Kᵀ  lane j scores key j of the tile against the warp's 8 rows
//                   (q rows broadcast from shared memory; K rows padded to an
//                   odd stride so the 32 lanes read 32 different banks);
//         O = P·V   lane owns output components d = lane, lane + 32, ...
//                   (Dh/32 rounded up, a compile-time count: registers), and
//                   reads the row's probabilities p_j broadcast from shared.
//       The row max is a warp reduction (__shfl_xor_sync); each lane keeps its
//       own share of the denominator l and the warp adds the shares at the end.
//
//   // clang-format off
//   keys ->   tile 0    tile 1    tile 2
//   q 40    [xxxxxxxx][xxxxxxxx][x.......]   x visible, . masked (causal: j > p)
//   q 41    [xxxxxxxx][xxxxxxxx][xx......]   full, full, partial; an empty tile is not loaded
//   // clang-format on
//
// Masking (core/mask.h): the mask classifies each (query tile x key tile);
// an empty tile is skipped — not loaded, not scored — and counted in
// tile_counts[0] (partial [1], full [2]); inside a partial tile each (query,
// key) asks visible(pos, j); score modifiers (ALiBi, soft-capping) apply to
// each visible score. Under the causal mask the tiles past the block's last
// query are the skipped ones. Every thread, with or without a query, takes
// part in the loads and the barriers (no early return before a __syncthreads:
// the emulator reports that as an error).
//
// Shared memory (issue 14): K, V and Q tiles are dynamic (their size depends on
// Dh), the probabilities a static PLAB_SHARED array; at Dh = 128 the total is
// 53376 B, over the 48 KiB default, so the launcher opts in
// (simt::reserve_shared_memory) and the emulator checks it did.
// Left out: tensor cores (mma), splitting long sequences across blocks
// (FlashDecoding), fp16, packing several rows per warp for Dh < 32 (lanes past
// Dh idle in P·V: the small Dh are test and toy sizes).
#include <cmath>
#include <iterator>
#include <string>
#include <utility>

#include "kernels.h"

namespace plab::PLAB_SIMT_NS {
namespace {

constexpr int kLanes = 32;
constexpr int kFlashThreads = kFlashWarps * kLanes;
constexpr int kRowsPerWarp = kFlashQueries / kFlashWarps;  // query rows of one warp
static_assert(kFlashKeys == kLanes, "S = Q·Kᵀ gives each lane one key of the tile");
static_assert(kFlashQueries % kFlashWarps == 0);

// Where each tile sits in dynamic shared memory, in floats.
template <int kDh>
struct FlashLayout {
    // An odd row stride: in S = Q·Kᵀ lane j reads k_tile[j * stride + d] for the
    // same d, and an odd stride puts the 32 lanes in 32 different banks.
    static constexpr int kKStride = kDh % 2 == 0 ? kDh + 1 : kDh;
    static constexpr int kK = 0;                           // (kFlashKeys, kKStride)
    static constexpr int kV = kK + kFlashKeys * kKStride;  // (kFlashKeys, Dh)
    static constexpr int kQ = kV + kFlashKeys * kDh;       // (kFlashQueries, Dh), scaled
    static constexpr int kFloats = kQ + kFlashQueries * kDh;
    static constexpr std::size_t kBytes = sizeof(float) * kFloats;
};

__device__ __forceinline__ float warp_max(float x) {
    for (int offset = kLanes / 2; offset > 0; offset /= 2)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
    return x;
}

// A butterfly: every lane ends with the same sum (each step adds the same pair).
__device__ __forceinline__ float warp_sum(float x) {
    for (int offset = kLanes / 2; offset > 0; offset /= 2)
        x += __shfl_xor_sync(0xffffffffu, x, offset);
    return x;
}

template <int kDh>
__global__ void attention_flash_kernel(float* out, const float* q, const float* k_pool,
                                       const float* v_pool, const int32_t* block_table,
                                       AttentionShape s, unsigned long long* tile_counts) {
    using L = FlashLayout<kDh>;
    constexpr int kPerLane = (kDh + kLanes - 1) / kLanes;  // output components per lane
    const int lane = static_cast<int>(threadIdx.x) % kLanes;
    const int warp = static_cast<int>(threadIdx.x) / kLanes;
    const int h = blockIdx.y;
    const int g = kv_head_of(h, s.n_heads, s.n_kv_heads);
    const int n_keys = s.n_keys();
    const int first_query = blockIdx.x * kFlashQueries;
    const int last_query = min(s.n_queries, first_query + kFlashQueries) - 1;
    const int first_pos = s.pos0 + first_query, last_q_pos = s.pos0 + last_query;
    const bool modifies = s.mask.alibi || s.mask.softcap > 0.0f;
    // The warp's rows: queries first_row .. first_row + rows - 1 (rows may be 0).
    const int first_row = first_query + warp * kRowsPerWarp;
    const int rows = max(0, min(kRowsPerWarp, s.n_queries - first_row));

    // The bounds of the block's queries' key ranges, found once: they decide
    // most key tiles' verdicts without asking each query again (core/mask.h).
    // The furthest visible key is the largest end of those ranges (the last
    // query's position under causal; further under prefix-LM). Every thread
    // computes the same values, so the loop below stays uniform.
    const Mask::QueryTileBounds bounds = s.mask.query_tile_bounds(first_pos, last_q_pos);
    const int last_key = min(max(0, bounds.max_hi), n_keys - 1);

    PLAB_DYNAMIC_SHARED(float, tiles);
    float* k_tile = tiles + L::kK;
    float* v_tile = tiles + L::kV;
    float* q_tile = tiles + L::kQ;
    // (kFlashQueries, kFlashKeys): p_j of each row for the current key tile
    PLAB_SHARED(float, p_tile, [kFlashQueries][kFlashKeys]);

    // 1. The block's queries, scaled by 1/sqrt(Dh); rows past the chunk are 0.
    for (int e = threadIdx.x; e < kFlashQueries * kDh; e += kFlashThreads) {
        const int r = e / kDh, d = e % kDh;  // Dh is a constant: no division here
        const int i = first_query + r;
        q_tile[e] = i < s.n_queries
                        ? q[(static_cast<long long>(i) * s.n_heads + h) * kDh + d] * s.scale
                        : 0.0f;
    }

    // Per row of this warp: running max, this lane's share of the denominator,
    // this lane's output components (all indexed by unrolled constants: registers).
    float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kPerLane];
    PLAB_UNROLL
    for (int r = 0; r < kRowsPerWarp; ++r) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
        PLAB_UNROLL
        for (int c = 0; c < kPerLane; ++c) acc[r][c] = 0.0f;
    }

    int visited = 0;  // key tiles looked at; the ones past last_key are skipped without a look
    for (int t0 = 0; t0 <= last_key; t0 += kFlashKeys, ++visited) {
        const int t1 = min(t0 + kFlashKeys, n_keys) - 1;
        const int tile_keys = t1 - t0 + 1;
        // 2. The mask's verdict on this (query tile x key tile), the same for every thread.
        const TileClass cls = s.mask.classify_tile(bounds, t0, t1);
        if (threadIdx.x == 0) atomicAdd(&tile_counts[static_cast<int>(cls)], 1ull);
        if (cls == TileClass::empty) continue;  // skipped: never loaded, never scored
        // 3. Load K and V rows through the block table: warp w takes rows w, w+4, ...;
        //    its lanes read consecutive floats of a row (coalesced). A freed block
        //    (core/kv_layout.h) holds keys no query of this tile may see: nothing
        //    is read through it, and its rows are zeros, so the masked cells'
        //    p = 0 multiplies a 0, never a stale or poisoned value.
        for (int jj = warp; jj < tile_keys; jj += kFlashWarps) {
            const bool freed = kv_block_freed(block_table, t0 + jj, s.block_size);
            const long long base = freed ? 0
                                         : kv_offset(kv_slot(block_table, t0 + jj, s.block_size), g,
                                                     s.n_kv_heads, kDh);
            for (int d = lane; d < kDh; d += kLanes) {
                k_tile[jj * L::kKStride + d] = freed ? 0.0f : k_pool[base + d];
                v_tile[jj * kDh + d] = freed ? 0.0f : v_pool[base + d];
            }
        }
        __syncthreads();  // the tiles (and, the first time, the queries) are complete

        // 4. S = Q·Kᵀ: lane j scores key t0 + j against the warp's rows, in d order.
        const int j = t0 + lane;
        float score[kRowsPerWarp];
        PLAB_UNROLL
        for (int r = 0; r < kRowsPerWarp; ++r) score[r] = 0.0f;
        if (lane < tile_keys && rows > 0) {
            const float* k_row = k_tile + lane * L::kKStride;
            const float* q_rows = q_tile + warp * kRowsPerWarp * kDh;
            for (int d = 0; d < kDh; ++d) {
                const float kd = k_row[d];
                PLAB_UNROLL
                for (int r = 0; r < kRowsPerWarp; ++r) score[r] += q_rows[r * kDh + d] * kd;
            }
        }
        // 5. Per row: mask, modifiers, the tile's max over the warp, the rescale,
        //    and this lane's p_j into p_tile. Rows past the chunk write p = 0.
        PLAB_UNROLL
        for (int r = 0; r < kRowsPerWarp; ++r) {
            float* p_row = p_tile[warp * kRowsPerWarp + r];
            if (r >= rows) {  // the same for the whole warp
                p_row[lane] = 0.0f;
                continue;
            }
            const int pos = s.pos0 + first_row + r;
            float x = score[r];
            if (lane >= tile_keys || (cls == TileClass::partial && !s.mask.visible(pos, j))) {
                x = -INFINITY;  // masked, or past the end of the cache
            } else if (modifies) {
                x = s.mask.modify_score(x, h, pos, j);
            }
            const float tile_max = warp_max(x);
            if (tile_max == -INFINITY) {  // no key of this tile visible to this row
                p_row[lane] = 0.0f;
                continue;
            }
            const float m_new = fmaxf(m[r], tile_max);
            const float correction = expf(m[r] - m_new);  // exp(-inf) = 0 on the row's first tile
            const float p = expf(x - m_new);              // 0 for a masked key
            l[r] = l[r] * correction + p;
            PLAB_UNROLL
            for (int c = 0; c < kPerLane; ++c) acc[r][c] *= correction;
            m[r] = m_new;
            p_row[lane] = p;
        }
        __syncwarp();  // the warp's p rows are complete
        // 6. O += P·V: this lane's components d = lane + 32c, keys in order.
        for (int jj = 0; jj < tile_keys; ++jj) {
            PLAB_UNROLL
            for (int c = 0; c < kPerLane; ++c) {
                const int d = lane + kLanes * c;
                if (kDh % kLanes != 0 && d >= kDh) continue;
                const float vd = v_tile[jj * kDh + d];
                PLAB_UNROLL
                for (int r = 0; r < kRowsPerWarp; ++r)
                    acc[r][c] += p_tile[warp * kRowsPerWarp + r][jj] * vd;
            }
        }
        __syncthreads();  // everyone is done with the tiles before they are overwritten
    }
    // Tiles past the block's furthest visible key are empty by the key ranges: skipped too.
    const int key_tiles = (n_keys + kFlashKeys - 1) / kFlashKeys;
    if (threadIdx.x == 0 && key_tiles > visited)
        atomicAdd(&tile_counts[0], static_cast<unsigned long long>(key_tiles - visited));
    // 7. out = a / l, with l the warp's sum of the lanes' shares.
    PLAB_UNROLL
    for (int r = 0; r < kRowsPerWarp; ++r) {
        if (r >= rows) continue;  // the same for the whole warp
        const float denominator = warp_sum(l[r]);
        float* o = out + (static_cast<long long>(first_row + r) * s.n_heads + h) * kDh;
        PLAB_UNROLL
        for (int c = 0; c < kPerLane; ++c) {
            const int d = lane + kLanes * c;
            if (kDh % kLanes == 0 || d < kDh) o[d] = acc[r][c] / denominator;
        }
    }
}

// The launch of one instantiation: a block per (query tile, head), 4 warps.
template <int kDh>
void launch_flash(float* out, const float* q, const float* k_pool, const float* v_pool,
                  const int32_t* block_table, const AttentionShape& s,
                  unsigned long long* tile_counts) {
    static const std::string name = "attention_flash_kernel<" + std::to_string(kDh) + ">";
    constexpr std::size_t dynamic_bytes = FlashLayout<kDh>::kBytes;
    // Static p_tile + dynamic tiles against the device's limit; opts in past
    // 48 KiB (Dh = 128). On every launch, not once behind a std::call_once: on
    // the H200 the once-guarded opt-in did not reach the launched kernel (its
    // maximum still read 45056 B at the failing launch), and the two runtime
    // calls cost microseconds against a kernel of tens.
    simt::reserve_shared_memory(name.c_str(), attention_flash_kernel<kDh>, dynamic_bytes);
    const dim3 grid(blocks_for(s.n_queries, kFlashQueries), s.n_heads);
    simt::launch(name.c_str(), attention_flash_kernel<kDh>, grid, dim3(kFlashThreads),
                 dynamic_bytes, out, q, k_pool, v_pool, block_table, s, tile_counts);
}

std::string supported_head_dims() {
    std::string text;
    for (int dh : kFlashHeadDims) text += (text.empty() ? "" : ", ") + std::to_string(dh);
    return text;
}

// Calls f(std::integral_constant<int, Dh>) for the listed Dh equal to head_dim.
template <typename F, std::size_t... I>
bool dispatch_head_dim(int head_dim, F&& f, std::index_sequence<I...>) {
    return ((head_dim == kFlashHeadDims[I]
                 ? (f(std::integral_constant<int, kFlashHeadDims[I]>{}), true)
                 : false) ||
            ...);
}
template <typename F>
bool dispatch_head_dim(int head_dim, F&& f) {
    return dispatch_head_dim(head_dim, f, std::make_index_sequence<std::size(kFlashHeadDims)>{});
}

}  // namespace

void launch_attention_flash(float* out, const float* q, const float* k_pool, const float* v_pool,
                            const int32_t* block_table, const AttentionShape& s,
                            unsigned long long* tile_counts) {
    const bool launched = dispatch_head_dim(s.head_dim, [&](auto dh) {
        launch_flash<decltype(dh)::value>(out, q, k_pool, v_pool, block_table, s, tile_counts);
    });
    PLAB_CHECK(launched, "the gpu backend's flash attention is compiled for head_dim "
                             << supported_head_dims() << "; this model has head_dim " << s.head_dim
                             << ": use gpu-ref, or add " << s.head_dim
                             << " to kFlashHeadDims in kernels/kernels.h");
}

}  // namespace plab::PLAB_SIMT_NS
