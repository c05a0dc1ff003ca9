// strict_expf: accurate enough to be a softmax's exp, identical bits everywhere.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/strict_math.h"

namespace {

// Distance in units in the last place between two finite floats of the same sign.
std::int64_t ulp_distance(float a, float b) {
    std::int32_t ia, ib;
    std::memcpy(&ia, &a, 4);
    std::memcpy(&ib, &b, 4);
    return std::llabs(std::int64_t(ia) - std::int64_t(ib));
}

}  // namespace

TEST_CASE("strict_expf is within 2 ulp of the correctly rounded exp", "[strict_math]") {
    std::int64_t worst = 0;
    float worst_x = 0;
    // Every 97th float-ish step over the range softmax uses (x <= 0) and beyond.
    for (double x = -87.0; x <= 88.0; x += 0.00731) {
        const float xf = static_cast<float>(x);
        const float ref = static_cast<float>(std::exp(static_cast<double>(xf)));
        const std::int64_t d = ulp_distance(plab::strict_expf(xf), ref);
        if (d > worst) {
            worst = d;
            worst_x = xf;
        }
    }
    INFO("worst error " << worst << " ulp at x = " << worst_x);
    // 2 ulp: Cody-Waite reduction + degree-7 polynomial evaluated in float.
    REQUIRE(worst <= 2);
}

TEST_CASE("strict_expf edge cases", "[strict_math]") {
    REQUIRE(plab::strict_expf(0.0f) == 1.0f);
    REQUIRE(plab::strict_expf(-110.0f) == 0.0f);  // below the smallest subnormal
    REQUIRE(plab::strict_expf(-100.0f) > 0.0f);   // subnormal, not flushed
    REQUIRE(plab::strict_expf(-100.0f) == Approx(3.720076e-44).epsilon(0.05));
    REQUIRE(std::isinf(plab::strict_expf(100.0f)));
    REQUIRE(std::isnan(plab::strict_expf(std::nanf(""))));
    REQUIRE(plab::strict_expf(1.0f) == Approx(2.718281828).epsilon(1e-7));
}

TEST_CASE("strict_dot sums left to right", "[strict_math]") {
    // (1e8 + 1) - 1e8 in float: order matters, and the fixed order is left to right.
    const float a[3] = {1e8f, 1.0f, -1e8f};
    const float ones[3] = {1.0f, 1.0f, 1.0f};
    REQUIRE(plab::strict_dot(a, ones, 3) == ((0.0f + 1e8f) + 1.0f) + -1e8f);
}
