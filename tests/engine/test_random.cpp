// core/random.h: seeded draws specified to the bit, so a seed gives the same
// workload, prompts and weights with every C++ library (issue 61: the web
// page, built with libc++, drew other prompts than native from the same seed).
//
// Two oracles. The pinned constants were computed by an independent
// transcription of mt19937_64 (checked against the standard's 10000th output)
// and of these algorithms in Python, whose floats are the same IEEE doubles:
// what every platform must draw. And where the C++ library is libstdc++,
// whose algorithms random.h writes out, its own distributions must agree
// draw for draw.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/random.h"
#include "serving/workload.h"

using namespace plab;

TEST_CASE("random: the engine is the standard's and the draws are pinned to constants",
          "[random]") {
    random::Engine standard;  // default seed 5489: [rand.predef] fixes its 10000th output
    for (int i = 1; i < 10000; ++i) standard();
    CHECK(standard() == 9981545732273789042ULL);

    random::Engine g(7);
    CHECK(random::unit(g) == 0x1.823eca63d6cdbp-1);
    CHECK(random::unit(g) == 0x1.e60acea8f4698p-1);
    random::Engine h(9);
    std::vector<std::int64_t> ints;
    for (int i = 0; i < 8; ++i) ints.push_back(random::uniform_int(h, -2, 3));
    CHECK(ints == std::vector<std::int64_t>{1, 0, 3, 2, -1, -2, 3, -2});
}

TEST_CASE("random: a generated workload's first requests are pinned to constants",
          "[random][serve]") {
    WorkloadGenerator gen;
    gen.seed = 1;
    gen.rate = 4;
    gen.requests = 4;
    gen.prompt_min = 1;
    gen.prompt_max = 512;
    gen.new_min = 1;
    gen.new_max = 64;
    const Workload w = generate_workload(gen);
    REQUIRE(w.requests.size() == 4);
    const double arrival[] = {0, 0x1.333989e536852p-3, 0x1.82f82a3b07c28p-1, 0x1.eef3baf606a49p-1};
    const int prompt[] = {69, 11, 242, 326}, out[] = {9, 23, 5, 6};
    for (std::size_t i = 0; i < 4; ++i) {
        INFO("request " << i);
        CHECK(w.requests[i].arrival_s == arrival[i]);  // bitwise: exact operations only
        CHECK(w.requests[i].prompt_tokens == prompt[i]);
        CHECK(w.requests[i].max_new_tokens == out[i]);
    }
}

#if defined(__GLIBCXX__)
TEST_CASE("random: libstdc++'s own distributions draw what random.h writes out", "[random]") {
    // The lessons' seeds were drawn with libstdc++; written out, they must draw
    // the same values, so every number a lesson shows stays what it shows.
    random::Engine a(12345), b(12345);
    for (int i = 0; i < 20000; ++i) {
        const int lo = -(i % 7), hi = 1 + (i % 1000) * (i % 13);
        REQUIRE(random::uniform_int(a, lo, hi) == std::uniform_int_distribution<int>(lo, hi)(b));
    }
    for (int i = 0; i < 20000; ++i)
        REQUIRE(random::uniform(a, -0.5f, 1.25f) ==
                std::uniform_real_distribution<float>(-0.5f, 1.25f)(b));
    random::Normal<float> mine(0.0f, 0.3f);
    std::normal_distribution<float> theirs(0.0f, 0.3f);
    for (int i = 0; i < 20001; ++i) REQUIRE(mine(a) == theirs(b));
    std::mt19937 a32(99), b32(99);  // the 32-bit engine, as the rounding scene uses it
    random::Normal<float> mine32(0.0f, 2.0f);
    std::normal_distribution<float> theirs32(0.0f, 2.0f);
    for (int i = 0; i < 20000; ++i) REQUIRE(mine32(a32) == theirs32(b32));
    for (int n : {0, 1, 2, 3, 10, 101, 1000}) {
        std::vector<int> x(static_cast<std::size_t>(n)), y;
        std::iota(x.begin(), x.end(), 0);
        y = x;
        random::shuffle(x.begin(), x.end(), a);
        std::shuffle(y.begin(), y.end(), b);
        REQUIRE(x == y);
    }
    // The exponential differs only in its logarithm (exact operations, not
    // libm's): within 4 ulps of libstdc++'s draw, the same engine steps.
    for (int i = 0; i < 20000; ++i) {
        const double mine_gap = random::exponential(a, 4.0);
        const double theirs_gap = std::exponential_distribution<double>(4.0)(b);
        REQUIRE(std::fabs(mine_gap - theirs_gap) <=
                4 * std::numeric_limits<double>::epsilon() * std::max(theirs_gap, 1e-300));
    }
    REQUIRE(a() == b());
}
#endif

TEST_CASE("random: each sampler draws what it promises", "[random]") {
    random::Engine g(11);
    // uniform_int: inside its bounds, every value reached, none favoured. With
    // 60000 draws over 6 values each count is 10000 ± 91 (one sigma); ±500 is
    // 5.5 sigma, so a correct sampler fails this about once in 10^7 runs.
    std::vector<int> count(6, 0);
    for (int i = 0; i < 60000; ++i) {
        const std::int64_t v = random::uniform_int(g, -2, 3);
        REQUIRE(v >= -2);
        REQUIRE(v <= 3);
        ++count[std::size_t(v + 2)];
    }
    for (int c : count) CHECK(std::abs(c - 10000) < 500);
    CHECK(random::uniform_int(g, 5, 5) == 5);

    // Normal: over 200000 draws the sample mean's sigma is 0.0022 and the
    // variance's 0.0032: 0.02 is more than 6 sigma.
    random::Normal<float> normal(0.0f, 1.0f);
    double sum = 0, sq = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
        const double x = normal(g);
        sum += x;
        sq += x * x;
    }
    CHECK(std::fabs(sum / n) < 0.02);
    CHECK(std::fabs(sq / n - 1) < 0.02);

    // exponential: mean 1/rate (sigma of the mean over 100000 draws: 0.3 % of it).
    double gaps = 0;
    for (int i = 0; i < 100000; ++i) gaps += random::exponential(g, 4.0);
    CHECK(gaps / 100000 == Approx(0.25).epsilon(0.02));

    // shuffle: a permutation, and not the identity.
    std::vector<int> v(50);
    std::iota(v.begin(), v.end(), 0);
    random::shuffle(v.begin(), v.end(), g);
    std::vector<int> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int> identity(50);
    std::iota(identity.begin(), identity.end(), 0);
    CHECK(sorted == identity);
    CHECK(v != identity);
}

TEST_CASE("random: log_specified agrees with libm within 4 ulps", "[random]") {
    // The arrivals' logarithm is computed from exact operations so every
    // platform gets the same bits; it must still be the logarithm. 4 ulps:
    // the atanh series and the e*ln2 term each round a few times.
    random::Engine g(5);
    for (int i = 0; i < 100000; ++i) {
        const double x = std::ldexp(1.0 - random::unit(g), int(random::uniform_int(g, -60, 60)));
        const double want = std::log(x), got = random::log_specified(x);
        const double ulp = std::nextafter(std::fabs(want), INFINITY) - std::fabs(want);
        INFO("x = " << x);
        REQUIRE(std::fabs(got - want) <= 4 * std::max(ulp, 1e-300));
    }
    CHECK(random::log_specified(1.0) == 0.0);
    CHECK(random::log_specified(0.5) == -0x1.62e42fefa39efp-1);  // -ln 2, correctly rounded
}
