#include "toy/flash_toy.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/online_softmax.h"
#include "core/strict_math.h"
#include "runtime/chunk_plan.h"
#include "toy/rounding.h"

namespace plab {
namespace {

// One query's walk: the tiles holding keys 0..p, each folded in with the
// online softmax, then one division.
FlashQuery walk_query(const ToyInput& in, int p, int width) {
    const float scale = 1.0f / std::sqrt(1.0f);  // 1/sqrt(Dh), Dh = 1
    FlashQuery q;
    q.position = p;
    OnlineSoftmax state;
    float acc = 0.0f;
    for (int t = 0; t * width <= p; ++t) {
        FlashTile tile;
        tile.tile = t;
        tile.key_lo = t * width;
        tile.key_hi = std::min(p, t * width + width - 1);  // the causal mask: keys <= p
        float tile_max = -INFINITY;
        for (int j = tile.key_lo; j <= tile.key_hi; ++j) {
            const float s = strict_mul(strict_mul(in.queries[p], in.keys[j]), scale);
            tile.scores.push_back(s);
            tile_max = s > tile_max ? s : tile_max;
        }
        tile.m_old = state.m;
        tile.rescale = state.begin_tile(tile_max);
        acc = strict_mul(acc, tile.rescale);
        for (int j = tile.key_lo; j <= tile.key_hi; ++j) {
            const float e = state.weight(tile.scores[std::size_t(j - tile.key_lo)]);
            acc = strict_add(acc, strict_mul(e, in.values[j]));
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

FlashToyRun run_flash_toy(const ToyInput& input, int tile_width, Backend& reference) {
    input.validate();
    PLAB_CHECK(tile_width >= 1,
               "--tile " << tile_width << " must be at least 1 (keys per tile; e.g. --tile 2)");
    const int t = input.n_tokens();
    const ToyRun full = run_toy(reference, input, parse_chunk_plan("full", t));
    FlashToyRun run;
    run.tile_width = tile_width;
    run.all_bitwise = true;
    for (int p = 0; p < t; ++p) {
        FlashQuery q = walk_query(input, p, tile_width);
        q.full = full.outputs[std::size_t(p)];
        q.ulps = ulps_between(q.output, q.full);
        q.exact = toy_exact_output(input, p);
        for (std::size_t i = 1; i < q.tiles.size(); ++i) run.rescales += q.tiles[i].rescale < 1;
        run.all_bitwise = run.all_bitwise && q.ulps == 0;
        run.queries.push_back(std::move(q));
    }
    return run;
}

}  // namespace plab
