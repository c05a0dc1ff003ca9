// `plab grade online_softmax`: attention over key tiles with a running max m, a
// running denominator l and an unnormalised output, as FlashAttention computes it
// (lessons/assignments/online_softmax/README.md, `plab flash`).
//
// The reference is the engine's whole softmax (core/attention_math.h: the
// scores, the row's max and denominator, the output), which a correct tiled
// walk equals within float32 rounding; m and l after the last tile are that
// max and that denominator. Known mistakes are the tiled walk with one thing
// wrong: acc not rescaled when a tile raises the max, l rescaled twice, acc
// divided by l inside the tile loop. Starting m at 0 instead of -inf is
// harmless until every score of a row lies below about -103, where exp(s - 0)
// underflows to 0 in float32: the last check has scores below -110 and
// diagnoses the NaN it gives; elsewhere it shows as m = max(0, row max).
#include <array>
#include <cmath>

#include "core/attention_math.h"
#include "core/attention_reference.h"
#include "core/attention_shape.h"
#include "grade/grade.h"
#include "runtime/mask_grammar.h"

namespace plab::grade {
namespace online_softmax_detail {

struct Walk {
    std::vector<double> out, m, l;  // (T, Dh), (T,), (T,)
};

// The engine's whole softmax (cpu-ref's, core/attention_reference.h): out, each row's
// max and its denominator.
Walk whole_softmax(const std::vector<float>& q, const std::vector<float>& k,
                   const std::vector<float>& v, int t, int dh, const Mask& mask) {
    const HeadSoftmax h = head_softmax(q.data(), k.data(), v.data(), t, dh, mask,
                                       attention_shape(t, 0, 1, 1, dh, t).scale);
    return {{h.out.begin(), h.out.end()},
            {h.max_score.begin(), h.max_score.end()},
            {h.denominator.begin(), h.denominator.end()}};
}

enum class Mistake { none, no_rescale_acc, l_twice, divide_per_tile, m_from_zero };

// The tiled walk of one row, in float like the student's float32 numpy, with
// one known mistake planted (or none).
Walk tiled(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
           int t, int dh, const Mask& mask, int tile, Mistake mistake) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
    Walk w;
    for (int p = 0; p < t; ++p) {
        float m = mistake == Mistake::m_from_zero ? 0.0f : -INFINITY, l = 0.0f;
        std::vector<float> acc(static_cast<std::size_t>(dh), 0.0f);
        for (int k0 = 0; k0 < t; k0 += tile) {
            std::vector<std::pair<int, float>> seen;  // (key, score) of the tile's visible keys
            for (int j = k0; j < std::min(t, k0 + tile); ++j) {
                if (!mask.visible(p, j)) continue;
                float dot = 0.0f;
                for (int d = 0; d < dh; ++d)
                    dot += q[std::size_t(p) * dh + d] * k[std::size_t(j) * dh + d];
                seen.emplace_back(j, dot * scale);
            }
            if (seen.empty()) continue;  // an empty tile adds nothing (a kernel skips it)
            float m_new = m;
            for (const auto& [j, s] : seen) m_new = std::max(m_new, s);
            const float r = std::exp(m - m_new);
            l = mistake == Mistake::l_twice ? l * r * r : l * r;
            if (mistake != Mistake::no_rescale_acc)
                for (float& a : acc) a *= r;
            for (const auto& [j, s] : seen) {
                const float e = std::exp(s - m_new);
                l += e;
                for (int d = 0; d < dh; ++d) acc[std::size_t(d)] += e * v[std::size_t(j) * dh + d];
            }
            m = m_new;
            if (mistake == Mistake::divide_per_tile)
                for (float& a : acc) a /= l;
        }
        for (float a : acc) w.out.push_back(mistake == Mistake::divide_per_tile ? a : a / l);
        w.m.push_back(m);
        w.l.push_back(l);
    }
    return w;
}

const char* kRescaleHint =
    "when a tile raises the max from m_old to m, multiply acc by exp(m_old - m) too: what it "
    "summed so far was measured against the old max";
const char* kTwiceHint =
    "l is rescaled once per tile: l = l * exp(m_old - m) + sum(exp(s - m)); you multiplied it "
    "by the factor twice";
const char* kDivideHint =
    "keep acc unnormalised (the sum of exp(s - m) * v) and divide by l once, after the last "
    "tile; dividing inside the loop mixes normalised and unnormalised terms";
const char* kZeroHint =
    "start m at -inf, not 0: m must become the row's largest score, which may be negative";
const char* kUnderflowHint =
    "your output has NaN or inf: with every score below -110, exp(s - m) underflows to 0 in "
    "float32 unless m is the row's max; start m at -inf, not 0, and skip a tile the mask hides "
    "entirely (its max is -inf, and -inf - (-inf) is NaN)";

std::string nan_diagnosis(const Tensor& got) {
    for (double x : got.data)
        if (!std::isfinite(x)) return kUnderflowHint;
    return "";
}

struct CaseInput {
    int t = 0, dh = 0, tile = 0;
    std::string spec;
    std::vector<float> q, k, v;
};

Tensor part_of(const Walk& w, int part, int t, int dh) {
    return part == 0 ? tensor({t, dh}, w.out) : tensor({t}, part == 1 ? w.m : w.l);
}

Case make_case(const CaseInput& in) {
    const BoundMask bm = make_mask_one_head(in.spec, in.t);
    const Mask mask = bm.view();
    std::vector<double> bits;
    for (int a = 0; a < in.t; ++a)
        for (int b = 0; b < in.t; ++b) bits.push_back(mask.visible(a, b) ? 1 : 0);
    Case c;
    c.calls.push_back({{"fn", "tiled_attention"},
                       {"args",
                        {{"q", to_arg(tensor_f({in.t, in.dh}, in.q))},
                         {"k", to_arg(tensor_f({in.t, in.dh}, in.k))},
                         {"v", to_arg(tensor_f({in.t, in.dh}, in.v))},
                         {"mask", to_arg(tensor({in.t, in.t}, bits), true)},
                         {"tile", in.tile}}}});
    const Walk want = whole_softmax(in.q, in.k, in.v, in.t, in.dh, mask);
    const auto wrong = [&](Mistake m) {
        return tiled(in.q, in.k, in.v, in.t, in.dh, mask, in.tile, m);
    };
    const Walk no_rescale = wrong(Mistake::no_rescale_acc), twice = wrong(Mistake::l_twice),
               divided = wrong(Mistake::divide_per_tile), from_zero = wrong(Mistake::m_from_zero);
    const char* names[] = {"output", "m", "l"};
    for (int part = 0; part < 3; ++part) {
        Expectation e;
        e.part = part;
        e.what = names[part];
        e.where = "T=" + std::to_string(in.t) + " Dh=" + std::to_string(in.dh) + ", tile " +
                  std::to_string(in.tile) + ", mask " + in.spec;
        e.axes = part == 0 ? std::vector<std::string>{"query", "component"}
                           : std::vector<std::string>{"query"};
        e.expected = part_of(want, part, in.t, in.dh);
        // float32 against float32: the tiled sums run in another order than the
        // engine's (lesson 15), a few ulps on values of order 1 to T.
        e.atol = e.rtol = 1e-4;
        // A mistake whose answer holds NaN is left to diagnose(): in a reference
        // tensor NaN means "not checked", which would match any answer.
        const std::pair<const Walk*, const char*> known[] = {{&no_rescale, kRescaleHint},
                                                             {&twice, kTwiceHint},
                                                             {&divided, kDivideHint},
                                                             {&from_zero, kZeroHint}};
        for (const auto& [walk, hint] : known) {
            Tensor value = part_of(*walk, part, in.t, in.dh);
            bool finite = true;
            for (double x : value.data) finite = finite && std::isfinite(x);
            if (finite) e.mistakes.push_back({std::move(value), hint});
        }
        e.diagnose = nan_diagnosis;
        c.expect.push_back(std::move(e));
    }
    return c;
}

// Keys whose scores grow along the prompt: every later tile raises the max.
CaseInput rising(std::mt19937_64& rng, int t, int dh, int tile) {
    CaseInput in{t, dh, tile, "causal", {}, {}, {}};
    const std::vector<float> u = uniform(rng, std::size_t(dh));
    for (int p = 0; p < t; ++p)
        for (int d = 0; d < dh; ++d) {
            in.q.push_back(0.5f + std::fabs(u[std::size_t(d)]));
            in.k.push_back(0.3f * static_cast<float>(p + 1) *
                           (0.5f + std::fabs(u[std::size_t(d)])));
        }
    in.v = uniform(rng, std::size_t(t) * dh);
    return in;
}

CaseInput random_case(std::mt19937_64& rng, int t, int dh, int tile, const std::string& spec) {
    return {t,
            dh,
            tile,
            spec,
            uniform(rng, std::size_t(t) * dh, 2.0f),
            uniform(rng, std::size_t(t) * dh, 2.0f),
            uniform(rng, std::size_t(t) * dh)};
}

// Every score below -110: q = -12 and k in [7, 9] in each of 2 components,
// so q.k / sqrt(2) lies in [-153, -118].
CaseInput very_negative(std::mt19937_64& rng, int t, int tile) {
    CaseInput in{t, 2, tile, "causal", std::vector<float>(std::size_t(t) * 2, -12.0f), {}, {}};
    for (float x : uniform(rng, std::size_t(t) * 2)) in.k.push_back(8.0f + x);
    in.v = uniform(rng, std::size_t(t) * 2);
    return in;
}

}  // namespace online_softmax_detail

std::vector<Check> online_softmax_checks(std::mt19937_64& rng) {
    using namespace online_softmax_detail;
    std::vector<Check> checks(4);
    checks[0] = {"one tile holding every key: the whole softmax",
                 "with one tile, m is the row's largest score, l = sum(exp(s - m)) and the "
                 "output is sum(exp(s - m) * v) / l",
                 {}};
    for (auto [t, dh, tile] : {std::array{5, 3, 5}, {8, 4, 11}, {1, 2, 1}})
        checks[0].cases.push_back(make_case(random_case(rng, t, dh, tile, "causal")));
    checks[1] = {"tiles that raise the max", kRescaleHint, {}};
    for (auto [t, dh, tile] : {std::array{8, 3, 2}, {9, 2, 3}, {12, 4, 4}, {6, 1, 1}})
        checks[1].cases.push_back(make_case(rising(rng, t, dh, tile)));
    checks[2] = {"masks and tile widths",
                 "skip the keys the mask hides (mask 0), and a tile it hides entirely",
                 {}};
    for (const char* spec : {"causal", "window:3", "prefix:4", "docs:3,5,4", "chunked:4"})
        for (int tile : {1, 3, 5})
            checks[2].cases.push_back(make_case(random_case(rng, 12, 3, tile, spec)));
    checks[3] = {"scores below -110 (float32 underflow)", kUnderflowHint, {}};
    for (auto [t, tile] : {std::pair{5, 2}, {7, 3}})
        checks[3].cases.push_back(make_case(very_negative(rng, t, tile)));
    return checks;
}

}  // namespace plab::grade

namespace plab::grade {

// The flash_kernel assignment (a CUDA kernel on the SIMT emulator) computes
// the same tiled walk: the online_softmax checks, then rows over several
// blocks of 32 queries with wider heads and tiles.
std::vector<Check> flash_kernel_checks(std::mt19937_64& rng) {
    using namespace online_softmax_detail;
    std::vector<Check> checks = online_softmax_checks(rng);
    Check blocks{"several blocks: 70 queries, wider heads",
                 "each block owns 32 queries and walks every key tile: check the query index "
                 "(blockIdx.x * 32 + threadIdx.x) and the tile's bounds (min(tile, T - k0))",
                 {}};
    blocks.cases.push_back(make_case(random_case(rng, 70, 17, 16, "causal")));
    blocks.cases.push_back(make_case(random_case(rng, 45, 33, 32, "window:9")));
    blocks.cases.push_back(make_case(rising(rng, 40, 8, 7)));
    checks.push_back(std::move(blocks));
    return checks;
}

}  // namespace plab::grade
