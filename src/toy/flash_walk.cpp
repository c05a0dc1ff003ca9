#include "toy/flash_walk.h"

#include <cmath>
#include <map>
#include <utility>

#include "core/strict_math.h"
#include "toy/rounding.h"

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

FlashWalk flash_walk_of(const FlashHeadRun& run) {
    FlashWalk w;
    w.source = "layer " + std::to_string(run.layer) + ", head " + std::to_string(run.head);
    w.mask = run.mask;
    w.n_queries = w.n_keys = run.n_tokens;
    w.key_tile = run.key_tile;
    w.query_tile = run.query_tile;
    w.scores = run.scores;
    w.chunk_starts = run.plan.starts();
    w.chunk_starts.pop_back();  // the chunks' first positions, not the end
    std::map<std::pair<int, int>, const FlashOrderState*> states;  // (key_lo, pos)
    for (const FlashOrderState& st : run.walk.states) states[{st.key_lo, st.pos}] = &st;
    for (const FlashOrderTile& t : run.walk.tiles) {
        FlashWalkStep step;
        step.query_lo = t.pos_lo;
        step.query_hi = t.pos_hi;
        step.key_lo = t.key_lo;
        step.key_hi = t.key_hi;
        step.kind = t.reached ? t.kind : TileClass::empty;
        step.group = t.group;
        w.skipped += step.kind == TileClass::empty;
        for (int p = t.pos_lo; t.reached && step.kind != TileClass::empty && p <= t.pos_hi; ++p) {
            const auto it = states.find({t.key_lo, p});
            if (it == states.end()) continue;  // the row sees no key of this tile
            const FlashOrderState& st = *it->second;
            FlashWalkRow row{p, st.m_old, st.m, st.rescale, st.l, strict_div(st.acc0, st.l)};
            row.rescaled = st.m_old != -INFINITY && st.rescale < 1.0f;
            w.rescales += row.rescaled;
            step.rows.push_back(row);
        }
        w.steps.push_back(std::move(step));
    }
    const std::size_t dh = std::size_t(run.head_dim);
    for (int p = 0; p < run.n_tokens; ++p) {
        w.output.push_back(run.output[std::size_t(p) * dh]);
        w.full.push_back(run.reference[std::size_t(p) * dh]);
        w.ulps.push_back(ulps_between(w.output.back(), w.full.back()));
    }
    return w;
}

}  // namespace plab
