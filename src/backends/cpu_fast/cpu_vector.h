// Element-wise math and row sums for the fast CPU backend, in vector lanes,
// with the same bits for an element wherever it sits in a buffer.
//
// What it teaches: Eigen's `array.exp()` on a buffer computes the aligned
// middle in vector registers (a polynomial) but the unaligned head and the
// tail one scalar at a time (the C library's expf), and the two round
// differently. Where a token's row starts in the buffer depends on the chunk
// it was prefilled in, so the same token's value could change with the chunk
// plan. Here every element goes through the vector code: a partial last vector
// is padded, computed, and only its real elements copied back.
//
// Row sums (a softmax's denominator) add element j into lane j % lanes() in
// increasing j, then add the lanes in one fixed tree: so a sum over keys
// [lo, hi) equals the sum over any wider range whose extra elements are 0,
// provided lo is a multiple of lanes() (keys are counted from position 0).
#pragma once

#include <cstddef>

namespace plab::cpu_vector {

// out[i] = silu(gate[i]) * up[i] = gate / (1 + exp(-gate)) * up.
void silu_mul(float* out, const float* gate, const float* up, std::size_t n);

// out[i] = x[i] * inv * w[i], inv = 1 / sqrt(sum(x²) / n + eps): RMSNorm of one
// row, the sum of squares in the lane order above (fused multiply-adds), so
// a row's bits do not depend on which chunk or step it is in.
void rmsnorm_row(float* out, const float* x, const float* w, int n, float eps);

// x[i] += y[i] (the residual stream), then out = the RMSNorm of the new x:
// the same bits as an add followed by rmsnorm_row, in one pass over the row
// while it is in L1 (the sum of squares is taken as each sum is stored).
void add_rmsnorm_row(float* x, const float* y, float* out, const float* w, int n, float eps);

// Largest of row[0, n); -inf when every element is -inf.
float row_max(const float* row, int n);

// Index of the largest of row[0, n), the lowest among equal maxima: greedy
// decoding's rule, the index cpu-ref's scalar scan gives. Two passes in
// vector lanes: the maximum (exact in any order), then the first vector
// holding it. -1 for a row holding a NaN, where a lane-wise maximum is not
// that scan's answer: the caller asks the scan itself.
int argmax(const float* row, std::size_t n);

// row[j] = exp(row[j]·scale - max·scale) (exactly 0 where row[j] is -inf: a
// masked key), and returns the sum of the new row in the lane order above. n
// need not be a multiple of lanes(); row must start at an element whose index
// is one. With max = row_max(row) and scale > 0, max·scale is the largest
// row[j]·scale (rounding is monotonic), so this is the softmax numerator of
// the scaled row, the scale applied in the same pass, not one of its own.
float exp_and_sum(float* row, int n, float max, float scale);

}  // namespace plab::cpu_vector
