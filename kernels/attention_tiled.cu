// Rung 3 of the attention ladder (attention_ladder.h): tiled.
//
// What it teaches: in the online rung every query reads every K and V row it
// sees from global memory, so a row is read once per query. Here a block owns
// a tile of kLadderQueries queries of one head (one thread each) and walks the
// keys in tiles of kLadderKeys from position 0: the block's threads load a K
// tile and a V tile into shared memory together, wait, and each runs the
// online softmax step over the tile's keys it sees; wait, next tile. A row is
// now read once per block — kLadderQueries times fewer bytes — which is
// FlashAttention-2's loop order (query tiles outside, key tiles inside). Each
// query still takes its keys in j order with the same step, so the result is
// the online rung's, bit for bit: tiling moves the data, not the sums. What
// the flash rung adds: scores and outputs in registers, one rescale a tile,
// work split over warps, empty tiles skipped.
#include <climits>

#include "attention_ladder.h"
#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

namespace {
constexpr int kLadderQueries = 32;  // queries a block, one thread each
constexpr int kLadderKeys = 16;     // keys a shared-memory tile
}  // namespace

__global__ void attention_tiled_kernel(float* out, const float* q, const float* k_pool,
                                       const float* v_pool, const int32_t* block_table,
                                       AttentionShape s) {
    PLAB_DYNAMIC_SHARED(float, tiles);  // the K tile, then the V tile: kLadderKeys x head_dim each
    const int dh = s.head_dim, h = static_cast<int>(blockIdx.y);
    const int g = kv_head_of(h, s.n_heads, s.n_kv_heads);
    const int i0 = static_cast<int>(blockIdx.x) * kLadderQueries;
    const int i = i0 + static_cast<int>(threadIdx.x);
    const bool mine = i < s.n_queries;  // threads past the last query load and wait only
    const int pos = s.pos0 + i;
    const auto k_tile = tiles;  // SharedPtr<float>: checked in the emulator
    const auto v_tile = tiles + kLadderKeys * dh;
    // The block's keys: every key one of its queries may see.
    int lo = INT_MAX, hi = -1;
    for (int r = i0; r < min(i0 + kLadderQueries, s.n_queries); ++r) {
        const KeyRange kr = attention_key_range(s, s.pos0 + r);
        lo = min(lo, kr.lo);
        hi = max(hi, kr.hi);
    }
    const KeyRange my = mine ? attention_key_range(s, pos) : KeyRange{0, -1};
    const float* qr = q + (static_cast<long long>(i) * s.n_heads + h) * dh;
    float* o = out + (static_cast<long long>(i) * s.n_heads + h) * dh;
    if (mine)
        for (int d = 0; d < dh; ++d) o[d] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int t0 = lo / kLadderKeys * kLadderKeys; t0 <= hi; t0 += kLadderKeys) {
        const int n = min(kLadderKeys, hi + 1 - t0);
        // All threads load the tile together, one float each in turn; keys in a
        // freed block are seen by no query (core/kv_layout.h) and not loaded.
        for (int e = static_cast<int>(threadIdx.x); e < n * dh; e += static_cast<int>(blockDim.x)) {
            const int j = t0 + e / dh, d = e % dh;
            if (kv_block_freed(block_table, j, s.block_size)) continue;
            k_tile[e] = ladder_kv_row(k_pool, block_table, s, g, j)[d];
            v_tile[e] = ladder_kv_row(v_pool, block_table, s, g, j)[d];
        }
        if (threadIdx.x == 0)
            for (int j = t0; j < t0 + n; ++j)
                if (!kv_block_freed(block_table, j, s.block_size)) PLAB_LADDER_COUNT(8LL * dh, 0);
        __syncthreads();  // the tile is in shared memory
        for (int j = max(t0, my.lo); j <= min(t0 + n - 1, my.hi); ++j) {
            if (!s.mask.visible(pos, j)) continue;
            const float score = attention_score_of(qr, k_tile + (j - t0) * dh, s, h, pos, j);
            online_softmax_step(m, l, o, score, v_tile + (j - t0) * dh, dh);
            PLAB_LADDER_COUNT(0, score_flops(dh) + online_step_flops(dh));
        }
        __syncthreads();  // every thread is done with the tile before the next overwrites it
    }
    if (mine)
        for (int d = 0; d < dh; ++d) o[d] = strict_div(o[d], l);
}

void launch_attention_tiled(float* out, const float* q, const float* k_pool, const float* v_pool,
                            const int32_t* block_table, const AttentionShape& s) {
    const dim3 grid((s.n_queries + kLadderQueries - 1) / kLadderQueries, s.n_heads);
    const std::size_t shared = 2 * std::size_t(kLadderKeys) * s.head_dim * sizeof(float);
    simt::reserve_shared_memory("attention_tiled_kernel", attention_tiled_kernel, shared);
    PLAB_LAUNCH(attention_tiled_kernel, grid, kLadderQueries, shared, out, q, k_pool, v_pool,
                block_table, s);
}

}  // namespace plab::PLAB_SIMT_NS
