// The cpu backend's batched and few-query paths (issue 13) give the bits of
// its plain ones: fused projections (matmul_parts) equal one matmul per
// weight; a decode query, whose attention reads K and V straight from the
// paged pool (backends/cpu_fast/cpu_attention_pool.h), equals the same query computed
// inside a long chunk (the gathered-panel GEMM path); attention_batch equals
// one attention call per sequence. Random inputs from fixed seeds, awkward
// sizes (head_dim not a multiple of the vector width, blocks smaller and
// larger than a vector of keys, shuffled and freed blocks, GQA, masks with
// score modifiers). cpu-ref is the independent oracle for the values.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "backends/cpu_fast/cpu_gemm.h"
#include "core/attention_math.h"
#include "core/attention_shape.h"
#include "core/backend.h"
#include "core/kv_layout.h"
#include "runtime/mask_grammar.h"
#include "runtime/registry.h"
#include "test_util.h"

using namespace plab;
using namespace plab::test;

namespace {

std::vector<float> download(Backend& b, Buffer buf) {
    std::vector<float> h(buf.size);
    b.download(h.data(), buf, h.size());
    return h;
}

// A layer's cache: `n_keys` cached positions in blocks of `block_size`, the
// blocks in shuffled physical order, those listed in `freed` marked freed.
struct Cache {
    int n_kv_heads, head_dim, block_size, n_keys;
    std::vector<int32_t> table;
    std::vector<float> k, v;
};

Cache make_cache(int n_kv_heads, int head_dim, int block_size, int n_keys, std::uint64_t seed,
                 const std::vector<int>& freed = {}) {
    Cache c{n_kv_heads, head_dim, block_size, n_keys, {}, {}, {}};
    const int blocks = (n_keys + block_size - 1) / block_size;
    c.table.resize(std::size_t(blocks));
    std::iota(c.table.begin(), c.table.end(), 0);
    std::shuffle(c.table.begin(), c.table.end(), std::mt19937_64(seed));
    for (int b : freed) c.table[std::size_t(b)] = kFreedBlock;
    const std::size_t floats = std::size_t(blocks) * block_size * n_kv_heads * head_dim;
    c.k = random_floats(floats, seed + 1, -2.0f, 2.0f);
    c.v = random_floats(floats, seed + 2);
    return c;
}

// A decode test's inputs: a cache of n_keys positions (make_cache), the mask
// bound to an n_keys-token prompt, and random queries of n_heads heads for
// every position.
struct Scene {
    Cache c;
    BoundMask mask;
    std::vector<float> q;
};

Scene make_scene(int n_heads, int n_kv_heads, int head_dim, int block_size, int n_keys,
                 const char* mask, std::uint64_t cache_seed, std::uint64_t q_seed,
                 const std::vector<int>& freed = {}) {
    Scene s{make_cache(n_kv_heads, head_dim, block_size, n_keys, cache_seed, freed), {}, {}};
    const std::vector<int32_t> tokens(std::size_t(n_keys), 5);
    s.mask = make_mask(mask, {tokens, -1, n_heads});
    s.q = random_floats(std::size_t(n_keys) * n_heads * head_dim, q_seed, -2, 2);
    return s;
}

AttentionShape shape_for(const Cache& c, int n_heads, int n_queries, int pos0, const Mask& mask) {
    return attention_shape(n_queries, pos0, n_heads, c.n_kv_heads, c.head_dim, c.block_size, mask);
}

// Attention of `n_queries` queries (rows of q from `first_row`) at positions
// pos0.. over the cache's first pos0 + n_queries positions.
std::vector<float> attention(Backend& b, const Cache& c, const std::vector<float>& q, int n_heads,
                             int first_row, int n_queries, int pos0, const Mask& mask) {
    const std::size_t row = std::size_t(n_heads) * c.head_dim;
    const std::vector<float> rows(q.begin() + std::ptrdiff_t(first_row * row),
                                  q.begin() + std::ptrdiff_t((first_row + n_queries) * row));
    DeviceArray dq = upload(b, rows), dk = upload(b, c.k), dv = upload(b, c.v);
    DeviceArray out(b, rows.size());
    b.fill(out.buf(), NAN);  // a row nobody wrote stays NaN
    b.attention(out.buf(), dq.buf(), dk.buf(), dv.buf(), c.table,
                shape_for(c, n_heads, n_queries, pos0, mask));
    return download(b, out.buf());
}

// attention(), but the K pool is one the backend was told about
// (prepare_kv_pool: cpu keeps a transposed copy of K, backends/cpu_fast/cpu_key_mirror.h)
// and filled the ways a cache is: garbage first (upload), then positions
// 0..4 and 5..first_run-1 in two kv_appends (whole vectors of slots:
// register transposes; the rest slot by slot), the rest one position at a
// time, last first. `rewrite`:
// kv_append writes wrong K rows (garbage), then an upload of the whole pool
// puts the right ones (the mirror must follow the upload).
std::vector<float> attention_mirrored(Backend& b, const Cache& c, const std::vector<float>& q,
                                      int n_heads, int first_row, int n_queries, int pos0,
                                      const Mask& mask, int first_run, bool rewrite) {
    const int row = c.n_kv_heads * c.head_dim;
    const std::size_t qrow = std::size_t(n_heads) * c.head_dim;
    const std::vector<float> rows(q.begin() + std::ptrdiff_t(first_row * qrow),
                                  q.begin() + std::ptrdiff_t((first_row + n_queries) * qrow));
    DeviceArray dq = upload(b, rows), dk(b, c.k.size()), dv(b, c.v.size());
    b.prepare_kv_pool(dk.buf(), c.block_size, row);
    const auto garbage = random_floats(c.k.size(), 77, -3.0f, 3.0f);
    b.upload(dk.buf(), garbage.data(), garbage.size());
    b.upload(dv.buf(), garbage.data(), garbage.size());
    const auto append = [&](const std::vector<int>& positions) {
        std::vector<int32_t> slots;
        std::vector<float> kr, vr;
        for (int p : positions) {
            if (kv_block_freed(c.table.data(), p, c.block_size)) continue;  // stays garbage
            const int slot = kv_slot(c.table.data(), p, c.block_size);
            slots.push_back(slot);
            const std::vector<float>& k_src = rewrite ? garbage : c.k;
            kr.insert(kr.end(), k_src.begin() + std::ptrdiff_t(slot) * row,
                      k_src.begin() + std::ptrdiff_t(slot + 1) * row);
            vr.insert(vr.end(), c.v.begin() + std::ptrdiff_t(slot) * row,
                      c.v.begin() + std::ptrdiff_t(slot + 1) * row);
        }
        if (slots.empty()) return;
        DeviceArray k = upload(b, kr), v = upload(b, vr);
        b.kv_append(dk.buf(), dv.buf(), k.buf(), v.buf(), slots, row);
    };
    // Positions 0..4, then 5..first_run-1: the second run starts inside a
    // vector of slots (lone slots until the next lane-aligned one, whole
    // vectors after it).
    std::vector<int> head(5), run(std::size_t(std::min(first_run, c.n_keys) - 5));
    std::iota(head.begin(), head.end(), 0);
    std::iota(run.begin(), run.end(), 5);
    append(head);
    append(run);
    for (int p = c.n_keys - 1; p >= first_run; --p) append({p});
    if (rewrite) b.upload(dk.buf(), c.k.data(), c.k.size());
    DeviceArray out(b, rows.size());
    b.fill(out.buf(), NAN);
    b.attention(out.buf(), dq.buf(), dk.buf(), dv.buf(), c.table,
                shape_for(c, n_heads, n_queries, pos0, mask));
    return download(b, out.buf());
}

}  // namespace

TEST_CASE("cpu matmul_parts: fused projections give the bits of one matmul per weight",
          "[cpu][fast-paths]") {
    auto cpu = make_backend("cpu");
    struct Case {
        int m, k;
        std::vector<int> n;
    };
    // Q, K, V of a GQA model (one K/V width), gate and up, widths that are no
    // multiple of a panel, and row counts from a decode step to a chunk with
    // a remainder of micro-tile rows.
    for (const Case& t :
         {Case{1, 288, {288, 96, 96}}, Case{5, 131, {77, 1001}}, Case{64, 288, {768, 768}},
          Case{130, 200, {33, 17, 250}}, Case{7, 768, {2304, 2048}}}) {
        INFO("m=" << t.m << " k=" << t.k << ", " << t.n.size() << " parts");
        const auto x = random_floats(std::size_t(t.m) * t.k, 300 + t.m, -1.0f, 1.0f);
        DeviceArray dx = upload(*cpu, x);
        std::vector<DeviceArray> w, fused, alone;
        std::vector<MatmulPart> parts;
        for (std::size_t i = 0; i < t.n.size(); ++i) {
            const int n = t.n[i];
            w.push_back(upload(*cpu, random_floats(std::size_t(n) * t.k, 310 + i, -1.0f, 1.0f)));
            // One weight prepared (packed once, as a model's are), the others packed per call.
            if (i == 0) cpu->prepare_weight(w.back().buf(), n, t.k);
            fused.emplace_back(*cpu, std::size_t(t.m) * n);
            alone.emplace_back(*cpu, std::size_t(t.m) * n);
            cpu->fill(fused.back().buf(), NAN);
            parts.push_back({fused.back().buf(), w.back().buf(), n});
        }
        cpu->matmul_parts(dx.buf(), t.m, t.k, parts);
        for (std::size_t i = 0; i < t.n.size(); ++i) {
            cpu->matmul(alone[i].buf(), dx.buf(), w[i].buf(), t.m, t.n[i], t.k);
            const auto want = download(*cpu, alone[i].buf());
            require_not_all_zero(want, "matmul");
            require_bitwise_equal(download(*cpu, fused[i].buf()), want,
                                  "part " + std::to_string(i));
        }
    }
}

TEST_CASE(
    "cpu attention: a decode query read straight from the pool has the bits of the same "
    "query inside a long chunk",
    "[cpu][fast-paths]") {
    auto cpu = make_backend("cpu");
    auto ref = make_backend("cpu-ref");
    struct Case {
        int n_heads, n_kv_heads, head_dim, block_size;
        const char* mask;
    };
    // head_dim 48 (a multiple of 16 lanes), 40 and 72 (a tail), 17 (less than
    // a vector), and 24, 32, 56 and 64: with 64 (AVX-512: 4) the V pass
    // (weighted_values_from_pool, up to 8 vectors a pass) has a pass of every
    // width from 1 to 8 vectors on AVX2 (8 lanes), a scalar tail, and two
    // passes (72); blocks of 4 and 8 (a vector of keys crosses blocks), 16
    // and 32; GQA; masks that never look ahead, with and without modifiers.
    for (const Case& t : {Case{6, 6, 48, 16, "causal"}, Case{8, 2, 40, 4, "window:37"},
                          Case{3, 1, 72, 32, "causal+alibi"}, Case{4, 4, 17, 8, "window:20+sink:3"},
                          Case{2, 2, 64, 16, "causal+softcap:5"}, Case{2, 1, 56, 8, "causal"},
                          Case{2, 2, 24, 16, "causal"}, Case{3, 3, 32, 4, "window:9"}}) {
        INFO(t.n_heads << " heads, " << t.n_kv_heads << " K/V heads, head_dim " << t.head_dim
                       << ", blocks of " << t.block_size << ", mask " << t.mask);
        const int n_keys = 150;
        const Scene scene = make_scene(t.n_heads, t.n_kv_heads, t.head_dim, t.block_size, n_keys,
                                       t.mask, 400 + std::uint64_t(t.head_dim), 401);
        const Cache& c = scene.c;
        const BoundMask& mask = scene.mask;
        const std::vector<float>& q = scene.q;
        // Positions 70..149 as one chunk: the gathered-panel GEMM path.
        const int pos0 = 70, chunk = n_keys - pos0;
        const auto whole = attention(*cpu, c, q, t.n_heads, pos0, chunk, pos0, mask.view());
        require_not_all_zero(whole, "cpu attention of the chunk");
        const std::size_t row = std::size_t(t.n_heads) * t.head_dim;
        for (int p : {70, 71, 85, 95, 96, 111, 127, 128, 149}) {
            INFO("decode query at position " << p);
            const auto one = attention(*cpu, c, q, t.n_heads, p, 1, p, mask.view());
            const std::vector<float> same(whole.begin() + std::ptrdiff_t((p - pos0) * row),
                                          whole.begin() + std::ptrdiff_t((p - pos0 + 1) * row));
            require_bitwise_equal(one, same, "one query from the pool vs inside the chunk");
            // Two and three queries take the pool path too.
            if (p + 3 <= n_keys) {
                const auto three = attention(*cpu, c, q, t.n_heads, p, 3, p, mask.view());
                const std::vector<float> same3(
                    whole.begin() + std::ptrdiff_t((p - pos0) * row),
                    whole.begin() + std::ptrdiff_t((p - pos0 + 3) * row));
                require_bitwise_equal(three, same3, "three queries from the pool");
            }
            require_allclose(one, attention(*ref, c, q, t.n_heads, p, 1, p, mask.view()), 1e-6,
                             1e-5, "cpu's stated tolerance against cpu-ref (FMA, vector exp)");
        }
    }
}

TEST_CASE("cpu attention reads V in place from consecutive blocks: the gathered copy's bits",
          "[cpu][fast-paths]") {
    // A cold prompt in a fresh cache has blocks 0, 1, 2, ...: its V rows are
    // one strided matrix in the pool and P·V reads them there (cpu_fast_attention.cpp,
    // v_in_place) when head_dim is whole vector registers. The oracle: the
    // same logical cache with its blocks shuffled, which takes the gather.
    auto cpu = make_backend("cpu");
    auto ref = make_backend("cpu-ref");
    const int lanes = cpu_gemm::lanes();
    struct Case {
        int n_heads, n_kv_heads, head_dim, block_size, n_keys, pos0;
        const char* mask;
    };
    for (const Case& k :
         {Case{4, 2, lanes, 8, 70, 0, "causal"}, Case{3, 3, 3 * lanes, 16, 133, 40, "causal"},
          Case{2, 1, 4 * lanes, 5, 97, 9, "window:20"},
          Case{2, 2, 3 * lanes, 16, 61, 0, "prefix:13"}}) {
        INFO("H=" << k.n_heads << " Hkv=" << k.n_kv_heads << " Dh=" << k.head_dim
                  << " block=" << k.block_size << " keys=" << k.n_keys << " pos0=" << k.pos0
                  << " mask " << k.mask);
        const Scene scene = make_scene(k.n_heads, k.n_kv_heads, k.head_dim, k.block_size, k.n_keys,
                                       k.mask, 900 + k.n_keys, 901 + k.n_keys);
        // In order: physical block b holds logical block b.
        Cache in_order = scene.c;
        std::iota(in_order.table.begin(), in_order.table.end(), 0);
        // Shuffled: the same logical blocks at scene.c's physical places.
        Cache shuffled = in_order;
        shuffled.table = scene.c.table;
        const std::size_t block_floats = std::size_t(k.block_size) * k.n_kv_heads * k.head_dim;
        for (std::size_t b = 0; b < shuffled.table.size(); ++b) {
            const std::size_t to = std::size_t(shuffled.table[b]) * block_floats;
            std::copy_n(in_order.k.begin() + std::ptrdiff_t(b * block_floats), block_floats,
                        shuffled.k.begin() + std::ptrdiff_t(to));
            std::copy_n(in_order.v.begin() + std::ptrdiff_t(b * block_floats), block_floats,
                        shuffled.v.begin() + std::ptrdiff_t(to));
        }
        REQUIRE(shuffled.table != in_order.table);
        const int n_queries = k.n_keys - k.pos0;
        const Mask m = scene.mask.view();
        const auto direct =
            attention(*cpu, in_order, scene.q, k.n_heads, k.pos0, n_queries, k.pos0, m);
        require_bitwise_equal(
            direct, attention(*cpu, shuffled, scene.q, k.n_heads, k.pos0, n_queries, k.pos0, m),
            "V in place vs gathered");
        require_allclose(
            direct, attention(*ref, in_order, scene.q, k.n_heads, k.pos0, n_queries, k.pos0, m),
            1e-6, 1e-5, "cpu's stated tolerance against cpu-ref");
    }
}

TEST_CASE("cpu attention from the pool: freed blocks read as zeros, as in the gathered copy",
          "[cpu][fast-paths]") {
    auto cpu = make_backend("cpu");
    auto ref = make_backend("cpu-ref");
    // A sliding window of 20 over blocks of 8: by position 100 blocks 0..8
    // (keys 0..71) are out of every later query's window; blocks 2, 3 and 5
    // are freed (their table entry says so; their memory holds garbage).
    const int n_keys = 101;
    const Scene scene = make_scene(2, 2, 24, 8, n_keys, "window:20", 500, 501, {2, 3, 5});
    const Cache& c = scene.c;
    const BoundMask& mask = scene.mask;
    const std::vector<float>& q = scene.q;
    const int pos0 = 80;
    const auto whole = attention(*cpu, c, q, 2, pos0, n_keys - pos0, pos0, mask.view());
    const std::size_t row = 2 * 24;
    for (int p : {80, 90, 100}) {
        const auto one = attention(*cpu, c, q, 2, p, 1, p, mask.view());
        require_bitwise_equal(
            one,
            std::vector<float>(whole.begin() + std::ptrdiff_t((p - pos0) * row),
                               whole.begin() + std::ptrdiff_t((p - pos0 + 1) * row)),
            "decode query with freed blocks");
        require_allclose(one, attention(*ref, c, q, 2, p, 1, p, mask.view()), 1e-6, 1e-5,
                         "cpu's stated tolerance against cpu-ref");
    }
}

TEST_CASE("cpu attention_batch: many sequences side by side give each one's bits alone",
          "[cpu][fast-paths]") {
    auto cpu = make_backend("cpu");
    // 40 decode queries (contexts 1..300), a 3-query chunk and a 120-query
    // prefill chunk (large enough to be split on its own) in one call, each
    // over its own block table in one shared pool.
    const int n_heads = 4, n_kv_heads = 2, head_dim = 40, block_size = 16;
    const int row = n_kv_heads * head_dim, qrow = n_heads * head_dim;
    struct Seq {
        int n_queries, pos0;
        std::vector<int32_t> table;
        std::vector<float> q;
    };
    std::vector<Seq> seqs;
    std::mt19937_64 rng(600);
    int next_block = 0;
    for (int i = 0; i < 42; ++i) {
        Seq s;
        s.n_queries = i == 40 ? 3 : i == 41 ? 120 : 1;
        s.pos0 = i == 41 ? 200 : int(rng() % 300);
        const int blocks = (s.pos0 + s.n_queries + block_size - 1) / block_size;
        for (int b = 0; b < blocks; ++b) s.table.push_back(next_block++);
        std::shuffle(s.table.begin(), s.table.end(), rng);
        s.q = random_floats(std::size_t(s.n_queries) * qrow, 610 + std::uint64_t(i), -2, 2);
        seqs.push_back(std::move(s));
    }
    const std::size_t pool = std::size_t(next_block) * block_size * row;
    DeviceArray k = upload(*cpu, random_floats(pool, 620, -2, 2));
    DeviceArray v = upload(*cpu, random_floats(pool, 621));
    std::vector<DeviceArray> q, batched, alone;
    std::vector<AttentionCall> calls;
    for (const Seq& s : seqs) {
        q.push_back(upload(*cpu, s.q));
        batched.emplace_back(*cpu, s.q.size());
        alone.emplace_back(*cpu, s.q.size());
        cpu->fill(batched.back().buf(), NAN);
        AttentionShape shape;
        shape.n_queries = s.n_queries;
        shape.pos0 = s.pos0;
        shape.n_heads = n_heads;
        shape.n_kv_heads = n_kv_heads;
        shape.head_dim = head_dim;
        shape.block_size = block_size;
        shape.scale = 1.0f / std::sqrt(float(head_dim));
        calls.push_back({batched.back().buf(), q.back().buf(), s.table, shape});
    }
    cpu->attention_batch(k.buf(), v.buf(), calls);
    for (std::size_t i = 0; i < calls.size(); ++i) {
        INFO("sequence " << i << ": " << seqs[i].n_queries << " queries after " << seqs[i].pos0);
        cpu->attention(alone[i].buf(), q[i].buf(), k.buf(), v.buf(), calls[i].block_table,
                       calls[i].shape);
        const auto want = download(*cpu, alone[i].buf());
        require_not_all_zero(want, "attention alone");
        require_bitwise_equal(download(*cpu, batched[i].buf()), want, "in the batch vs alone");
    }
}

TEST_CASE(
    "cpu rmsnorm: lane-wise sums within rounding of cpu-ref, and a row keeps its bits whatever "
    "rows share its call",
    "[cpu][fast-paths]") {
    auto cpu = make_backend("cpu");
    auto ref = make_backend("cpu-ref");
    for (const int dim : {288, 768, 17, 100}) {
        INFO("dim " << dim);
        const int rows = 70;  // above the row split, so tasks run on the pool
        const auto x = random_floats(std::size_t(rows) * dim, 700 + std::uint64_t(dim), -3, 3);
        const auto w = random_floats(std::size_t(dim), 701, 0.5f, 1.5f);
        const auto norm = [&](Backend& b, int first, int n) {
            const std::vector<float> part(x.begin() + std::ptrdiff_t(first) * dim,
                                          x.begin() + std::ptrdiff_t(first + n) * dim);
            DeviceArray dx = upload(b, part), dw = upload(b, w), out(b, part.size());
            b.fill(out.buf(), NAN);
            b.rmsnorm(out.buf(), dx.buf(), dw.buf(), n, dim, 1e-5f);
            return download(b, out.buf());
        };
        const auto all = norm(*cpu, 0, rows);
        require_allclose(all, norm(*ref, 0, rows), 1e-6, 1e-5,
                         "a sum of squares in 16 lanes vs in order: a few ulp of the 1/rms factor");
        // Rows 33..35 alone, as a decode step or a short chunk would hold them.
        require_bitwise_equal(norm(*cpu, 33, 3),
                              std::vector<float>(all.begin() + 33 * dim, all.begin() + 36 * dim),
                              "rows 33..35 alone vs among 70");
    }
}

TEST_CASE(
    "add_rmsnorm (the residual add and the next norm in one pass) gives the bits of add then "
    "rmsnorm, on every backend",
    "[cpu][fast-paths]") {
    for (const std::string& name : backend_names()) {
        auto b = make_backend(name);
        // Sizes: the two shapes' widths, one not a multiple of a vector, one
        // below a vector; one row (a decode step), part of a task of rows,
        // several tasks.
        for (const int dim : {288, 768, 17, 5}) {
            for (const int rows : {1, 7, 70}) {
                INFO(name << ", dim " << dim << ", rows " << rows);
                const std::size_t n = std::size_t(rows) * dim;
                const auto x = random_floats(n, 800 + std::uint64_t(dim) + rows, -3, 3);
                const auto y = random_floats(n, 900 + std::uint64_t(dim) + rows, -3, 3);
                const auto w = random_floats(std::size_t(dim), 801, 0.5f, 1.5f);
                DeviceArray dw = upload(*b, w);
                // Fused.
                DeviceArray fx = upload(*b, x), fy = upload(*b, y), fout(*b, n);
                b->fill(fout.buf(), NAN);
                b->add_rmsnorm(fx.buf(), fy.buf(), fout.buf(), dw.buf(), rows, dim, 1e-5f);
                // The two ops.
                DeviceArray sx = upload(*b, x), sy = upload(*b, y), sout(*b, n);
                b->fill(sout.buf(), NAN);
                b->add(sx.buf(), sy.buf(), n);
                b->rmsnorm(sout.buf(), sx.buf(), dw.buf(), rows, dim, 1e-5f);
                const auto want_x = download(*b, sx.buf()), want_out = download(*b, sout.buf());
                require_not_all_zero(want_out, "normalised rows");
                require_bitwise_equal(download(*b, fx.buf()), want_x, "x after the residual add");
                require_bitwise_equal(download(*b, fout.buf()), want_out, "the normalised rows");
            }
        }
    }
}

TEST_CASE("cpu argmax: the reference's index for rows with NaN, -inf and signed zeros",
          "[fast-paths]") {
    // The vector scan (cpu_vector::argmax) takes the maximum in lanes, then
    // the first vector holding it; a row with a NaN goes to the reference's
    // scalar scan. Rows where a lane-wise rule could differ from "x[i] >
    // x[best]": every value -inf, -0 before +0, a NaN first, in the middle, in
    // the tail. cpu-ref's scan is the oracle.
    auto ref = make_backend("cpu-ref");
    auto fast = make_backend("cpu");
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int n : {1, 5, 16, 37, 300}) {
        std::vector<std::vector<float>> rows;
        rows.push_back(std::vector<float>(std::size_t(n), -INFINITY));
        std::vector<float> zeros(std::size_t(n), 0.0f);
        zeros[0] = -0.0f;
        rows.push_back(zeros);
        for (int at : {0, n / 2, n - 1}) {
            auto r = random_floats(std::size_t(n), 90 + n + at);
            r[std::size_t(at)] = nan;
            rows.push_back(r);
        }
        for (const auto& r : rows) {
            DeviceArray a = upload(*ref, r), b = upload(*fast, r);
            INFO("n=" << n << ", first values " << r[0]);
            REQUIRE(fast->argmax(b.buf(), r.size()) == ref->argmax(a.buf(), r.size()));
            std::vector<int32_t> one(1);
            fast->argmax_rows(b.buf(), 1, r.size(), one);
            REQUIRE(one[0] == ref->argmax(a.buf(), r.size()));
        }
    }
}

TEST_CASE(
    "cpu attention from the K mirror (prepare_kv_pool, kept by kv_append, upload, fill) has "
    "the bits of the chunk path",
    "[cpu][fast-paths]") {
    // A pool the backend was told about keeps a copy of K transposed block
    // by block; a decode query's scores then read it instead of transposing
    // rows. Its bits must be those of the same query inside a long chunk
    // (gathered panels, no mirror). Blocks of 16 and 32 (a mirror), 8 and 5
    // (none with 16 lanes: the transposing path), head_dim with and without
    // a tail, GQA, freed blocks of a sliding window, modifiers; the mirror
    // written by kv_append (runs of whole vectors and single slots) or
    // rewritten by fill and upload.
    auto cpu = make_backend("cpu");
    struct Case {
        int n_heads, n_kv_heads, head_dim, block_size;
        const char* mask;
        std::vector<int> freed;
    };
    for (const Case& t :
         {Case{6, 6, 48, 16, "causal", {}}, Case{8, 2, 40, 32, "window:37", {0, 1}},
          Case{3, 1, 72, 16, "causal+alibi", {}}, Case{4, 4, 17, 16, "window:20+sink:3", {}},
          Case{2, 2, 64, 8, "causal+softcap:5", {}}, Case{2, 2, 24, 5, "window:30", {3, 7}},
          Case{2, 2, 24, 16, "window:20", {1, 2}}}) {
        INFO(t.n_heads << " heads, " << t.n_kv_heads << " K/V heads, head_dim " << t.head_dim
                       << ", blocks of " << t.block_size << ", mask " << t.mask);
        const int n_keys = 150;
        const Scene scene = make_scene(t.n_heads, t.n_kv_heads, t.head_dim, t.block_size, n_keys,
                                       t.mask, 600 + std::uint64_t(t.head_dim), 601, t.freed);
        const Cache& c = scene.c;
        const BoundMask& mask = scene.mask;
        const std::vector<float>& q = scene.q;
        const int pos0 = 96, chunk = n_keys - pos0;
        const auto whole = attention(*cpu, c, q, t.n_heads, pos0, chunk, pos0, mask.view());
        require_not_all_zero(whole, "cpu attention of the chunk");
        const std::size_t row = std::size_t(t.n_heads) * t.head_dim;
        for (int p : {96, 111, 112, 127, 128, 149}) {
            for (bool rewrite : {false, true}) {
                INFO("decode query at position " << p << (rewrite ? ", K rewritten" : ""));
                const auto one =
                    attention_mirrored(*cpu, c, q, t.n_heads, p, 1, p, mask.view(), 64, rewrite);
                const std::vector<float> same(whole.begin() + std::ptrdiff_t((p - pos0) * row),
                                              whole.begin() + std::ptrdiff_t((p - pos0 + 1) * row));
                require_bitwise_equal(one, same, "one query from the mirror vs inside the chunk");
            }
        }
        // A fill reaches the mirror too: K all zeros, so every visible key
        // scores 0 and the output is the mean of the visible V rows — here
        // compared with the chunk path over the same zeroed cache.
        Cache zeroed = c;
        std::fill(zeroed.k.begin(), zeroed.k.end(), 0.0f);
        const auto whole_zero =
            attention(*cpu, zeroed, q, t.n_heads, pos0, chunk, pos0, mask.view());
        for (int p : {111, 149}) {
            INFO("decode query at position " << p << " after a fill of K");
            DeviceArray dq =
                upload(*cpu, std::vector<float>(q.begin() + std::ptrdiff_t(p * row),
                                                q.begin() + std::ptrdiff_t((p + 1) * row)));
            DeviceArray dk = upload(*cpu, c.k), dv = upload(*cpu, c.v), out(*cpu, row);
            cpu->prepare_kv_pool(dk.buf(), t.block_size, t.n_kv_heads * t.head_dim);
            cpu->fill(dk.buf(), 0.0f);
            cpu->attention(out.buf(), dq.buf(), dk.buf(), dv.buf(), c.table,
                           shape_for(c, t.n_heads, 1, p, mask.view()));
            require_bitwise_equal(
                download(*cpu, out.buf()),
                std::vector<float>(whole_zero.begin() + std::ptrdiff_t((p - pos0) * row),
                                   whole_zero.begin() + std::ptrdiff_t((p - pos0 + 1) * row)),
                "after a fill: the mirror holds zeros too");
        }
    }
}
