// The `gpu` backend's flash attention order, on the CPU (`plab flash --model`,
// lesson 17): one query head's attention over key tiles exactly as
// kernels/attention_flash_kernel.cuh folds them, with every row's state after every
// tile kept. At the kernel's own tile its bits are the emulated kernel's (the
// emulator runs the kernel's expressions on this CPU, with this libm's expf;
// tests/engine/test_flash_head.cpp holds them together); at any other tile it
// is the same loop with other tiles, so other sums — within a tolerance of the
// whole softmax, not equal to it.
//
// The order, per query tile of `query_tile` rows (the kernel's block):
//   - keys in absolute segments of 256 (kernels.h kFlashSegmentKeys; a larger
//     multiple of 2·key_tile where 256 is not one), each folded from a fresh
//     running max and sums, merged into the row's total at the segment's end;
//   - inside a segment, key tiles in pairs: warp group 0 takes tiles 0, 2, 4,
//     ..., group 1 tiles 1, 3, 5, ..., each with its own m, l and acc; a tile
//     the mask leaves empty for the whole query tile (Mask::classify_tile) is
//     skipped, a full one is not masked, a partial one key by key;
//   - a row's l is spread over 8 lanes (lane t holds keys t, t+8, ... of each
//     tile), summed pairwise (4, 2, 1 apart) when the two groups merge;
//   - at the segment's end: m = max(m0, m1), each group scaled by exp(m_g - m),
//     group 0 first; segments merged with fmaf, as the kernel's SegmentMerge.
// Left out: rows past the chunk (the kernel's padding), which change no bit.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "core/mask.h"

namespace plab {

// The gpu kernel's key tile wherever shared memory holds 64 x 64 tiles (kernels.h,
// flash_tiles_for: every device from sm_80 on): the walk's tile when no kernel ran.
inline constexpr int kFlashKernelKeyTile = 64;

// One (query tile × key tile) the kernel takes, in its order.
struct FlashOrderTile {
    int chunk = 0, segment = 0;
    int pos_lo = 0, pos_hi = 0;  // the query tile's positions
    int key_lo = 0, key_hi = 0;  // the key tile's
    int group = 0;               // warp group 0 or 1
    TileClass kind = TileClass::empty;
    bool reached = true;  // false: past every key the tile's queries see: the loop ends first
};

// One row's state after one key tile its group folded (rows that saw no key of
// the tile are not listed: their state did not change).
struct FlashOrderState {
    int pos = 0, key_lo = 0, group = 0;
    float m_old = 0, m = 0;  // the group's running max before and after (-inf: none yet)
    float rescale = 0;       // exp(m_old - m)
    float l = 0;             // the group's denominator: its 8 lanes' shares, summed pairwise
    float acc0 = 0;          // the first component of the group's unnormalised output
};

struct FlashOrderInput {
    const float* q = nullptr;  // (n_queries, head_dim): the head's rows, after RoPE, unscaled
    const float* k = nullptr;  // (n_keys, head_dim): its KV head's keys, after RoPE
    const float* v = nullptr;  // (n_keys, head_dim)
    int n_queries = 0, pos0 = 0, n_keys = 0, head_dim = 0;
    int head = 0;     // the query head (the mask's ALiBi slope is per head)
    float scale = 0;  // 1/sqrt(Dh), as AttentionShape holds it
    Mask mask;
    int query_tile = 64, key_tile = 64;
    int chunk = 0;  // recorded in the tiles
};

struct FlashOrderResult {
    std::vector<FlashOrderTile> tiles;
    std::vector<FlashOrderState> states;
    std::vector<float> out;  // (n_queries, head_dim) of the last call
};

// A row's denominator from its 8 lanes' shares, added as the kernel's
// butterfly adds them (lanes 4 apart, then 2, then 1).
float flash_lane_sum(const std::array<float, 8>& shares);

// The segment width the walk uses at `key_tile`: 256 where two tiles divide it.
int flash_segment_keys(int key_tile);

// Appends the walk of one chunk (one kernel launch) to r's tiles and states,
// and sets r.out to its rows.
void flash_kernel_order(const FlashOrderInput& in, FlashOrderResult& r);

}  // namespace plab
