#include "core/rope.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace plab {

RopeTable make_rope_table(int max_seq_len, int head_dim, double theta) {
    PLAB_ASSERT(max_seq_len > 0 && head_dim > 0 && theta > 1.0);
    RopeTable t;
    t.max_seq_len = max_seq_len;
    t.half_dim = head_dim / 2;
    // At least one column, so a table for Dh = 1 (nothing rotated) is not empty.
    t.cos.resize(static_cast<size_t>(max_seq_len) * std::max(t.half_dim, 1), 1.0f);
    t.sin.resize(t.cos.size());
    for (int pos = 0; pos < max_seq_len; ++pos) {
        for (int i = 0; i < t.half_dim; ++i) {
            const double freq = std::pow(theta, -2.0 * i / head_dim);
            const double angle = pos * freq;
            t.cos[static_cast<size_t>(pos) * t.half_dim + i] = static_cast<float>(std::cos(angle));
            t.sin[static_cast<size_t>(pos) * t.half_dim + i] = static_cast<float>(std::sin(angle));
        }
    }
    return t;
}

}  // namespace plab
