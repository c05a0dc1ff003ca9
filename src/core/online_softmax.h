// The online softmax: attention over key tiles, one tile at a time, written
// once (the toy walk of `plab flash`, lesson 17).
//
// What it teaches: a query's softmax needs the max of all its scores before
// the first exponential (core/attention_math.h subtracts it), but a tiled
// kernel sees its keys one tile at a time. It keeps, per query, a running max
// m, a running denominator l = sum_j exp(s_j - m) and an unnormalised output
// acc = sum_j exp(s_j - m) v_j. When a tile raises the max from m_old to m_new,
// everything summed so far was measured against the old max: multiplying l and
// acc by exp(m_old - m_new) re-measures it against the new one. At the end
// out = acc / l, divided once. With one tile holding every key this is the
// reference's order exactly (one max, the sums in key order, one division), so
// the same bits; with several tiles the exponentials and sums are taken in a
// different order, so the last bits may differ (lesson 15).
// Left out: the value dimension beyond what a caller passes (acc is its array).
#pragma once

#include <cmath>

#include "core/hd.h"
#include "core/strict_math.h"

namespace plab {

// Per query: the running max, the running denominator. m starts at -inf (no key
// seen yet), so the first tile's rescale is exp(-inf) = 0: nothing to re-measure.
struct OnlineSoftmax {
    float m = -INFINITY;
    float l = 0.0f;

    // Folds in a tile whose largest score is `tile_max`: returns the rescale
    // factor exp(m_old - m_new) the caller multiplies acc by (l is rescaled here),
    // and leaves m at the new max. Add the tile's terms with weight() after it.
    PLAB_HD float begin_tile(float tile_max) {
        const float m_new = tile_max > m ? tile_max : m;
        const float rescale = m == -INFINITY ? 0.0f : strict_expf(strict_sub(m, m_new));
        m = m_new;
        l = strict_mul(l, rescale);
        return rescale;
    }
    // e_j = exp(s_j - m) of one key of the tile, against the max so far; it is
    // added to l here and, times v_j, to acc by the caller.
    PLAB_HD float weight(float score) {
        const float e = strict_expf(strict_sub(score, m));
        l = strict_add(l, e);
        return e;
    }
};

}  // namespace plab
