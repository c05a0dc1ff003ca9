// Seeded draws specified to the bit: the same seed gives the same workload,
// prompt, weights and grader case on every platform.
//
// Why not <random>'s distributions: the engines (std::mt19937_64, std::mt19937)
// are specified output for output, but std::uniform_int_distribution,
// std::normal_distribution, std::exponential_distribution, std::shuffle and
// std::sample are not — their algorithms are the library's choice, and
// libstdc++ (Linux), libc++ (clang, emscripten's web page) and MSVC draw
// different values from the same engine. The web page's serving scene drew
// other prompts than native from the very same flags.
//
// What is here is libstdc++ 12's algorithms, written out, so every seed the
// lessons show keeps giving what they show: Lemire's multiply-and-reject for
// integers, generate_canonical for reals, Marsaglia's polar method for the
// normal, and Fisher–Yates with two swap positions drawn at once. One change:
// the exponential's logarithm is log_specified (exact operations only), since
// libm's double log differs in the last bit between glibc and emscripten's
// musl (measured: 20 million logarithms hash differently; logf agrees).
// -ffp-contract=off (the top CMakeLists) keeps every a*b+c two roundings.
#pragma once

#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <utility>

namespace plab::random {

using Engine = std::mt19937_64;  // specified by the standard, draw for draw

// A real in [0, 1) from one draw (generate_canonical<Real, digits> when one
// draw holds enough bits, as for both Mersenne twisters): draw / 2^bits,
// kept below 1 when rounding carries it there.
template <class Real, class G>
Real canonical(G& g) {
    static_assert(G::min() == 0 && (G::max() == UINT64_MAX || G::max() == UINT32_MAX));
    const Real range = G::max() == UINT64_MAX ? Real(0x1p64) : Real(0x1p32);
    const Real r = Real(g()) / range;
    return r >= Real(1) ? std::nextafter(Real(1), Real(0)) : r;
}

// A double in [0, 1).
inline double unit(Engine& g) {
    return canonical<double>(g);
}

// A real in [lo, hi): canonical × (hi − lo) + lo, in Real's arithmetic.
template <class Real>
Real uniform(Engine& g, Real lo, Real hi) {
    return canonical<Real>(g) * (hi - lo) + lo;
}

// An integer in lo..hi (inclusive), unbiased: Lemire's multiply-and-reject
// (ACM TOMACS 29(1), 2019). The draw times the range, as 128 bits: the high
// 64 are the result, and the few draws whose low 64 fall below 2^64 mod range
// (which would favour some results) are drawn again.
inline std::int64_t uniform_int(Engine& g, std::int64_t lo, std::int64_t hi) {
    const std::uint64_t span = std::uint64_t(hi) - std::uint64_t(lo);
    if (span == UINT64_MAX) return std::int64_t(g());  // every 64-bit value
    const std::uint64_t range = span + 1;
    unsigned __int128 product = (unsigned __int128)g() * range;
    std::uint64_t low = std::uint64_t(product);
    if (low < range) {
        const std::uint64_t threshold = (0 - range) % range;  // 2^64 mod range
        while (low < threshold) {
            product = (unsigned __int128)g() * range;
            low = std::uint64_t(product);
        }
    }
    return std::int64_t(std::uint64_t(lo) + std::uint64_t(product >> 64));
}

// Normal draws with a mean and standard deviation: Marsaglia's polar method,
// which makes two at a time from a point drawn uniformly in the unit disc
// (the second is kept for the next call). Real float: logf and sqrtf, which
// agree to the bit between glibc and musl (see above).
template <class Real>
class Normal {
public:
    Normal(Real mean, Real stddev) : mean_(mean), stddev_(stddev) {}
    template <class G>
    Real operator()(G& g) {
        Real ret;
        if (saved_available_) {
            saved_available_ = false;
            ret = saved_;
        } else {
            Real x, y, r2;
            do {
                x = Real(2.0) * canonical<Real>(g) - 1.0;
                y = Real(2.0) * canonical<Real>(g) - 1.0;
                r2 = x * x + y * y;
            } while (r2 > 1.0 || r2 == 0.0);
            const Real mult = std::sqrt(-2 * std::log(r2) / r2);
            saved_ = x * mult;
            saved_available_ = true;
            ret = y * mult;
        }
        return ret * stddev_ + mean_;
    }

private:
    Real mean_, stddev_, saved_ = 0;
    bool saved_available_ = false;
};

// ln(x) for x > 0 from exact operations only: x = m·2^e with m in [√½, √2),
// then ln m = 2·atanh(z), z = (m−1)/(m+1), |z| < 0.172, summed to z^31
// (the next term is below 1e-25 of the sum). Within a few ulps of libm's.
inline double log_specified(double x) {
    int e = 0;
    double m = std::frexp(x, &e);  // m in [0.5, 1), exact
    if (m < 0.70710678118654752) {
        m *= 2;
        --e;
    }
    const double z = (m - 1) / (m + 1), z2 = z * z;
    double term = z, sum = 0;
    for (int k = 1; k <= 31; k += 2) {
        sum += term / k;
        term *= z2;
    }
    return 2 * sum + e * 0.69314718055994531;  // ln 2
}

// The gap between Poisson arrivals at `rate` per unit of time: exponential,
// by inverting its CDF at a uniform draw (1 − u is in (0, 1], never 0).
inline double exponential(Engine& g, double rate) {
    return -log_specified(1.0 - unit(g)) / rate;
}

// Fisher–Yates: every order equally likely. While n² fits in 64 bits, the
// swap positions of elements i and i+1 come from one draw in
// 0..(i+1)(i+2)−1, split by division (what libstdc++ does, halving the draws).
template <class It>
void shuffle(It first, It last, Engine& g) {
    const std::uint64_t n = std::uint64_t(last - first);
    if (n < 2) return;
    It i = first + 1;
    if (UINT64_MAX / n >= n) {
        if (n % 2 == 0) std::iter_swap(i++, first + uniform_int(g, 0, 1));
        while (i != last) {
            const std::uint64_t a = std::uint64_t(i - first) + 1, b = a + 1;
            const std::uint64_t x = std::uint64_t(uniform_int(g, 0, std::int64_t(a * b - 1)));
            std::iter_swap(i++, first + (x / b));
            std::iter_swap(i++, first + (x % b));
        }
        return;
    }
    for (; i != last; ++i) std::iter_swap(i, first + uniform_int(g, 0, i - first));
}

}  // namespace plab::random
