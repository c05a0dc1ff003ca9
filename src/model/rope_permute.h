// RoPE pairings and the q/k row permutation that converts between them.
//
// What it teaches: RoPE rotates *pairs* of a head's components, and two
// conventions choose the pairs differently:
//
//   // clang-format off
//   interleaved (llama2.c, Meta's original checkpoints):  (0,1) (2,3) (4,5) ...
//   half-split  (Hugging Face Llama, this engine):        (0,Dh/2) (1,Dh/2+1) ...
//   pair i rotates by the same angle pos * theta^(-2i/Dh) in both.
//   // clang-format on
//
// A checkpoint written for one convention runs correctly under the other if
// the rows of wq and wk (one row per q/k component) are reordered inside
// each head so that pair i lands where the other convention expects it:
//
//   half_split_row[s * Dh/2 + i] = interleaved_row[2 * i + s],   s in {0, 1}
//
// This is the permutation of Hugging Face's convert_llama_weights_to_hf.py.
// q·k is a sum over components, so permuting q and k the same way changes no
// score; v and wo are untouched. It is a pure reordering: converting there
// and back gives the same floats bit for bit.
//
// Left out: partial rotary (rotating only some components), RoPE scaling.
#pragma once

#include <cstddef>
#include <vector>

#include "core/error.h"

namespace plab {

// Reorders the rows of w: (n_heads·Dh, cols) row-major between the two
// pairings. Row (h, 2i+s) of the interleaved order is row (h, s·Dh/2 + i) of
// the half-split order, for s = 0, 1 (the two members of pair i).
inline std::vector<float> rope_rows_permute(const std::vector<float>& w, int n_heads, int head_dim,
                                            int cols, bool to_half_split) {
    PLAB_CHECK(head_dim % 2 == 0, "RoPE needs an even head_dim, got " << head_dim);
    const std::size_t c = static_cast<std::size_t>(cols);
    PLAB_ASSERT(w.size() == static_cast<std::size_t>(n_heads) * head_dim * c);
    std::vector<float> out(w.size());
    const int half = head_dim / 2;
    for (int h = 0; h < n_heads; ++h) {
        for (int s = 0; s < 2; ++s) {
            for (int i = 0; i < half; ++i) {
                const std::size_t hs = static_cast<std::size_t>(h * head_dim + s * half + i);
                const std::size_t il = static_cast<std::size_t>(h * head_dim + 2 * i + s);
                const std::size_t dst = to_half_split ? hs : il, src = to_half_split ? il : hs;
                for (std::size_t k = 0; k < c; ++k) out[dst * c + k] = w[src * c + k];
            }
        }
    }
    return out;
}

// Interleaved (llama2.c, Meta) rows -> half-split (Hugging Face, this engine) rows.
inline std::vector<float> rope_rows_interleaved_to_half(const std::vector<float>& w, int n_heads,
                                                        int head_dim, int cols) {
    return rope_rows_permute(w, n_heads, head_dim, cols, true);
}

// The inverse: half-split rows -> interleaved rows.
inline std::vector<float> rope_rows_half_to_interleaved(const std::vector<float>& w, int n_heads,
                                                        int head_dim, int cols) {
    return rope_rows_permute(w, n_heads, head_dim, cols, false);
}

}  // namespace plab
