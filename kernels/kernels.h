// Every kernel of the GPU backends, declared once for the host code that launches them.
//
// What it teaches: the forward pass needs a dozen small kernels. Each file
// holds one concept; where a concept has a reference and a fast version, the
// file header lists both and the idea of each (karpathy/llm.c style):
//
//   // clang-format off
//   embed.cu            gather rows of the token-embedding table
//   rmsnorm.cu          ref: one thread sums in index order | fast: warp-shuffle block reduction,
//                       alone or with the residual add before it (add_rmsnorm)
//   the matmul ladder (matmul_ladder_run.h runs each rung; kernels/README.md's table):
//   matmul_naive.cu     one thread an output, k-order chain straight from global memory
//                       (bitwise = cpu-ref): every x and w value read once per output
//   matmul_tiled.cu     16x16 shared-memory tiles (Kirk & Hwu, "Programming Massively
//                       Parallel Processors", ch. 5): the gpu backend's small products
//   matmul_blocked_ref.cu  64x64 tiles, 4x4 outputs a thread in registers, each output
//                       summed in k order like strict_dot: gpu-ref's products (= cpu-ref)
//   matmul_blocked.cu   each thread 4x4 to 8x8 outputs in registers, 16-byte loads, two
//                       shared buffers (siboehm's SGEMM steps): gpu's large products,
//                       Q/K/V (gate/up) side by side in one launch
//   matmul_rows.cu      a decode step's few rows: a block streams its outputs' weight rows
//                       through shared memory, each output one k-order chain; SwiGLU
//                       fused as the gate/up product's epilogue
//   rope.cu             one thread per rotated pair, core/rope.h rope_rotate_pair
//   kv_append.cu        scatter K/V rows into paged-cache slots (PagedAttention, Kwon et al. 2023)
//   rope_kv_append.cu   RoPE of Q and K and the K/V append in one launch (decode's fusion)
//   attention_ref.cu    one block per (query, head), scores then weights e_j in shared memory,
//                       max in parallel, j-order sums (core/attention_math.h)
//   attention_naive.cu, attention_online.cu, attention_tiled.cu   the attention ladder's
//                       first rungs (attention_ladder.h): one thread a row, two passes; one
//                       pass with a running max; K/V tiles in shared memory
//   attention_flash_kernel.cuh, attention_flash_merge.cu, attention_flash.cu   by job:
//                       the kernel (prefill tiles, decode segments), a split decode call's
//                       merge, the dispatch and launch (launch_attention_flash):
//                       key tiles in shared memory, online softmax (Milakov & Gimelshein
//                       2018; FlashAttention, Dao et al. 2022); 4 rows x 8 keys a thread
//                       in registers, two warp groups on alternate key tiles; Dh and
//                       the tiles template parameters, chosen per device by
//                       launch_attention_flash below
//   swiglu.cu, add.cu, fill.cu   elementwise
//   argmax.cu           ref: one thread scans | fast: block reduction of (value, index)
//   // clang-format on
//
// All shapes are row-major with the letters of lessons/GLOSSARY.md. A kernel
// whose launch needs more than a grid size has a launch_* host function in its
// own .cu file (block shape, 32-bit index checks), so gpu_backend.cu calls it
// in one line.
// Left out on purpose: half precision, tensor cores, streams.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attention_ladder.h"
#include "core/attention_math.h"
#include "simt/simt.h"

namespace plab::PLAB_SIMT_NS {

constexpr int kThreadsPerBlock = 256;  // elementwise kernels; a multiple of the warp size
constexpr int kNormThreads = 128;      // rmsnorm kernels: D is a few hundred; a multiple of 32
constexpr int kMatmulTile = 16;        // matmul_tiled: 16x16 outputs per block
constexpr int kFlashWarps = 8;         // attention_flash: warps per block (2 groups of 4)
// The head dims attention_flash is compiled for, one kernel instantiation each
// (the only list: the dispatch, the error message and the tests read it).
// 1 is the toy's (lessons/01), 16 the `small` shape's, 32 the shipped model's
// (assets/), 48 stories15M's, 64..128 common Llama-family sizes, 160..256
// larger heads; 2..8 the tiny random test models'.
// Any other head_dim from 1 to kFlashMaxHeadDim runs on the smallest listed
// size above it, its extra components zero: a padded bucket adds
// q·0·k = +0 to each score and never writes its extra output columns.
inline constexpr int kFlashHeadDims[] = {1, 2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 160, 192, 256};
// 160 (Qwen, Phi), 192 and 256 (Gemma) too: every head_dim up to 256 runs on
// flash attention. (They once gave wrong outputs under the emulator: GCC 12's
// value-range propagation miscompiled the kernel there; kernels/CMakeLists.txt.)
constexpr int kFlashMaxHeadDim = 256;
// The compiled size a head_dim runs on (0 past kFlashMaxHeadDim).
constexpr int flash_bucket(int head_dim) {
    for (int dh : kFlashHeadDims)
        if (dh >= head_dim) return dh;
    return 0;
}

// The tiles of one attention_flash launch: queries a block (the query tile),
// keys a shared-memory tile, and the dynamic shared memory they take.
struct FlashTiles {
    int head_dim = 0;  // the compiled size (flash_bucket)
    int queries = 0, keys = 0;
    long long shared_bytes = 0;
};
// Dynamic shared memory of a block at compiled size dh with q x k tiles, in
// bytes (attention_flash_kernel.cuh's FlashLayout, which static_asserts it): the Q
// tile, and per warp group a K tile (later its P, q x (k + 4)) and a V tile;
// rows padded to dh + 4 floats (dh + 1 when dh is not a multiple of 4).
constexpr long long flash_shared_bytes(int dh, int queries, int keys) {
    const long long stride = dh % 4 == 0 ? dh + 4 : dh + 1;
    const long long kp =
        keys * stride > queries * (keys + 4LL) ? keys * stride : queries * (keys + 4LL);
    return 4 * (queries * stride + 2 * (kp + keys * dh));
}
// The per-block shared-memory limits (with opt-in) of the architectures the
// build targets: sm_75 64 KiB, sm_86/89 99 KiB, sm_80 163 KiB, sm_90 227 KiB.
// Tiles are compiled for each; a device with another limit takes the tiles of
// the largest of these at or under its own.
inline constexpr long long kFlashSharedLimits[] = {64 * 1024, 99 * 1024, 163 * 1024, 227 * 1024};
// The tiles for compiled size dh under a per-block limit: the largest that
// fit, shrinking the query tile first (64, 32, 16 rows: a row's sums do not
// depend on it), then the key tile (64, 32, 16, 8 keys: this changes the
// order of a row's sums, so the bits; see kernels/README.md). {} when none fits.
constexpr FlashTiles flash_tiles_for(int dh, long long limit_bytes) {
    for (int keys = 64; keys >= 8; keys /= 2)
        for (int queries = 64; queries >= 16; queries /= 2)
            if (flash_shared_bytes(dh, queries, keys) <= limit_bytes)
                return {dh, queries, keys, flash_shared_bytes(dh, queries, keys)};
    return {};
}
// The tiles launch_attention_flash uses for head_dim on this device (its
// shared-memory limit queried once); a plab::Error when head_dim is outside
// 1..kFlashMaxHeadDim or the device has under 64 KiB a block.
FlashTiles flash_tiles(int head_dim);
// A call of at most kFlashDecodeQueries queries (a decode step, a small
// chunk) takes a 16-query tile with flash_tiles' key tile: each thread then
// holds 1 query row instead of 4, where 3 of the 4 would be past the call's
// queries. The key tile, and so every row's bits, are flash_tiles' own (a
// row's sums do not depend on the query tile).
constexpr int kFlashDecodeQueries = 16;
constexpr FlashTiles flash_decode_tiles(const FlashTiles& prefill) {
    return {prefill.head_dim, kFlashDecodeQueries, prefill.keys,
            flash_shared_bytes(prefill.head_dim, kFlashDecodeQueries, prefill.keys)};
}
// The tiles of a call of n_queries queries: flash_tiles(head_dim), or its
// decode tiles for n_queries <= kFlashDecodeQueries.
FlashTiles flash_tiles(int head_dim, int n_queries);

// Key segments (a decode attention that fills the device). A row's
// keys are folded in fixed, absolute segments of kFlashSegmentKeys (keys
// 0-255, 256-511, ...), each from a fresh running max and sums, and the
// segments' results are merged in order, one fixed expression
// (attention_flash_kernel.cuh's SegmentMerge). A prefill block merges its segments one
// after another. A decode call (at most kFlashDecodeQueries queries) whose keys
// span several segments gives each segment a block of its own, which writes
// its partial result (m, l, the Dh outputs) to device memory, and a second
// launch merges them in the same order with the same expressions: the same
// bits, and segments x heads blocks at work instead of heads. A multiple of
// two 64-key tiles (both warp groups), so segments start on tile pairs.
constexpr int kFlashSegmentKeys = 256;
static_assert(kFlashSegmentKeys % (2 * 64) == 0);
// A decode call split over key segments: where the partial results go
// (flash_partial_floats of them) and how many segments the launch covers
// (segments past the call's keys add nothing). partials == nullptr: no split.
struct FlashSplit {
    float* partials = nullptr;
    int segments = 1;
};
constexpr int flash_segments(long long n_keys) {
    return static_cast<int>((n_keys + kFlashSegmentKeys - 1) / kFlashSegmentKeys);
}
constexpr long long flash_partial_floats(int segments, int n_queries, int n_heads, int head_dim) {
    return static_cast<long long>(segments) * n_queries * n_heads * (2 + head_dim);
}
// A prefill call (more than kFlashDecodeQueries queries) past 256 keys keeps
// each row's running max and denominator between segments in device memory
// (launch_attention_flash's `totals`): this many floats.
long long flash_total_floats(int head_dim, int n_queries, int n_heads);

// out (C, D) = table (V, D) rows tokens[0..C)
__global__ void embed_kernel(float* out, const float* table, const int32_t* tokens, int n_tokens,
                             int dim);

// out, x (R, D); weight (D). grid R blocks.
__global__ void rmsnorm_ref_kernel(float* out, const float* x, const float* weight, int dim,
                                   float eps);
__global__ void rmsnorm_fast_kernel(float* out, const float* x, const float* weight, int dim,
                                    float eps);
// x += y, then out = rmsnorm_fast(x): one launch, rmsnorm_fast_kernel's bits
// (launched with the same block size). x, y, out (R, D). grid R blocks.
__global__ void add_rmsnorm_fast_kernel(float* x, const float* y, float* out, const float* weight,
                                        int dim, float eps);

// out (M, N) = x (M, K) · w (N, K)ᵀ, the ladder's rungs in order.
// matmul_naive_kernel over blocks of 256 outputs (one thread each).
void launch_matmul_naive(float* out, const float* x, const float* w, int m, int n, int k);
__global__ void matmul_tiled_kernel(float* out, const float* x, const float* w, int m, int n,
                                    int k);
// matmul_tiled_kernel over a grid of 16x16 output tiles.
void launch_matmul_tiled(float* out, const float* x, const float* w, int m, int n, int k);
__global__ void matmul_blocked_ref_kernel(float* out, const float* x, const float* w, int m, int n,
                                          int k);
// matmul_blocked_ref_kernel over a grid of 64x64 output tiles (gpu-ref's matmul).
void launch_matmul_blocked_ref(float* out, const float* x, const float* w, int m, int n, int k);
// The output tile of one matmul_blocked block: 128x128, 128x64 or 64x64.
struct MatmulTile {
    int rows = 0, cols = 0;
};
// Whether gpu's matmul takes matmul_blocked for an m x n product on this
// device (else matmul_tiled): 64+ rows, and 64x64 tiles for at least an eighth
// of the multiprocessors (matmul_blocked.cu says why).
bool matmul_blocked_pays(int m, int n);
// The tile launch_matmul_blocked uses for an m x n product on this device.
MatmulTile matmul_blocked_tile(int m, int n);
// matmul_blocked_kernel with its tile chosen for the shape and the device.
void launch_matmul_blocked(float* out, const float* x, const float* w, int m, int n, int k);
// Products that read the same x (Q, K and V; gate and up): out[p] (m, n[p]) =
// x (m, k) · w[p] (n[p], k)ᵀ in one matmul_blocked launch, the parts' column
// tiles side by side in its grid (Backend::matmul_parts on the gpu backend).
constexpr int kMaxMatmulParts = 3;
struct MatmulParts {
    float* out[kMaxMatmulParts] = {};
    const float* w[kMaxMatmulParts] = {};
    int n[kMaxMatmulParts] = {};
    int count = 0;
    int n_total() const {
        int total = 0;
        for (int p = 0; p < count; ++p) total += n[p];
        return total;
    }
    // One product alone: out (m, n) = x · w (n, k)ᵀ.
    static MatmulParts one(float* out, const float* w, int n) {
        MatmulParts parts;
        parts.out[0] = out;
        parts.w[0] = w;
        parts.n[0] = n;
        parts.count = 1;
        return parts;
    }
};
// Where a block of a parts launch works: the parts' column tiles lie side by
// side along grid.x (Q's, then K's, then V's), `tile_cols` outputs wide; the
// block's part (its out, w and n) and its tile within that part. The same for
// every thread of the block; selects, not an indexed array (which would put
// the parameters in local memory). matmul_blocked and matmul_rows share it.
struct PartTile {
    float* out;
    const float* w;
    int n;
    int tile;
};
__device__ __forceinline__ PartTile part_tile(const MatmulParts& parts, int tile, int tile_cols) {
    int part = 0;
    PLAB_UNROLL
    for (int p = 0; p + 1 < kMaxMatmulParts; ++p) {
        const int part_tiles = (parts.n[p] + tile_cols - 1) / tile_cols;
        if (part == p && p + 1 < parts.count && tile >= part_tiles) {
            tile -= part_tiles;
            part = p + 1;
        }
    }
    PartTile t{parts.out[0], parts.w[0], parts.n[0], tile};
    PLAB_UNROLL
    for (int p = 1; p < kMaxMatmulParts; ++p) {
        if (part == p) {
            t.out = parts.out[p];
            t.w = parts.w[p];
            t.n = parts.n[p];
        }
    }
    return t;
}
// The tile is chosen for m x n_total(); a part's outputs get the bits of its
// own launch_matmul_blocked (one k-order chain each, whatever the tile).
void launch_matmul_blocked_parts(const float* x, int m, int k, const MatmulParts& parts);

// One-row products (matmul_rows.cu): a decode step's 1..kRowsMax rows, each
// output one k-order chain like matmul_tiled (the same bits), its weight rows
// streamed through shared memory by the whole block.
constexpr int kRowsMax = 8;
// Whether gpu's products of m rows take matmul_rows.
bool matmul_rows_pays(int m);
// The parts side by side in one launch, as launch_matmul_blocked_parts.
void launch_matmul_rows_parts(const float* x, int m, int k, const MatmulParts& parts);
// out (m, f) = silu(x · w_gateᵀ) * (x · w_upᵀ): gate and up in the same
// block, SwiGLU as the epilogue (strict_swiglu on the two chains).
void launch_matmul_rows_swiglu(float* out, const float* x, const float* w_gate, const float* w_up,
                               int m, int f, int k);

// x (C, nh, Dh) rotated in place; cos, sin (max_seq_len, Dh/2). Row r is at
// position positions[r] (a batched step: rows of different sequences), or at
// pos0 + r when positions is null; last_position: the largest of them.
__global__ void rope_kernel(float* x, int rows, int n_heads, int head_dim, int pos0,
                            const int32_t* positions, const float* cos, const float* sin);
void launch_rope(float* x, int rows, int n_heads, int head_dim, int pos0, const int32_t* positions,
                 int last_position, const float* cos, const float* sin);

// RoPE of q (rows, n_heads, Dh) and k (rows, n_kv_heads, Dh) in place, and
// k, v appended to their slots of the pools, in one launch (rope_kv_append.cu).
// Row r is at positions[r], or pos0 + r when positions is null.
struct RopeKvAppendArgs {
    float* q = nullptr;
    float* k = nullptr;
    const float* v = nullptr;
    float* k_pool = nullptr;
    float* v_pool = nullptr;
    const int32_t* slots = nullptr;
    const int32_t* positions = nullptr;
    const float* cos = nullptr;
    const float* sin = nullptr;
    int rows = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, pos0 = 0;
    int unused = 0;  // the tail padding, named: a step graph compares these bytes
};
// No padding: a step graph compares a launch's argument bytes with the last
// step's (simt_record.h), and padding holds whatever was on the stack.
static_assert(sizeof(RopeKvAppendArgs) == 9 * sizeof(void*) + 6 * sizeof(int));
__global__ void rope_kv_append_kernel(RopeKvAppendArgs a);
void launch_rope_kv_append(const RopeKvAppendArgs& a, int last_position);

// k_pool, v_pool (slots, row_size); k, v (C, row_size); slots (C)
__global__ void kv_append_kernel(float* k_pool, float* v_pool, const float* k, const float* v,
                                 const int32_t* slots, int n_rows, int row_size);

// out, q (C, H, Dh); pools (num_blocks·B, Hkv·Dh); block_table (blocks of the sequence)
__global__ void attention_ref_kernel(float* out, const float* q, const float* k_pool,
                                     const float* v_pool, const int32_t* block_table,
                                     AttentionShape s);
// probs, scores_out (C, pos0 + C) of one head; masked cells 0 and -inf; scores_out may be null
__global__ void attention_probs_kernel(float* probs, float* scores_out, const float* q,
                                       const float* k_pool, const int32_t* block_table,
                                       AttentionShape s, int head);
// scores_bytes: the dynamic shared memory, (pos0 + C) floats, sized by the caller
void launch_attention_ref(float* out, const float* q, const float* k_pool, const float* v_pool,
                          const int32_t* block_table, const AttentionShape& s,
                          std::size_t scores_bytes);
void launch_attention_probs(float* probs, float* scores_out, const float* q, const float* k_pool,
                            const int32_t* block_table, const AttentionShape& s, int head,
                            std::size_t scores_bytes);
// attention_flash_kernel<Dh, queries, keys, decode> with its launch configuration
// (grid, block, the tiles of flash_tiles, the shared-memory opt-in once per
// instantiation, the Dh dispatch); out, q, pools, block_table as
// attention_ref. tile_counts (3): key tiles skipped (empty), partial, full —
// added to, never reset here. Returns the tiles it used. A head_dim outside
// 1..kFlashMaxHeadDim is a plab::Error naming the range. pos0_at: where the
// kernel reads s.pos0 from device memory (a step graph's launch), or null.
// split: a decode call's key segments, one block each, then the merge launch
// (only for calls of at most kFlashDecodeQueries queries; such a call whose
// keys span several segments must be split). totals: a prefill call's running
// totals (flash_total_floats; needed past 256 keys). out and q must not
// overlap (a row's total over several segments waits in out).
FlashTiles launch_attention_flash(float* out, const float* q, const float* k_pool,
                                  const float* v_pool, const int32_t* block_table,
                                  const AttentionShape& s, unsigned long long* tile_counts,
                                  const int32_t* pos0_at = nullptr, FlashSplit split = {},
                                  float* totals = nullptr);

// The attention ladder's first rungs (attention_ladder.h), arguments as attention_ref's.
void launch_attention_naive(float* out, const float* q, const float* k_pool, const float* v_pool,
                            const int32_t* block_table, const AttentionShape& s);
void launch_attention_online(float* out, const float* q, const float* k_pool, const float* v_pool,
                             const int32_t* block_table, const AttentionShape& s);
void launch_attention_tiled(float* out, const float* q, const float* k_pool, const float* v_pool,
                            const int32_t* block_table, const AttentionShape& s);

__global__ void swiglu_kernel(float* out, const float* gate, const float* up, long long n);
__global__ void add_kernel(float* x, const float* y, long long n);
__global__ void fill_kernel(float* x, long long n, float value);

// result[r] = index of the largest of row r of x (rows, n), lowest on ties; grid: one block a row
__global__ void argmax_ref_kernel(int32_t* result, const float* x, long long n);
__global__ void argmax_fast_kernel(int32_t* result, const float* x, long long n);

// Blocks needed to give one thread to each of n items.
inline unsigned blocks_for(long long n, int threads) {
    return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace plab::PLAB_SIMT_NS
