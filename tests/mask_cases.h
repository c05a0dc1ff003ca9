// Mask test cases shared by tests/engine/test_mask.cpp and tests/gpu/test_gpu_mask.cpp:
// every mask kind, compositions and modifiers, each with its rule written
// again here, from the definition, as an independent oracle (it never calls core/mask.h).
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "runtime/equivalence.h"
#include "runtime/mask_grammar.h"

namespace plab::test {

struct MaskCase {
    std::string spec;
    std::function<bool(int q, int k)> visible;  // the definition, restated
    bool sees_future = false;  // some query sees a key after itself (prefix-LM, OR with it)
    bool alibi = false;
    double softcap = 0;
};

constexpr int kMaskBos = 1;  // the BOS id of docs:bos cases

// Tokens for a prompt of T tokens whose docs:bos documents start at 0, 3 and 7 (if T allows).
inline std::vector<int32_t> mask_case_tokens(int t, int vocab, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> ids(static_cast<std::size_t>(t));
    for (auto& id : ids) id = 2 + static_cast<int32_t>(rng() % std::uint64_t(vocab - 2));
    for (int p : {0, 3, 7})
        if (p < t) ids[std::size_t(p)] = kMaskBos;
    return ids;
}

// A custom mask file of T rows in `dir`: random lower-triangular with the
// diagonal set (causal-compatible) or, with `future`, random cells above it too.
inline std::string write_custom_mask(const std::filesystem::path& dir, int t, bool future,
                                     std::uint64_t seed, std::vector<std::vector<bool>>& cells) {
    std::mt19937_64 rng(seed);
    cells.assign(std::size_t(t), std::vector<bool>(std::size_t(t), false));
    const std::filesystem::path path =
        dir / ("mask_" + std::to_string(t) + (future ? "_future" : "") + ".txt");
    std::ofstream f(path);
    f << "# custom mask, " << t << " x " << t << "\n";
    for (int q = 0; q < t; ++q) {
        for (int k = 0; k < t; ++k) {
            const bool on = k == q || ((k < q || future) && rng() % 3 != 0);
            cells[std::size_t(q)][std::size_t(k)] = on;
            f << (on ? '1' : '0') << (k + 1 < t ? " " : "");
        }
        f << "\n";
    }
    return path.string();
}

// Every kind and a few combinations, for a prompt of T >= 10 tokens.
inline std::vector<MaskCase> mask_cases(int t, const std::filesystem::path& dir) {
    std::vector<MaskCase> cases;
    const int p = 4;  // prefix length
    // docs: lengths 3, 4, T-7
    auto doc_of = [](int pos, std::vector<int> starts) {
        int d = 0;
        for (std::size_t i = 0; i < starts.size(); ++i)
            if (pos >= starts[i]) d = static_cast<int>(i);
        return d;
    };
    const std::vector<int> starts{0, 3, 7};  // for both docs:3,4,T-7 and docs:bos
    cases.push_back({"causal", [](int q, int k) { return k <= q; }});
    cases.push_back({"window:3", [](int q, int k) { return k <= q && q - k < 3; }});
    cases.push_back(
        {"window:3+sink:2", [](int q, int k) { return k <= q && (q - k < 3 || k < 2); }});
    cases.push_back(
        {"dilated:3,2", [](int q, int k) { return k <= q && (q - k) % 2 == 0 && q - k <= 4; }});
    cases.push_back({"chunked:4", [](int q, int k) { return k <= q && q / 4 == k / 4; }});
    cases.push_back({"prefix:" + std::to_string(p),
                     [p](int q, int k) { return k <= q || (q < p && k < p); }, true});
    cases.push_back({"docs:3,4," + std::to_string(t - 7), [=](int q, int k) {
                         return k <= q && doc_of(q, starts) == doc_of(k, starts);
                     }});
    cases.push_back({"docs:bos", [=](int q, int k) {
                         return k <= q && doc_of(q, starts) == doc_of(k, starts);
                     }});
    auto cells = std::make_shared<std::vector<std::vector<bool>>>();
    const std::string file = write_custom_mask(dir, t, false, 77 + t, *cells);
    cases.push_back({"file:" + file, [cells](int q, int k) {
                         return bool((*cells)[std::size_t(q)][std::size_t(k)]);
                     }});
    cases.push_back(
        {"chunked:4+window:3", [](int q, int k) { return k <= q && q / 4 == k / 4 && q - k < 3; }});
    cases.push_back({"window:2|chunked:5",
                     [](int q, int k) { return k <= q && (q - k < 2 || q / 5 == k / 5); }});
    cases.push_back({"causal+alibi", [](int q, int k) { return k <= q; }, false, true});
    cases.push_back({"window:6+softcap:2", [](int q, int k) { return k <= q && q - k < 6; }, false,
                     false, 2.0});
    cases.push_back({"docs:3,4," + std::to_string(t - 7) + "+alibi+softcap:3",
                     [=](int q, int k) { return k <= q && doc_of(q, starts) == doc_of(k, starts); },
                     false, true, 3.0});
    cases.push_back({"prefix:" + std::to_string(p) + "+alibi",
                     [p](int q, int k) { return k <= q || (q < p && k < p); }, true, true});
    auto future = std::make_shared<std::vector<std::vector<bool>>>();
    const std::string future_file = write_custom_mask(dir, t, true, 91 + t, *future);
    cases.push_back(
        {"file:" + future_file,
         [future](int q, int k) { return bool((*future)[std::size_t(q)][std::size_t(k)]); }, true});
    return cases;
}

// The ALiBi slopes restated from the paper's reference code (Press et al. 2022):
// get_slopes(n) = geometric from 2^(-8/n) for n a power of two; otherwise the
// closest lower power's slopes followed by every other slope of twice that.
inline std::vector<double> reference_alibi_slopes(int n) {
    auto pow2 = [](int m) {
        std::vector<double> s;
        const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(double(m)) - 3)));
        for (int i = 0; i < m; ++i) s.push_back(start * std::pow(start, i));
        return s;
    };
    const double l = std::log2(double(n));
    if (l == std::floor(l)) return pow2(n);
    const int closest = 1 << int(std::floor(l));
    std::vector<double> out = pow2(closest);
    const std::vector<double> twice = reference_alibi_slopes(2 * closest);
    for (std::size_t i = 0; out.size() < std::size_t(n); i += 2) out.push_back(twice[i]);
    return out;
}

inline MaskContext mask_context(const std::vector<int32_t>& tokens, int n_heads) {
    MaskContext mc;
    mc.tokens = tokens;
    mc.bos_id = kMaskBos;
    mc.n_heads = n_heads;
    return mc;
}

// The tile counts a tiled attention kernel must report for a prefill with
// `plan` under `mask`, from the mask's classification of the kernel's own tiling
// (query tiles from each chunk's first query, key tiles aligned to position 0),
// times layers and heads.
inline AttentionTileCounts expected_tile_counts(const Mask& mask, const ChunkPlan& plan,
                                                int n_layers, int n_heads, int query_tile,
                                                int key_tile) {
    AttentionTileCounts c;
    int pos0 = 0;
    for (int len : plan.lengths) {
        const int n_keys = pos0 + len;
        for (int i0 = 0; i0 < len; i0 += query_tile) {
            const int qa = pos0 + i0, qb = pos0 + std::min(len, i0 + query_tile) - 1;
            for (int k0 = 0; k0 < n_keys; k0 += key_tile) {
                const TileClass t =
                    mask.classify_tile(qa, qb, k0, std::min(n_keys, k0 + key_tile) - 1);
                (t == TileClass::empty     ? c.skipped
                 : t == TileClass::partial ? c.partial
                                           : c.full) += static_cast<long long>(n_layers) * n_heads;
            }
        }
        pos0 += len;
    }
    return c;
}

// Prefills `tokens` with `plan` on a tiled (fast) backend and requires the tiles
// it counted to be exactly those the mask's classification calls empty, partial
// and full: the kernel skips what it says and no more.
inline PrefillSnapshot prefill_checking_tiles(Backend& fast, const DeviceModel& model,
                                              const std::vector<int32_t>& tokens,
                                              const ChunkPlan& plan, const SessionOptions& so) {
    fast.reset_attention_tile_counts();
    PrefillSnapshot got = run_prefill_snapshot(model, tokens, plan, so);
    const AttentionTileCounts n = fast.attention_tile_counts();
    const AttentionTileCounts e =
        expected_tile_counts(so.mask.view(), plan, model.config().n_layers, model.config().n_heads,
                             n.query_tile, n.key_tile);
    // The tiling each fast kernel is written for: 48 queries on cpu (a
    // multiple of its GEMM's 6-row tile, cpu_fast_attention.cpp), 64 on gpu (attention_flash_kernel.cuh).
    REQUIRE(n.query_tile == (fast.name() == "cpu" ? 48 : 64));
    REQUIRE(n.skipped == e.skipped);
    REQUIRE(n.partial == e.partial);
    REQUIRE(n.full == e.full);
    return got;
}

}  // namespace plab::test
