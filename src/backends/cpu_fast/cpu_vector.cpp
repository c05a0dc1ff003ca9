#include "backends/cpu_fast/cpu_vector.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

namespace plab::cpu_vector {
namespace {

using Packet = Eigen::internal::packet_traits<float>::type;
constexpr int kLanes = Eigen::internal::packet_traits<float>::size;

// f on every whole vector of [0, n), then on the padded last one: the same
// vector instructions for every element. f(i, len) handles elements [i, i + len)
// with len == kLanes, reading and writing through `load`/`store` below.
template <class F>
void for_each_vector(std::size_t n, const F& f) {
    std::size_t i = 0;
    for (; i + kLanes <= n; i += kLanes) f(i, std::size_t(kLanes));
    if (i < n) f(i, n - i);
}

// A vector of len <= kLanes elements of p, the rest `pad`.
Packet load(const float* p, std::size_t len, float pad) {
    using namespace Eigen::internal;
    if (len == std::size_t(kLanes)) return ploadu<Packet>(p);
    alignas(64) float tmp[kLanes];
    std::fill(tmp, tmp + kLanes, pad);
    std::copy(p, p + len, tmp);
    return pload<Packet>(tmp);
}

void store(float* p, std::size_t len, const Packet& v) {
    using namespace Eigen::internal;
    if (len == std::size_t(kLanes)) return pstoreu(p, v);
    alignas(64) float tmp[kLanes];
    pstore(tmp, v);
    std::copy(tmp, tmp + len, p);
}

// out = x * inv * w with inv = 1 / sqrt(sum / n + eps), given x's sum of
// squares in lanes: the second half of RMSNorm, shared by both row functions.
void normalize_row(float* out, const float* x, const float* w, int n, float eps,
                   const Packet& sum) {
    using namespace Eigen::internal;
    const float inv = 1.0f / std::sqrt(predux(sum) / static_cast<float>(n) + eps);
    const Packet scale = pset1<Packet>(inv);
    for_each_vector(std::size_t(n), [&](std::size_t i, std::size_t len) {
        store(out + i, len, pmul(pmul(load(x + i, len, 0.0f), scale), load(w + i, len, 0.0f)));
    });
}

}  // namespace

void silu_mul(float* out, const float* gate, const float* up, std::size_t n) {
    using namespace Eigen::internal;
    const Packet one = pset1<Packet>(1.0f);
    for_each_vector(n, [&](std::size_t i, std::size_t len) {
        const Packet g = load(gate + i, len, 0.0f), u = load(up + i, len, 0.0f);
        store(out + i, len, pmul(pdiv(g, padd(one, pexp(pnegate(g)))), u));
    });
}

void rmsnorm_row(float* out, const float* x, const float* w, int n, float eps) {
    using namespace Eigen::internal;
    Packet sum = pset1<Packet>(0.0f);
    for_each_vector(std::size_t(n), [&](std::size_t i, std::size_t len) {
        const Packet v = load(x + i, len, 0.0f);
        sum = pmadd(v, v, sum);
    });
    normalize_row(out, x, w, n, eps, sum);
}

void add_rmsnorm_row(float* x, const float* y, float* out, const float* w, int n, float eps) {
    using namespace Eigen::internal;
    Packet sum = pset1<Packet>(0.0f);
    for_each_vector(std::size_t(n), [&](std::size_t i, std::size_t len) {
        // Padding lanes are 0 + 0: they add 0 to the sum, as in rmsnorm_row.
        const Packet v = padd(load(x + i, len, 0.0f), load(y + i, len, 0.0f));
        store(x + i, len, v);
        sum = pmadd(v, v, sum);
    });
    normalize_row(out, x, w, n, eps, sum);
}

float row_max(const float* row, int n) {
    using namespace Eigen::internal;
    Packet m = pset1<Packet>(-INFINITY);
    for_each_vector(std::size_t(n), [&](std::size_t i, std::size_t len) {
        m = pmax(m, load(row + i, len, -INFINITY));
    });
    return predux_max(m);  // a max is exact in any order
}

int argmax(const float* row, std::size_t n) {
    using namespace Eigen::internal;
    Packet m = pset1<Packet>(-INFINITY);
    Packet nan = pzero(m);  // lanes that have seen a NaN (v != v)
    for_each_vector(n, [&](std::size_t i, std::size_t len) {
        const Packet v = load(row + i, len, -INFINITY);
        m = pmax(m, v);
        nan = por(nan, pandnot(ptrue(v), pcmp_eq(v, v)));
    });
    if (predux_any(nan)) return -1;  // a NaN: the reference's scan decides
    const float best = predux_max(m);
    const Packet b = pset1<Packet>(best);
    std::size_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        if (predux_any(pcmp_eq(ploadu<Packet>(row + i), b))) break;
    while (row[i] != best) ++i;  // the first lane holding it (or the tail's)
    return static_cast<int>(i);
}

float exp_and_sum(float* row, int n, float max, float scale) {
    using namespace Eigen::internal;
    const Packet m = pset1<Packet>(max * scale), c = pset1<Packet>(scale),
                 minus_inf = pset1<Packet>(-INFINITY);
    Packet sum = pset1<Packet>(0.0f);
    for_each_vector(std::size_t(n), [&](std::size_t i, std::size_t len) {
        const Packet s = load(row + i, len, -INFINITY);
        // exp(-inf - max) is not exactly 0 in Eigen's polynomial (it clamps
        // its input): a masked key's weight is set to 0 explicitly.
        const Packet e = pandnot(pexp(psub(pmul(s, c), m)), pcmp_eq(s, minus_inf));
        store(row + i, len, e);
        sum = padd(sum, e);
    });
    return predux(sum);
}

}  // namespace plab::cpu_vector
