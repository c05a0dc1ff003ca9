// `plab grade rope`: RoPE at absolute positions, chunk by chunk
// (lessons/assignments/rope/README.md).
//
// The reference is the engine's own: core/rope.h's table (cos, sin of
// pos * theta^(-2i/Dh), computed in double, rounded to float) and its rotation
// of the half-split pairs (i, i + Dh/2), an odd Dh's last component left as it
// is. Known mistakes: positions restarting at 0 in every chunk, interleaved pairs
// (2i, 2i+1), the rotation's sign flipped.
#include "core/rope.h"

#include <cmath>

#include "grade/grade.h"

namespace plab::grade {
namespace rope_detail {

enum class Variant { engine, restart, interleaved, flipped };

// x (C, H, Dh) at positions pos0..pos0+C-1, rotated as the engine does (or as a mistake does).
Tensor rotate(const std::vector<float>& x, int c, int h, int dh, int pos0, double theta,
              Variant variant) {
    const int first = variant == Variant::restart ? 0 : pos0;
    const RopeTable table = make_rope_table(first + c, dh, theta);
    const int half = table.half_dim;
    std::vector<float> out = x;
    std::vector<float> row(static_cast<std::size_t>(dh));
    std::vector<float> sin_row(static_cast<std::size_t>(std::max(half, 1)));
    for (int i = 0; i < c; ++i) {
        const std::size_t t = static_cast<std::size_t>(first + i) * half;
        for (int k = 0; k < half; ++k)
            sin_row[k] = variant == Variant::flipped ? -table.sin[t + k] : table.sin[t + k];
        for (int head = 0; head < h; ++head) {
            float* v = &out[(std::size_t(i) * h + head) * dh];
            // Interleaved pairs (2k, 2k+1) are the half-split pairs of a permuted vector.
            if (variant == Variant::interleaved) {
                for (int k = 0; k < half; ++k) row[k] = v[2 * k], row[k + half] = v[2 * k + 1];
                if (dh % 2) row[dh - 1] = v[dh - 1];
                rope_rotate(row.data(), &table.cos[t], sin_row.data(), half);
                for (int k = 0; k < half; ++k) v[2 * k] = row[k], v[2 * k + 1] = row[k + half];
            } else {
                rope_rotate(v, &table.cos[t], sin_row.data(), half);
            }
        }
    }
    return tensor_f({c, h, dh}, out);
}

// cos/sin are float tables from double; the student's numpy takes them in
// float64 or float32 (an angle pos * freq of a few hundred radians in float32
// is off by ~1e-5): inputs in [-1, 1], so 1e-4.
constexpr double kTol = 1e-4;

// One sequence of T tokens cut by `plan`: one call per chunk.
Case make_case(std::mt19937_64& rng, const std::vector<int>& plan, int h, int dh, double theta) {
    Case c;
    int pos0 = 0;
    for (std::size_t n = 0; n < plan.size(); ++n) {
        const int len = plan[n];
        const std::vector<float> x = uniform(rng, std::size_t(len) * h * dh);
        c.calls.push_back(
            {{"fn", "rope"},
             {"args",
              {{"x", to_arg(tensor_f({len, h, dh}, x))}, {"pos0", pos0}, {"theta", theta}}}});
        Expectation e;
        e.call = static_cast<int>(n);
        e.what = "rotated x";
        e.where = "H=" + std::to_string(h) + " Dh=" + std::to_string(dh) +
                  " theta=" + std::to_string(static_cast<long long>(theta)) + ", chunk " +
                  std::to_string(n) + " (positions " + std::to_string(pos0) + ".." +
                  std::to_string(pos0 + len - 1) + ")";
        e.axes = {"row", "head", "component"};
        e.expected = rotate(x, len, h, dh, pos0, theta, Variant::engine);
        e.atol = e.rtol = kTol;
        if (pos0 > 0)
            e.mistakes.push_back(
                {rotate(x, len, h, dh, pos0, theta, Variant::restart),
                 "position offset missing in chunk " + std::to_string(n) +
                     ": its rows sit at positions pos0, pos0+1, ..., not 0, 1, ..."});
        if (dh > 2)
            e.mistakes.push_back({rotate(x, len, h, dh, pos0, theta, Variant::interleaved),
                                  "you rotate pairs (2i, 2i+1); the engine pairs (i, i + Dh/2) "
                                  "(half-split, as Hugging Face Llama)"});
        e.mistakes.push_back({rotate(x, len, h, dh, pos0, theta, Variant::flipped),
                              "the rotation goes the wrong way: x0' = x0 cos - x1 sin, "
                              "x1' = x0 sin + x1 cos"});
        c.expect.push_back(std::move(e));
        pos0 += len;
    }
    return c;
}

}  // namespace rope_detail

std::vector<Check> rope_checks(std::mt19937_64& rng) {
    using rope_detail::make_case;
    std::vector<Check> checks(4);
    checks[0] = {"one chunk from position 0",
                 "angle of pair i at position p: p * theta^(-2i/Dh); pairs (i, i + Dh/2)",
                 {}};
    for (int dh : {2, 8, 32}) checks[0].cases.push_back(make_case(rng, {9}, 2, dh, 10000.0));
    checks[1] = {"chunks at an offset (chunk plans)",
                 "a chunk's rows sit at absolute positions pos0, pos0+1, ...",
                 {}};
    for (int dh : {4, 16, 32})
        checks[1].cases.push_back(make_case(rng, random_plan(rng, 40, 9), 3, dh, 10000.0));
    checks[2] = {"odd head sizes (Dh 1, 7, 33)",
                 "odd Dh: pairs (i, i + Dh//2) for i < Dh//2; the last component stays as it is",
                 {}};
    for (int dh : {1, 7, 33})
        checks[2].cases.push_back(make_case(rng, random_plan(rng, 20, 7), 2, dh, 10000.0));
    checks[3] = {"other theta (500000, as Llama 3)", "use the theta given, not 10000", {}};
    for (int dh : {8, 64})
        checks[3].cases.push_back(make_case(rng, random_plan(rng, 30, 11), 1, dh, 500000.0));
    return checks;
}

}  // namespace plab::grade
