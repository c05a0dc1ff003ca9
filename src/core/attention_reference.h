// One head's whole softmax, as cpu-ref takes it (core/attention_math.h: the
// scores, one max, one sum in key order, one division per output component),
// on host arrays: the oracle of the attention and online_softmax graders and of
// `plab flash --layer`'s comparison. Written once so that "cpu-ref's answer"
// means the same expressions everywhere it is asked for.
#pragma once

#include <cmath>
#include <vector>

#include "core/attention_math.h"
#include "core/attention_shape.h"

namespace plab {

struct HeadSoftmax {
    std::vector<float> out;          // (T, Dh)
    std::vector<float> max_score;    // (T): each row's max
    std::vector<float> denominator;  // (T): each row's sum of exp(s - max)
    std::vector<float> scores;       // (T, T): masked cells -inf
};

// q (T, Dh) rows of one query head at positions 0..T-1; k, v (T, Dh) its KV
// head's keys and values; scores are q·k times `scale`, then the mask's
// modifiers for query head `head` (ALiBi's slope is per head).
inline HeadSoftmax head_softmax(const float* q, const float* k, const float* v, int t, int dh,
                                const Mask& mask, float scale, int head = 0) {
    AttentionShape s = attention_shape(t, 0, 1, 1, dh, t, mask);  // one block: slot = position
    s.scale = scale;
    const int block_table[1] = {0};
    const std::size_t n = static_cast<std::size_t>(t), w = static_cast<std::size_t>(dh);
    HeadSoftmax r;
    r.out.assign(n * w, 0.0f);
    r.scores.assign(n * n, -INFINITY);
    for (int p = 0; p < t; ++p) {
        float* scores = r.scores.data() + std::size_t(p) * n;
        const KeyRange kr = attention_key_range(s, p);
        for (int j = kr.lo; j <= kr.hi; ++j)
            scores[j] =
                attention_score_of(q + std::size_t(p) * w, k + std::size_t(j) * w, s, head, p, j);
        const SoftmaxStats st = attention_softmax_stats(scores, s, p);
        r.max_score.push_back(st.max_score);
        r.denominator.push_back(st.denominator);
        for (int d = 0; d < dh; ++d)
            r.out[std::size_t(p) * w + std::size_t(d)] =
                attention_output(scores, st, v, block_table, s, 0, p, d);
    }
    return r;
}

}  // namespace plab
