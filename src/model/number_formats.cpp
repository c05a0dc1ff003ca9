#include "model/number_formats.h"

#include <cstring>

namespace plab {

float f16_to_f32(std::uint16_t h) {
    const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
    const int exp = (h >> 10) & 0x1f;
    std::uint32_t mant = h & 0x3ffu;
    std::uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal half: normalise
            int e = -1;
            do {
                ++e;
                mant <<= 1;
            } while ((mant & 0x400u) == 0);
            bits = sign | std::uint32_t(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | mant << 13;
    } else {
        bits = sign | std::uint32_t(exp - 15 + 127) << 23 | mant << 13;
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

float bf16_to_f32(std::uint16_t b) {
    const std::uint32_t bits = std::uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

std::uint16_t f32_to_f16(float f) {
    std::uint32_t x;
    std::memcpy(&x, &f, 4);
    const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
    const std::uint32_t abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN: a quiet one
    if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: inf
    if (abs < 0x38800000u) {                        // below the smallest normal half
        if (abs < 0x33000000u) return sign;         // rounds to zero (<= 2^-25)
        // Subnormal half: the value in units of 2^-24, rounded half to even.
        const int e = static_cast<int>(abs >> 23);
        const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
        const int shift = 126 - e;  // 113 - e + 13: from float mantissa to 2^-24 units
        std::uint32_t q = mant >> shift;
        const std::uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) ++q;
        return sign | static_cast<std::uint16_t>(q);
    }
    // Normal: rebias the exponent, round the 13 dropped mantissa bits half to even
    // (a carry into the exponent is the right answer, up to inf).
    std::uint32_t h = ((abs >> 13) - (112u << 10));
    const std::uint32_t rem = abs & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return sign | static_cast<std::uint16_t>(h);
}

void dequantize_q8_0(const char* src, std::size_t n_blocks, float* out) {
    for (std::size_t b = 0; b < n_blocks; ++b) {
        const char* block = src + b * kQ8_0BlockBytes;
        std::uint16_t d16;
        std::memcpy(&d16, block, 2);
        const float d = f16_to_f32(d16);
        for (std::size_t j = 0; j < kQ8_0BlockValues; ++j) {
            const auto q = static_cast<std::int8_t>(block[2 + j]);
            out[b * kQ8_0BlockValues + j] = static_cast<float>(q) * d;
        }
    }
}

}  // namespace plab
