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
// Under a mask (`--mask`), each tile is first classified as the kernels do it
// (Mask::classify_tile): an empty tile is skipped — never loaded, nothing added —
// a full one is taken without asking the mask, a partial one key by key.
// Left out: Dh above 1.
#pragma once

#include <string>
#include <vector>

#include "core/backend.h"
#include "core/mask.h"
#include "toy/toy.h"

namespace plab {

// One key tile folded into one query's state.
struct FlashTile {
    int tile = 0;                      // its index: keys tile*N .. tile*N+N-1
    int key_lo = 0, key_hi = 0;        // the tile's keys (in the prompt)
    TileClass kind = TileClass::full;  // as the mask classifies it for this query
    std::vector<int> keys;             // the keys the query sees (none when empty)
    std::vector<float> scores;  // s_j = q_p * k_j / sqrt(Dh) (then the mask's modifiers), j in keys
    float m_old = 0, m = 0;     // the running max before and after (m_old -inf: first tile)
    float rescale = 0;          // exp(m_old - m): what l and acc were multiplied by
    float l = 0, acc = 0;       // after the tile
};

struct FlashQuery {
    int position = 0;
    int key_lo = 0, key_hi = 0;    // the keys the mask lets it reach (causal: 0..position)
    std::vector<FlashTile> tiles;  // in the order the kernel takes them
    float output = 0;              // acc / l after the last tile
    float full = 0;                // the whole softmax's output (plab toy, cpu-ref)
    long long ulps = 0;            // floats between output and full (0: the same bits)
    std::string exact;             // "14/3 = mean of v0..v2" when the answer is a fraction
};

struct FlashToyRun {
    int tile_width = 0;
    std::string mask = "causal";  // the spec, as given
    std::vector<FlashQuery> queries;
    int rescales = 0;  // tiles after the first whose max raised m (rescale < 1)
    int skipped = 0;   // tiles the mask left empty: never taken
    bool all_bitwise = false;
};

// Walks every query of `input` over key tiles of `tile_width` (>= 1) under the
// mask `mask_spec` (runtime/mask_grammar.h; the toy has one head and no tokenizer),
// and compares each output with `reference` running the whole softmax (run_toy,
// full plan, the same mask). Throws plab::Error for a tile width below 1 or a bad mask.
FlashToyRun run_flash_toy(const ToyInput& input, int tile_width, Backend& reference,
                          const std::string& mask_spec = "causal");

}  // namespace plab
