// Tiled masked attention with online softmax over the paged KV cache (the gpu backend).
//
// What it teaches: attention without ever storing a row of scores. The block
// handles 32 queries of one head, one query per thread. It walks the keys in
// tiles of 32: the block loads a K tile and a V tile into shared memory
// through the block table (PagedAttention, Kwon et al. 2023), then each thread
// scores its query against the tile and folds the tile into a running result:
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
//   // clang-format off
//   keys ->   tile 0    tile 1    tile 2
//   q 40    [xxxxxxxx][xxxxxxxx][x.......]   x visible, . masked (causal: j > p)
//   q 41    [xxxxxxxx][xxxxxxxx][xx......]   full, full, partial; an empty tile is not loaded
//   // clang-format on
//
// Masking (core/mask.h): the mask classifies each (query tile x key tile);
// an empty tile is skipped — not loaded, not scored — and counted in
// tile_counts[0] (partial [1], full [2]); inside a partial tile each query
// asks visible(pos, j); score modifiers (ALiBi, soft-capping) apply to each
// visible score. Under the causal mask the tiles past the block's last query
// are the skipped ones. Every thread, with or without a query,
// takes part in the loads and the barriers (no early return before a
// __syncthreads: the emulator reports that as an error).
// Left out: splitting Dh across threads, warp-level matrix ops, splitting
// long sequences across blocks (FlashDecoding), fp16.
#include <cmath>

#include "kernels.h"

namespace plab::PLAB_SIMT_NS {

__global__ void attention_flash_kernel(float* out, const float* q, const float* k_pool,
                                       const float* v_pool, const int32_t* block_table,
                                       AttentionShape s, unsigned long long* tile_counts) {
    const int dh = s.head_dim;
    const int h = blockIdx.y;
    const int g = kv_head_of(h, s.n_heads, s.n_kv_heads);
    const int n_keys = s.n_keys();
    const int first_query = blockIdx.x * kFlashQueries;
    const int last_query = min(s.n_queries, first_query + kFlashQueries) - 1;
    const int first_pos = s.pos0 + first_query, last_q_pos = s.pos0 + last_query;
    const int i = first_query + static_cast<int>(threadIdx.x);
    const bool has_query = i < s.n_queries;
    const int pos = s.pos0 + i;
    const long long row = static_cast<long long>(i) * s.n_heads + h;
    const bool modifies = s.mask.alibi || s.mask.softcap > 0.0f;

    // The block's furthest visible key: the largest end of its queries' key
    // ranges (the last query's position under causal; further under prefix-LM).
    // Every thread computes the same value, so the loop below stays uniform.
    int last_key = 0;
    for (int p = first_pos; p <= last_q_pos; ++p) last_key = max(last_key, s.mask.key_range(p).hi);
    last_key = min(last_key, n_keys - 1);

    PLAB_DYNAMIC_SHARED(float, tiles);  // K tile (kFlashKeys, Dh), then V tile (kFlashKeys, Dh)
    float* k_tile = tiles;
    float* v_tile = tiles + kFlashKeys * dh;

    float q_reg[kFlashMaxHeadDim];
    float acc[kFlashMaxHeadDim];
    for (int d = 0; d < dh; ++d) {
        q_reg[d] = has_query ? q[row * dh + d] * s.scale : 0.0f;
        acc[d] = 0.0f;
    }
    float m = -INFINITY;  // running max
    float l = 0.0f;       // running denominator

    int visited = 0;  // key tiles looked at; the ones past last_key are skipped without a look
    for (int t0 = 0; t0 <= last_key; t0 += kFlashKeys, ++visited) {
        const int t1 = min(t0 + kFlashKeys, n_keys) - 1;
        // 0. The mask's verdict on this (query tile x key tile), the same for every thread.
        const TileClass cls = s.mask.classify_tile(first_pos, last_q_pos, t0, t1);
        if (threadIdx.x == 0) atomicAdd(&tile_counts[static_cast<int>(cls)], 1ull);
        if (cls == TileClass::empty) continue;  // skipped: never loaded, never scored
        // 1. Load the tile's K and V rows through the block table.
        for (int e = threadIdx.x; e < kFlashKeys * dh; e += blockDim.x) {
            const int jj = e / dh;
            const int d = e % dh;
            const int j = t0 + jj;
            // A freed block (core/kv_layout.h) holds keys no query here may see:
            // never read through it; the mask hides those cells of the tile.
            if (j <= t1 && !kv_block_freed(block_table, j, s.block_size)) {
                const long long off =
                    kv_offset(kv_slot(block_table, j, s.block_size), g, s.n_kv_heads, dh) + d;
                k_tile[e] = k_pool[off];
                v_tile[e] = v_pool[off];
            }
        }
        __syncthreads();  // the tile is complete
        // 2. Fold the keys this query may see into the running softmax.
        if (has_query) {
            float scores[kFlashKeys];
            float tile_max = -INFINITY;
            for (int jj = 0; jj <= t1 - t0; ++jj) {
                const int j = t0 + jj;
                if (cls == TileClass::partial && !s.mask.visible(pos, j)) {
                    scores[jj] = -INFINITY;  // masked
                    continue;
                }
                float dot = 0.0f;
                for (int d = 0; d < dh; ++d) dot += q_reg[d] * k_tile[jj * dh + d];
                if (modifies) dot = s.mask.modify_score(dot, h, pos, j);
                scores[jj] = dot;
                tile_max = fmaxf(tile_max, dot);
            }
            if (tile_max > -INFINITY) {
                const float m_new = fmaxf(m, tile_max);
                const float correction = expf(m - m_new);  // exp(-inf) = 0 on the first tile
                l *= correction;
                for (int d = 0; d < dh; ++d) acc[d] *= correction;
                for (int jj = 0; jj <= t1 - t0; ++jj) {
                    if (scores[jj] == -INFINITY) continue;
                    const float p = expf(scores[jj] - m_new);
                    l += p;
                    for (int d = 0; d < dh; ++d) acc[d] += p * v_tile[jj * dh + d];
                }
                m = m_new;
            }
        }
        __syncthreads();  // everyone is done with the tile before it is overwritten
    }
    // Tiles past the block's furthest visible key are empty by the key ranges: skipped too.
    const int key_tiles = (n_keys + kFlashKeys - 1) / kFlashKeys;
    if (threadIdx.x == 0 && key_tiles > visited)
        atomicAdd(&tile_counts[0], static_cast<unsigned long long>(key_tiles - visited));
    if (has_query) {
        for (int d = 0; d < dh; ++d) out[row * dh + d] = acc[d] / l;
    }
}

}  // namespace plab::PLAB_SIMT_NS
