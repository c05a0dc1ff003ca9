// Rotary position embedding (RoPE, Su et al. 2021), the one convention of the engine.
//
// What it teaches: position enters attention by rotating pairs of q/k
// components by an angle pos * theta^(-2i/Dh). Because a rotation by a and one
// by b give a dot product that depends only on a - b, attention scores see
// *relative* positions, and a key rotated once when it enters the KV cache
// never needs rotating again.
//
// Pairing: the engine pairs component i with i + Dh/2 ("half-split"), the
// Hugging Face Llama convention, so HF safetensors load as they are. llama2.c
// and Meta checkpoints pair (2i, 2i+1) ("interleaved"); their wq/wk rows are
// permuted on load/save (src/model/rope_permute.h), which gives the same logits.
//
// An odd head_dim leaves its last component unrotated (a "partial rotary"
// embedding, as GPT-NeoX's rotary_pct does for a fraction of the dims), so
// every Dh >= 1 works; the pairs are (i, i + Dh/2) for i < Dh/2, rounded down.
//
// The cos/sin tables are computed once on the host in double precision and
// rounded to float, then shared (uploaded) by every backend: no backend
// evaluates cos/sin itself, so none can disagree about them.
#pragma once

#include <vector>

#include "core/hd.h"
#include "core/strict_math.h"

namespace plab {

// cos and sin of pos * theta^(-2i/Dh). // (max_seq_len, Dh/2) row-major each
struct RopeTable {
    int max_seq_len = 0;
    int half_dim = 0;  // Dh / 2, rounded down
    std::vector<float> cos;
    std::vector<float> sin;
};

RopeTable make_rope_table(int max_seq_len, int head_dim, double theta);

// Rotates one pair (x0, x1) = (x[i], x[i + Dh/2]) by the angle whose cos and sin
// are given: the rotation written once (cpu-ref loops over a head's pairs,
// gpu-ref gives each pair its own thread).
PLAB_HD inline void rope_rotate_pair(float* x0, float* x1, float cos_i, float sin_i) {
    const float a = *x0;
    const float b = *x1;
    *x0 = strict_sub(strict_mul(a, cos_i), strict_mul(b, sin_i));
    *x1 = strict_add(strict_mul(a, sin_i), strict_mul(b, cos_i));
}

// Rotates one head's vector x (Dh floats) in place, given the table row of its position.
PLAB_HD inline void rope_rotate(float* x, const float* cos_row, const float* sin_row,
                                int half_dim) {
    for (int i = 0; i < half_dim; ++i) {
        rope_rotate_pair(x + i, x + i + half_dim, cos_row[i], sin_row[i]);
    }
}

}  // namespace plab
