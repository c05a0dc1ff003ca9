// Masks as data (core/mask.h, runtime/mask_grammar.h) on the reference CPU
// backend, one attention call at a time (whole models: test_mask_model.cpp).
//
// What it shows: every mask kind, composition and score modifier
//   1. agrees with an independent dense reference (the whole T x T mask
//      materialised from the definition in tests/mask_cases.h, softmax in double);
//   2. classifies tiles exactly as its cells say, and bounds each query's keys tightly.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/attention_shape.h"
#include "core/error.h"
#include "mask_cases.h"
#include "model/weights.h"
#include "runtime/equivalence.h"
#include "runtime/registry.h"
#include "runtime/session.h"
#include "test_util.h"

namespace plab::test {
namespace {

namespace fs = std::filesystem;

// A folder for this process's mask files, removed when the process exits.
fs::path temp_dir() {
    return test::process_temp_dir("plab_mask_test");
}

// Paged K/V pools holding T random positions behind a scrambled block table,
// and random queries for the last C positions.
struct AttentionInputs {
    AttentionShape shape;
    std::vector<int32_t> table;
    std::vector<float> k_pool, v_pool, q;
    std::vector<float> k, v;  // (T, Hkv, Dh) in logical order, for the dense reference
};

AttentionInputs make_inputs(int t, int c, int h, int hkv, int dh, int block, std::uint64_t seed) {
    AttentionInputs in;
    in.shape = attention_shape(c, t - c, h, hkv, dh, block);
    const int blocks = (t + block - 1) / block;
    for (int i = 0; i < blocks; ++i) in.table.push_back(blocks - 1 - i);  // scrambled
    const int row = hkv * dh;
    in.k = random_floats(std::size_t(t) * row, seed, -1.5f, 1.5f);
    in.v = random_floats(std::size_t(t) * row, seed + 1);
    in.k_pool.assign(std::size_t(blocks) * block * row, NAN);  // unused slots poisoned
    in.v_pool = in.k_pool;
    for (int p = 0; p < t; ++p) {
        const int slot = kv_slot(in.table.data(), p, block);
        std::copy_n(in.k.begin() + std::size_t(p) * row, row,
                    in.k_pool.begin() + std::size_t(slot) * row);
        std::copy_n(in.v.begin() + std::size_t(p) * row, row,
                    in.v_pool.begin() + std::size_t(slot) * row);
    }
    in.q = random_floats(std::size_t(c) * h * dh, seed + 2, -1.5f, 1.5f);
    return in;
}

struct AttentionResult {
    std::vector<float> out;                  // (C, H, Dh)
    std::vector<std::vector<float>> probs;   // per head (C, T)
    std::vector<std::vector<float>> scores;  // per head (C, T)
};

AttentionResult run_attention(Backend& b, const AttentionInputs& in) {
    const AttentionShape& s = in.shape;
    auto up = [&](const std::vector<float>& v) {
        DeviceArray a(b, v.size());
        b.upload(a.buf(), v.data(), v.size());
        return a;
    };
    DeviceArray q = up(in.q), kp = up(in.k_pool), vp = up(in.v_pool);
    DeviceArray out(b, in.q.size());
    b.fill(out.buf(), NAN);
    b.attention(out.buf(), q.buf(), kp.buf(), vp.buf(), in.table, s);
    AttentionResult r;
    r.out.resize(in.q.size());
    b.download(r.out.data(), out.buf(), r.out.size());
    const std::size_t cells = std::size_t(s.n_queries) * s.n_keys();
    for (int h = 0; h < s.n_heads; ++h) {
        DeviceArray p(b, cells), sc(b, cells);
        b.fill(p.buf(), NAN);
        b.fill(sc.buf(), NAN);
        b.attention_probs(p.buf(), sc.buf(), q.buf(), kp.buf(), in.table, s, h);
        r.probs.emplace_back(cells);
        r.scores.emplace_back(cells);
        b.download(r.probs.back().data(), p.buf(), cells);
        b.download(r.scores.back().data(), sc.buf(), cells);
    }
    return r;
}

// The dense reference: the whole T x T mask from the case's own rule, scores and
// softmax in double, ALiBi slopes from the paper's code, tanh from the library.
struct Dense {
    std::vector<double> out;                 // (C, H, Dh)
    std::vector<std::vector<double>> probs;  // per head (C, T)
};

Dense dense_reference(const AttentionInputs& in, const MaskCase& mc) {
    const AttentionShape& s = in.shape;
    const int t = s.n_keys(), dh = s.head_dim;
    std::vector<char> mask(std::size_t(t) * t);
    for (int q = 0; q < t; ++q)
        for (int k = 0; k < t; ++k) mask[std::size_t(q) * t + k] = mc.visible(q, k);
    const std::vector<double> slopes = reference_alibi_slopes(s.n_heads);
    Dense d;
    d.out.assign(in.q.size(), 0.0);
    d.probs.assign(std::size_t(s.n_heads), std::vector<double>(std::size_t(s.n_queries) * t, 0.0));
    for (int i = 0; i < s.n_queries; ++i) {
        const int qp = s.pos0 + i;
        for (int h = 0; h < s.n_heads; ++h) {
            const int g = h / (s.n_heads / s.n_kv_heads);
            const float* qv = in.q.data() + (std::size_t(i) * s.n_heads + h) * dh;
            std::vector<double> sc(std::size_t(t), -std::numeric_limits<double>::infinity());
            double mx = -std::numeric_limits<double>::infinity();
            for (int k = 0; k < t; ++k) {
                if (!mask[std::size_t(qp) * t + k]) continue;
                const float* kv = in.k.data() + (std::size_t(k) * s.n_kv_heads + g) * dh;
                double dot = 0;
                for (int e = 0; e < dh; ++e) dot += double(qv[e]) * kv[e];
                double x = dot / std::sqrt(double(dh));
                if (mc.alibi) x -= slopes[std::size_t(h)] * std::abs(qp - k);
                if (mc.softcap > 0) x = mc.softcap * std::tanh(x / mc.softcap);
                sc[std::size_t(k)] = x;
                mx = std::max(mx, x);
            }
            double den = 0;
            for (int k = 0; k < t; ++k)
                if (mask[std::size_t(qp) * t + k]) den += std::exp(sc[std::size_t(k)] - mx);
            for (int k = 0; k < t; ++k) {
                if (!mask[std::size_t(qp) * t + k]) continue;
                const double p = std::exp(sc[std::size_t(k)] - mx) / den;
                d.probs[std::size_t(h)][std::size_t(i) * t + k] = p;
                const float* vv = in.v.data() + (std::size_t(k) * s.n_kv_heads + g) * dh;
                for (int e = 0; e < dh; ++e)
                    d.out[(std::size_t(i) * s.n_heads + h) * dh + e] += p * vv[e];
            }
        }
    }
    return d;
}

struct Shape {
    int t, c, h, hkv, dh, block;
};

}  // namespace

TEST_CASE("masks: cpu-ref agrees with an independent dense reference for every mask and modifier",
          "[mask]") {
    const fs::path dir = temp_dir();
    auto backend = make_backend("cpu-ref");
    double worst_ratio = 0;  // max |cpu-ref - dense| / max |out| over every case, reported
    // T, C (queries at the end), H, Hkv, Dh (odd ones included), B
    for (const Shape sh : {Shape{12, 12, 4, 2, 7, 4}, Shape{23, 9, 3, 1, 5, 3},
                           Shape{17, 1, 6, 3, 9, 16}, Shape{30, 30, 5, 5, 3, 8}}) {
        const std::vector<int32_t> tokens = mask_case_tokens(sh.t, 50, 5 + sh.t);
        for (const MaskCase& mc : mask_cases(sh.t, dir)) {
            INFO("mask " << mc.spec << ", T=" << sh.t << " C=" << sh.c << " H=" << sh.h
                         << " Hkv=" << sh.hkv << " Dh=" << sh.dh);
            AttentionInputs in = make_inputs(sh.t, sh.c, sh.h, sh.hkv, sh.dh, sh.block, 100 + sh.t);
            const BoundMask bound = make_mask(mc.spec, mask_context(tokens, sh.h));
            in.shape.mask = bound.view();
            const AttentionResult got = run_attention(*backend, in);
            const Dense want = dense_reference(in, mc);
            double scale = 0;
            for (double x : want.out) scale = std::max(scale, std::fabs(x));
            REQUIRE(scale > 0.01);  // a real output, not a vector of zeros
            // 1e-6 of the largest output: float rounds each of the <= 9-term dots,
            // the strict exp (<= 2 ulp) and the <= 30-term sums in j order; the
            // worst case is ~50 roundings of 6e-8, and the errors mostly cancel —
            // measured 2.6e-7 of max |out| here. (A wrong mask moves outputs by ~1e-1.)
            double worst = 0;
            for (std::size_t i = 0; i < want.out.size(); ++i)
                worst = std::max(worst, std::fabs(got.out[i] - want.out[i]));
            INFO("max |cpu-ref - dense| = " << worst << " of max |out| " << scale);
            REQUIRE(worst <= 1e-6 * scale);
            worst_ratio = std::max(worst_ratio, worst / scale);
            const int t = sh.t;
            for (int h = 0; h < sh.h; ++h) {
                for (int i = 0; i < sh.c; ++i) {
                    double row = 0;
                    for (int k = 0; k < t; ++k) {
                        const std::size_t cell = std::size_t(i) * t + k;
                        const float p = got.probs[std::size_t(h)][cell];
                        const float sc = got.scores[std::size_t(h)][cell];
                        if (!mc.visible(in.shape.pos0 + i, k)) {
                            // Masked: exactly probability 0 and score -inf, never "small".
                            INFO("masked cell q=" << in.shape.pos0 + i << " k=" << k);
                            REQUIRE(p == 0.0f);
                            REQUIRE(sc == -INFINITY);
                        } else {
                            INFO("visible cell q=" << in.shape.pos0 + i << " k=" << k);
                            REQUIRE(std::isfinite(sc));
                            // Probabilities in [0, 1]: 1e-6 absolute, the same rounding budget.
                            REQUIRE(std::fabs(p - want.probs[std::size_t(h)][cell]) <= 1e-6);
                            row += p;
                        }
                    }
                    REQUIRE(std::fabs(row - 1.0) <= 1e-5);  // T float probabilities, each ~1 ulp
                }
            }
        }
    }
    WARN("cpu-ref vs dense double reference: max |diff| " << worst_ratio << " of max |output|");
}

TEST_CASE("masks: the ALiBi slopes are the paper's", "[mask]") {
    for (int n : {1, 2, 3, 4, 5, 6, 8, 12, 16}) {
        const auto got = alibi_slopes(n), want = reference_alibi_slopes(n);
        REQUIRE(got.size() == std::size_t(n));
        for (int i = 0; i < n; ++i) REQUIRE(got[i] == Approx(want[i]).epsilon(1e-15));
    }
    // The paper's example: 8 heads get 1/2, 1/4, ..., 1/256.
    REQUIRE(alibi_slopes(8)[0] == 0.5);
    REQUIRE(alibi_slopes(8)[7] == 1.0 / 256);
}

TEST_CASE("masks: visible() / the key range and the tile classification agree on every cell",
          "[mask]") {
    const fs::path dir = temp_dir();
    const int t = 37;
    const std::vector<int32_t> tokens = mask_case_tokens(t, 50, 9);
    for (const MaskCase& mc : mask_cases(t, dir)) {
        INFO("mask " << mc.spec);
        const BoundMask bound = make_mask(mc.spec, mask_context(tokens, 4));
        const Mask m = bound.view();
        long long visible = 0;
        for (int q = 0; q < t; ++q) {
            const KeyRange r = m.key_range(q);
            for (int k = 0; k < t; ++k) {
                INFO("q=" << q << " k=" << k);
                REQUIRE(m.visible(q, k) == mc.visible(q, k));  // the independent definition
                if (m.visible(q, k)) {
                    REQUIRE((r.lo <= k && k <= r.hi));  // the range bounds every visible key
                    ++visible;
                }
            }
            // Tight: both ends of the range are visible keys.
            INFO("q=" << q << " range " << r.lo << ".." << r.hi);
            REQUIRE(m.visible(q, r.lo));
            REQUIRE(m.visible(q, r.hi));
        }
        REQUIRE(count_visible_pairs(m, t) == visible);
        for (int tile : {1, 3, 4, 8, 16}) {
            const auto map = tile_map(m, t, tile);
            const int tiles = (t + tile - 1) / tile;
            for (int qt = 0; qt < tiles; ++qt) {
                for (int kt = 0; kt < tiles; ++kt) {
                    int n_vis = 0, n_all = 0;
                    for (int q = qt * tile; q < std::min(t, qt * tile + tile); ++q)
                        for (int k = kt * tile; k < std::min(t, kt * tile + tile); ++k, ++n_all)
                            n_vis += mc.visible(q, k);
                    const TileClass want = n_vis == 0       ? TileClass::empty
                                           : n_vis == n_all ? TileClass::full
                                                            : TileClass::partial;
                    INFO("tile " << tile << " (" << qt << ", " << kt << ")");
                    REQUIRE(map[std::size_t(qt) * tiles + kt] == want);
                    // The query tile's bounds, found once, give the same verdict.
                    const int qa = qt * tile, qb = std::min(t, qa + tile) - 1;
                    const int k0 = kt * tile, k1 = std::min(t, k0 + tile) - 1;
                    REQUIRE(m.classify_tile(m.query_tile_bounds(qa, qb), k0, k1) == want);
                }
            }
        }
    }
}

}  // namespace plab::test
