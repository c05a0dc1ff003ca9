// Strict math: the few float operations whose exact bits every reference
// backend must share, on the CPU and on the GPU.
//
// What it teaches: "bitwise identical across devices" is not magic. IEEE-754
// makes +, -, *, / and sqrt correctly rounded everywhere; what differs between
// machines is (1) the *order* of a sum, (2) fused multiply-add contraction,
// which skips one rounding, and (3) library functions such as expf, which each
// vendor approximates differently. So the reference backends (cpu-ref,
// gpu-ref) sum in one fixed order, multiply and add through strict_mul /
// strict_add (on a GPU: __fmul_rn / __fadd_rn, which nvcc never fuses; on the
// CPU the project compiles with -ffp-contract=off), and call strict_expf below
// instead of the library's expf.
//
// Left out on purpose: NaN propagation rules, float denormal modes other than
// IEEE (no --use_fast_math, no -ffast-math anywhere in the project).
// Lesson: lessons/04-bitwise-equivalence.md.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/hd.h"

namespace plab {

PLAB_HD inline float strict_mul(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

PLAB_HD inline float strict_add(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

PLAB_HD inline float strict_sub(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

PLAB_HD inline float strict_div(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}

PLAB_HD inline float strict_sqrt(float a) {
#if defined(__CUDA_ARCH__)
    return __fsqrt_rn(a);
#else
    return std::sqrt(a);
#endif
}

PLAB_HD inline float bits_to_float(std::uint32_t bits) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(bits);
#else
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
#endif
}

// exp(x) for float, written out so that every backend gets the same bits.
//
// Cody-Waite range reduction: x = n*ln2 + r with |r| <= ln2/2, then
// exp(x) = 2^n * exp(r). ln2 is split in a high part with few mantissa bits
// (so n*ln2_hi is exact for |n| < 2^9) and a low correction. exp(r) is a
// degree-7 Taylor polynomial in Horner form: its truncation error r^8/8! is
// below 5e-9 relative, under half an ulp of a float. Measured against the
// double-precision exp: max error 2 ulp on [-87, 88] (tests/engine/
// test_strict_math.cpp). 2^n is built from its bits; near the bottom of the
// float range it is applied in two steps, so the one rounding into a
// subnormal happens last.
PLAB_HD inline float strict_expf(float x) {
    const float kLog2e = 1.44269504088896341f;
    const float kLn2Hi = 0.693145751953125f;               // 0x3f317200: 16 significant bits
    const float kLn2Lo = 1.428606765330187045e-06f;        // ln2 - kLn2Hi
    if (!(x == x)) return x;                               // NaN stays NaN
    if (x > 88.72283f) return bits_to_float(0x7f800000u);  // +inf
    if (x < -103.972084f) return 0.0f;                     // below half the smallest subnormal
    const float n = std::floor(strict_add(strict_mul(x, kLog2e), 0.5f));
    const float r = strict_sub(strict_sub(x, strict_mul(n, kLn2Hi)), strict_mul(n, kLn2Lo));
    float p = 1.0f / 5040.0f;
    p = strict_add(strict_mul(p, r), 1.0f / 720.0f);
    p = strict_add(strict_mul(p, r), 1.0f / 120.0f);
    p = strict_add(strict_mul(p, r), 1.0f / 24.0f);
    p = strict_add(strict_mul(p, r), 1.0f / 6.0f);
    p = strict_add(strict_mul(p, r), 0.5f);
    p = strict_add(strict_mul(p, r), 1.0f);
    p = strict_add(strict_mul(p, r), 1.0f);
    const int e = static_cast<int>(n);
    if (e < -125) {
        const float high = bits_to_float(static_cast<std::uint32_t>(e + 64 + 127) << 23);
        return strict_mul(strict_mul(p, high), bits_to_float(std::uint32_t(127 - 64) << 23));
    }
    if (e > 127)
        return strict_mul(strict_mul(p, 2.0f),
                          bits_to_float(static_cast<std::uint32_t>(e - 1 + 127) << 23));
    return strict_mul(p, bits_to_float(static_cast<std::uint32_t>(e + 127) << 23));
}

// sum_{i<n} a[i]*b[i], left to right from 0.0f: the one dot-product order of
// the reference backends (matmul rows, attention scores).
// (A, B: pointers to float; a template so that a kernel may pass the
// emulator's checked pointer into shared memory, kernels/simt/simt_checked.h.)
template <typename A, typename B>
PLAB_HD inline float strict_dot(A a, B b, int n) {
    float acc = 0.0f;
    for (int i = 0; i < n; ++i) acc = strict_add(acc, strict_mul(a[i], b[i]));
    return acc;
}

// SiLU(g) * u, the SwiGLU gate of the Llama MLP (Shazeer 2020).
PLAB_HD inline float strict_swiglu(float g, float u) {
    const float silu = strict_div(g, strict_add(1.0f, strict_expf(-g)));
    return strict_mul(silu, u);
}

// 1 / sqrt(mean(x^2) + eps) for RMSNorm (Zhang & Sennrich 2019), given the
// sum of squares taken in index order.
PLAB_HD inline float strict_rms_inverse(float sum_sq, int n, float eps) {
    const float mean = strict_div(sum_sq, static_cast<float>(n));
    return strict_div(1.0f, strict_sqrt(strict_add(mean, eps)));
}

// tanh(x) for float from strict_expf, the same bits on every backend (used by
// tanh soft-capping, Gemma 2; core/mask.h). Near 0 the exp form
// 1 - 2/(e^2x + 1) would cancel away the small result, so |x| < 0.5 uses the
// odd Taylor series x - x^3/3 + 2x^5/15 - ... up to x^17 (truncation below
// 1e-8 relative there); beyond, (1 - e^-2|x|) / (1 + e^-2|x|) keeps e^-2|x| <= 0.37,
// so the subtraction loses at most a bit or two.
PLAB_HD inline float strict_tanhf(float x) {
    if (!(x == x)) return x;  // NaN stays NaN
    const float ax = x < 0.0f ? -x : x;
    float t;
    if (ax < 0.5f) {
        const float x2 = strict_mul(x, x);
        float p = 6404582.0f / 10854718875.0f;
        p = strict_sub(929569.0f / 638512875.0f, strict_mul(p, x2));
        p = strict_sub(21844.0f / 6081075.0f, strict_mul(p, x2));
        p = strict_sub(1382.0f / 155925.0f, strict_mul(p, x2));
        p = strict_sub(62.0f / 2835.0f, strict_mul(p, x2));
        p = strict_sub(17.0f / 315.0f, strict_mul(p, x2));
        p = strict_sub(2.0f / 15.0f, strict_mul(p, x2));
        p = strict_sub(1.0f / 3.0f, strict_mul(p, x2));
        p = strict_sub(1.0f, strict_mul(p, x2));
        return strict_mul(x, p);
    }
    const float e = strict_expf(strict_mul(-2.0f, ax));
    t = strict_div(strict_sub(1.0f, e), strict_add(1.0f, e));
    return x < 0.0f ? -t : t;
}

}  // namespace plab
