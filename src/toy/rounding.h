// The reduction-order lab: why fast kernels differ in the last bits.
//
// What it teaches (lesson 15): float addition rounds after every add, so
// (a + b) + c and a + (b + c) can differ in the last bit. A kernel that splits
// a sum — into halves, into vector lanes, into tiles of 32 keys, into splits
// for more parallelism — fixes an order, and two kernels (or one kernel called
// with two shapes) that split differently give different bits. Three scenes:
//   1. one list of numbers added in several orders, with the bits of each sum;
//   2. the softmax denominator of the last query after 80 cached + 48 new keys,
//      with tiles of 32: a kernel that reduces the cached keys and the new keys
//      separately (tiles restart at the chunk's first key) against one that
//      appends the new keys first and reduces once over tiles aligned to key 0
//      — only the second gives chunked prefill the bits of full prefill;
//   3. split-K over the keys: a fixed *number* of splits moves the split
//      boundaries when the kernel picks another count (for a bigger batch, a
//      longer context), a fixed split *size* never does.
// The fast backends here are written the second way (backends/cpu_fast/cpu_gemm.h,
// kernels/attention_flash_kernel.cuh): key tiles and vector lanes aligned to
// absolute positions, so every chunk plan gives the same bits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace plab {

// One way of adding the same floats, and what it gave.
struct OrderedSum {
    std::string name;  // "left to right", "two halves", ...
    std::string how;   // the grouping, e.g. "(v0+..+v3) + (v4+..+v7)"
    float sum = 0;
};

// A sum cut into consecutive pieces ("tiles", "splits"), each added left to
// right, the pieces' sums then added left to right.
struct PieceSum {
    std::string name;
    std::vector<int> starts;  // first index of each piece; a piece ends where the next starts
    std::vector<float> pieces;
    float sum = 0;
};

// Scene 1: `values` in several orders; exact = the sum in double precision.
struct OrdersScene {
    std::vector<float> values;
    double exact = 0;
    std::vector<OrderedSum> orders;
};
OrdersScene orders_scene(const std::vector<float>& values);

// Scene 2: the last query's softmax denominator sum_j exp(s_j - max) over
// `cached` + `fresh` keys (scores random from `seed`), with key tiles of `tile`.
struct TilesScene {
    int cached = 0, fresh = 0, tile = 0;
    std::vector<float> weights;  // exp(s_j - max), j = 0 .. cached + fresh - 1
    PieceSum full;               // full prefill: every key in one chunk, tiles from key 0
    PieceSum separate;           // chunked, cache and new keys reduced apart
    PieceSum appended;           // chunked, new keys appended, tiles from key 0
};
TilesScene tiles_scene(int cached, int fresh, int tile, std::uint32_t seed);

// Scene 3: the same weights (n keys) summed with `counts` splits each
// (size ceil(n / count)) and with splits of `size` keys.
struct SplitsScene {
    int n = 0, size = 0;
    std::vector<PieceSum> by_count;  // one per count
    PieceSum by_size;
};
SplitsScene splits_scene(const std::vector<float>& weights, const std::vector<int>& counts,
                         int size);

// The pieces [starts[i], starts[i+1]) of `v`, each summed left to right, then
// the piece sums left to right.
PieceSum piece_sum(std::string name, const std::vector<float>& v, std::vector<int> starts);

// "0x3f800000": the 32 bits of f.
std::string float_bits(float f);
// How many representable floats lie between a and b (0: the same bits).
long long ulps_between(float a, float b);

}  // namespace plab
