// FlashAttention by hand on the toy (`plab flash`, lesson 17): each query's keys
// taken one key tile at a time, in the order a tiled kernel takes them, with the
// online softmax's running max m, denominator l and unnormalised output acc
// recorded after every tile (core/online_softmax.h).
//
// What it teaches: the tiled softmax gives the whole softmax's answer because
// every tile that raises the max re-measures what came before by exp(m_old -
// m_new); and it gives the same *bits* only when the order of the operations
// is the same — one tile holding every key is the reference's order exactly.
// Key tiles are aligned to position 0 (tile t holds keys tN..tN+N-1), as the
// `gpu` backend's are, so a query sees the same tiles in every chunk plan.
// Left out: masks other than causal (the toy's keys 0..p), Dh above 1.
#pragma once

#include <string>
#include <vector>

#include "core/backend.h"
#include "toy/toy.h"

namespace plab {

// One key tile folded into one query's state.
struct FlashTile {
    int tile = 0;                // its index: keys tile*N .. tile*N+N-1
    int key_lo = 0, key_hi = 0;  // the keys of it the query sees
    std::vector<float> scores;   // s_j = q_p * k_j / sqrt(Dh), j = key_lo..key_hi
    float m_old = 0, m = 0;      // the running max before and after (m_old -inf: first tile)
    float rescale = 0;           // exp(m_old - m): what l and acc were multiplied by
    float l = 0, acc = 0;        // after the tile
};

struct FlashQuery {
    int position = 0;
    std::vector<FlashTile> tiles;  // in the order the kernel takes them
    float output = 0;              // acc / l after the last tile
    float full = 0;                // the whole softmax's output (plab toy, cpu-ref)
    long long ulps = 0;            // floats between output and full (0: the same bits)
    std::string exact;             // "14/3 = mean of v0..v2" when the answer is a fraction
};

struct FlashToyRun {
    int tile_width = 0;
    std::vector<FlashQuery> queries;
    int rescales = 0;  // tiles after the first whose max raised m (rescale < 1)
    bool all_bitwise = false;
};

// Walks every query of `input` over key tiles of `tile_width` (>= 1) under the
// causal mask, and compares each output with `reference` running the whole
// softmax (run_toy, full plan). Throws plab::Error for a tile width below 1.
FlashToyRun run_flash_toy(const ToyInput& input, int tile_width, Backend& reference);

}  // namespace plab
