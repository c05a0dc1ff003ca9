// A tiled attention walk as one list of steps (the viewer's flash scene, lesson
// 17): which key tile a kernel folds into which query rows, in the order it
// takes them, and each row's online-softmax state (core/online_softmax.h)
// after the step. The toy's walk (`plab flash`) and a model head's walk in the
// `gpu` kernel's order (`plab flash --model`) are both laid out this way, so
// one scene draws either; nothing here is recomputed, only arranged.
#pragma once

#include <string>
#include <vector>

#include "core/mask.h"
#include "toy/flash_head.h"
#include "toy/flash_toy.h"
#include "toy/toy.h"

namespace plab {

// One query row's state after a step folded a tile into it.
struct FlashWalkRow {
    int query = 0;          // its position in the prompt
    float m_old = 0;        // the running max before (-inf: no key seen yet)
    float m = 0;            // and after
    float rescale = 0;      // exp(m_old - m): what l and acc were multiplied by
    float l = 0;            // the running denominator after
    float out = 0;          // acc / l so far (the first output component where Dh > 1)
    bool rescaled = false;  // a later tile raised the max (rescale < 1, not the first tile)
};

// One (query tile × key tile) a kernel took: skipped when the mask leaves it empty.
struct FlashWalkStep {
    int query_lo = 0, query_hi = 0;  // the rows (positions) of the query tile
    int key_lo = 0, key_hi = 0;      // the key tile's keys
    TileClass kind = TileClass::full;
    int group = 0;                   // the kernel's warp group that folded it (0 on the toy)
    std::vector<FlashWalkRow> rows;  // the rows it changed (none when empty)
};

struct FlashWalk {
    std::string source;  // "toy" or "layer L, head H": what was walked
    std::string mask = "causal";
    int n_queries = 0, n_keys = 0;  // positions 0..n-1 both
    int key_tile = 0, query_tile = 0;
    std::vector<float> scores;      // (n_queries, n_keys): s = q·k/sqrt(Dh), -inf where masked
    std::vector<int> chunk_starts;  // the chunks' first positions (0 first)
    std::vector<FlashWalkStep> steps;
    std::vector<float> output;    // (n_queries): the walk's result (component 0)
    std::vector<float> full;      // (n_queries): the whole softmax's (the reference)
    std::vector<long long> ulps;  // (n_queries): floats between the two (0: same bits)
    int rescales = 0, skipped = 0;
};

// The toy's walk (run_flash_toy) as steps: each query a query tile of one row,
// its tiles in order. chunk_starts from `chunk_starts` (the toy's plan).
FlashWalk flash_walk_of(const FlashToyRun& run, const ToyInput& input,
                        const std::vector<int>& chunk_starts = {0});

// A model head's walk (run_flash_head) as steps: each (query tile × key tile)
// in the kernel's order, skipped ones (empty, or never reached) with no rows.
// A row's state is its warp group's (the two groups merge at each 256-key
// segment's end); `out` is that group's acc / l, first component; outputs
// and the whole softmax are first components too.
FlashWalk flash_walk_of(const FlashHeadRun& run);

}  // namespace plab
