#include "toy/flash_toy.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/online_softmax.h"
#include "core/strict_math.h"
#include "runtime/chunk_plan.h"
#include "runtime/mask_grammar.h"
#include "toy/rounding.h"

namespace plab {
namespace {

// One tile of one query: which of its keys the query sees, as the kernels ask
// the mask (empty: none, and the tile is skipped; full: all, without asking).
void tile_keys(const Mask& mask, int p, FlashTile& tile) {
    tile.kind = mask.classify_tile(p, p, tile.key_lo, tile.key_hi);
    for (int j = tile.key_lo; j <= tile.key_hi; ++j)
        if (tile.kind == TileClass::full || (tile.kind == TileClass::partial && mask.visible(p, j)))
            tile.keys.push_back(j);
}

// One query's walk: every key tile in order, each visible one folded in with
// the online softmax, then one division.
FlashQuery walk_query(const ToyInput& in, int p, int width, const Mask& mask) {
    const float scale = 1.0f / std::sqrt(1.0f);  // 1/sqrt(Dh), Dh = 1
    const int t = in.n_tokens();
    FlashQuery q;
    q.position = p;
    OnlineSoftmax state;
    float acc = 0.0f;
    // The tiles the query's key range reaches (the loop bounds a kernel takes from
    // the mask); a tile inside it that the mask still hides is skipped.
    const KeyRange range = mask.key_range(p);
    const int last = std::min(t - 1, range.hi);
    q.key_lo = std::max(0, range.lo);
    q.key_hi = last;
    for (int k0 = std::max(0, range.lo) / width * width; k0 <= last; k0 += width) {
        FlashTile tile;
        tile.tile = k0 / width;
        tile.key_lo = k0;
        tile.key_hi = std::min(t - 1, k0 + width - 1);
        tile_keys(mask, p, tile);
        tile.m_old = tile.m = state.m;
        tile.l = state.l;
        tile.acc = acc;
        if (tile.kind == TileClass::empty) {  // never loaded: m, l and acc stay
            q.tiles.push_back(std::move(tile));
            continue;
        }
        float tile_max = -INFINITY;
        for (int j : tile.keys) {
            const float raw = strict_mul(strict_mul(in.queries[p], in.keys[j]), scale);
            const float s = mask.modify_score(raw, 0, p, j);
            tile.scores.push_back(s);
            tile_max = s > tile_max ? s : tile_max;
        }
        tile.rescale = state.begin_tile(tile_max);
        acc = strict_mul(acc, tile.rescale);
        for (std::size_t i = 0; i < tile.keys.size(); ++i) {
            const float e = state.weight(tile.scores[i]);
            acc = strict_add(acc, strict_mul(e, in.values[std::size_t(tile.keys[i])]));
        }
        tile.m = state.m;
        tile.l = state.l;
        tile.acc = acc;
        q.tiles.push_back(std::move(tile));
    }
    q.output = strict_div(acc, state.l);
    return q;
}

}  // namespace

FlashToyRun run_flash_toy(const ToyInput& input, int tile_width, Backend& reference,
                          const std::string& mask_spec) {
    input.validate();
    PLAB_CHECK(tile_width >= 1,
               "--tile " << tile_width << " must be at least 1 (keys per tile; e.g. --tile 2)");
    const int t = input.n_tokens();
    // The toy has no tokenizer (docs:bos cannot apply) and one head (ALiBi slope 1/256).
    const BoundMask bound = make_mask_one_head(mask_spec, t);
    const Mask mask = bound.view();
    const ToyRun full = run_toy(reference, input, parse_chunk_plan("full", t), mask);
    FlashToyRun run;
    run.tile_width = tile_width;
    run.mask = mask_spec;
    run.all_bitwise = true;
    for (int p = 0; p < t; ++p) {
        FlashQuery q = walk_query(input, p, tile_width, mask);
        q.full = full.outputs[std::size_t(p)];
        q.ulps = ulps_between(q.output, q.full);
        q.exact = toy_exact_output(input, p, mask);
        bool first = true;  // the first tile taken rescales from -inf: not counted
        for (const FlashTile& tile : q.tiles) {
            if (tile.kind == TileClass::empty) {
                ++run.skipped;
                continue;
            }
            run.rescales += !first && tile.rescale < 1;
            first = false;
        }
        run.all_bitwise = run.all_bitwise && q.ulps == 0;
        run.queries.push_back(std::move(q));
    }
    return run;
}

}  // namespace plab
