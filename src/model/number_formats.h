// Number formats of model files, and their conversion to float32, written once.
//
// What it teaches: a weight file stores numbers in fewer bits than the float32
// the engine computes in, and "loading" means widening them:
//   F16   IEEE half: 1 sign, 5 exponent, 10 mantissa bits (subnormals, inf, NaN)
//   BF16  the top 16 bits of a float32: same exponent range, 7 mantissa bits
//   Q8_0  ggml's 8-bit block format: 32 values share one F16 scale d; each is
//         stored as an int8 q and means d * q (34 bytes for 32 values)
// F16 and BF16 widen exactly; Q8_0 is lossy at quantisation time (the file
// holds d and q, not the original floats) but its dequantisation is exact
// arithmetic: float(d) * float(q), one rounding.
// Sources: IEEE 754-2008 binary16; ggml's docs/gguf.md and ggml-common.h
// (block_q8_0 { ggml_half d; int8_t qs[32]; }); dequantize_row_q8_0 in
// ggml-quants.c computes x = qs[j] * d in float.
#pragma once

#include <cstddef>
#include <cstdint>

namespace plab {

float f16_to_f32(std::uint16_t h);
float bf16_to_f32(std::uint16_t b);
// Round to nearest, ties to even, as numpy's astype(float16) and ggml's
// GGML_FP32_TO_FP16 do; overflow becomes inf, NaN stays NaN.
std::uint16_t f32_to_f16(float f);

constexpr std::size_t kQ8_0BlockValues = 32;
constexpr std::size_t kQ8_0BlockBytes = 2 + kQ8_0BlockValues;  // F16 scale + 32 int8
// Dequantises `n_blocks` consecutive Q8_0 blocks at `src` into 32·n_blocks floats.
void dequantize_q8_0(const char* src, std::size_t n_blocks, float* out);

}  // namespace plab
