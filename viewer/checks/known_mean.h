// A toy output known by hand (the toy and flash self-checks): when every key a
// query sees has the same score, softmax weighs them alike and the output is
// the mean of their values (2, 3, 14/3, 6 for the default values 2, 4, 8, 10).
// Known only for integer values whose sum a float holds exactly (|sum| < 2^24):
// then the single rounding is the final division.
#pragma once

#include <numeric>
#include <string>

namespace plab::viewer {

struct KnownMean {
    bool known = false;
    long long sum = 0;
    int count = 0;
    float value() const { return static_cast<float>(sum) / static_cast<float>(count); }
    std::string text() const {
        const long long g = std::gcd(sum < 0 ? -sum : sum, static_cast<long long>(count));
        const long long num = g > 0 ? sum / g : sum, den = g > 0 ? count / g : count;
        return den == 1 ? std::to_string(num) : std::to_string(num) + "/" + std::to_string(den);
    }
};

}  // namespace plab::viewer
