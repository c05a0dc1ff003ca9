#include "toy/flash_walk.h"

#include <cmath>

#include "core/strict_math.h"

namespace plab {

FlashWalk flash_walk_of(const FlashToyRun& run, const ToyInput& input,
                        const std::vector<int>& chunk_starts) {
    FlashWalk w;
    w.source = "toy";
    w.mask = run.mask;
    w.n_queries = w.n_keys = input.n_tokens();
    w.key_tile = run.tile_width;
    w.query_tile = 1;
    w.scores.assign(std::size_t(w.n_queries) * std::size_t(w.n_keys), -INFINITY);
    w.chunk_starts = chunk_starts;
    w.rescales = run.rescales;
    w.skipped = run.skipped;
    for (const FlashQuery& q : run.queries) {
        bool first = true;
        for (const FlashTile& tile : q.tiles) {
            FlashWalkStep step;
            step.query_lo = step.query_hi = q.position;
            step.key_lo = tile.key_lo;
            step.key_hi = tile.key_hi;
            step.kind = tile.kind;
            for (std::size_t i = 0; i < tile.keys.size(); ++i)
                w.scores[std::size_t(q.position) * std::size_t(w.n_keys) +
                         std::size_t(tile.keys[i])] = tile.scores[i];
            if (tile.kind != TileClass::empty) {
                FlashWalkRow row;
                row.query = q.position;
                row.m_old = tile.m_old;
                row.m = tile.m;
                row.rescale = tile.rescale;
                row.l = tile.l;
                row.out = strict_div(tile.acc, tile.l);
                row.rescaled = !first && tile.rescale < 1;
                first = false;
                step.rows.push_back(row);
            }
            w.steps.push_back(std::move(step));
        }
        w.output.push_back(q.output);
        w.full.push_back(q.full);
        w.ulps.push_back(q.ulps);
    }
    return w;
}

}  // namespace plab
