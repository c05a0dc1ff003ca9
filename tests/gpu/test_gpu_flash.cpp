// The gpu backend's flash attention, one instantiation per compiled head_dim,
// against cpu-ref.
//
// What it shows: every attention_flash_kernel<Dh> of kFlashHeadDims
// (kernels/kernels.h) agrees with cpu-ref's scalar attention on awkward
// shapes: query counts that are not a multiple of the 64-query tile, key
// counts that cross 64-key tiles and KV blocks, grouped-query attention, a
// single decode query, and masks that make tiles empty, partial and full (with
// ALiBi and soft-capping on the scores). The tile counts the kernel reports
// are exactly what core/mask.h classifies for its tiling. The KV pools hold NaN
// in every slot no position uses and the output starts as NaN, so a kernel that
// reads a wrong slot or forgets an output fails. Past the largest compiled
// size (128) the backend runs the generic path (gpu-ref's kernel), and flash
// attention itself names its range with one line. Dh >= 48 needs more than 48 KiB of
// shared memory: under the emulator it runs only because the launcher opts
// in, and under each architecture's profile ([arch]) with the tiles that fit.
// Runs emulated everywhere, natively too where a CUDA device is present.
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <random>

#include "core/attention_shape.h"
#include "gpu_test_util.h"
#include "kernels.h"
#include "mask_cases.h"
#include "runtime/mask_grammar.h"
#include "runtime/registry.h"
#include "simt/simt.h"
#include "test_util.h"

namespace plab::test {
namespace {

struct FlashCase {
    const char* what;
    int n_queries, pos0, n_heads, n_kv_heads, block_size;
};

// clang-format off
const FlashCase kCases[] = {
    {"65 queries: two query tiles, the second with one query; GQA 2:1", 65,  0, 4, 2,  5},
    {"7 queries at 58: keys cross two key tiles and 16-slot blocks; GQA 3:1", 7, 58, 3, 1, 16},
    {"134 queries at 3: three query tiles (64, 64, 6); multi-head", 134,  3, 2, 2,  7},
    {"1 query at 40: a decode step over 41 keys; GQA 2:1",           1, 40, 2, 1,  3},
    {"70 queries at 250: rows whose keys cross the first 256-key segment", 70, 250, 2, 2, 16},
    {"1 query at 600: a decode step split over three 256-key segments", 1, 600, 2, 1, 16},
};
// clang-format on

// Masks with empty, partial and full tiles, and the score modifiers.
const char* const kMasks[] = {"causal", "window:37+sink:3", "chunked:20+alibi+softcap:4"};

// One attention problem: a scrambled block table over a pool with spare blocks,
// NaN in every slot no position uses.
struct Problem {
    AttentionShape s;
    std::vector<int32_t> table;
    std::vector<float> q, k_pool, v_pool;
};

Problem make_problem(const FlashCase& c, int head_dim, std::uint64_t seed) {
    Problem p;
    p.s = attention_shape(c.n_queries, c.pos0, c.n_heads, c.n_kv_heads, head_dim, c.block_size);
    const int n_keys = p.s.n_keys();
    const int n_blocks = (n_keys + c.block_size - 1) / c.block_size;
    const int pool_blocks = n_blocks + 2;
    p.table.resize(static_cast<std::size_t>(pool_blocks));
    std::iota(p.table.begin(), p.table.end(), 0);
    std::mt19937_64 rng(seed);
    std::shuffle(p.table.begin(), p.table.end(), rng);
    p.table.resize(static_cast<std::size_t>(n_blocks));
    const int row = c.n_kv_heads * head_dim;
    p.k_pool.assign(std::size_t(pool_blocks) * c.block_size * row, NAN);
    p.v_pool = p.k_pool;
    const auto k = random_floats(std::size_t(n_keys) * row, seed + 1, -2.0f, 2.0f);
    const auto v = random_floats(std::size_t(n_keys) * row, seed + 2);
    for (int pos = 0; pos < n_keys; ++pos) {
        const int slot = kv_slot(p.table.data(), pos, c.block_size);
        std::copy_n(k.begin() + std::size_t(pos) * row, row,
                    p.k_pool.begin() + std::size_t(slot) * row);
        std::copy_n(v.begin() + std::size_t(pos) * row, row,
                    p.v_pool.begin() + std::size_t(slot) * row);
    }
    p.q = random_floats(std::size_t(c.n_queries) * c.n_heads * head_dim, seed + 3, -2.0f, 2.0f);
    return p;
}

std::vector<float> run_attention(Backend& b, const Problem& p) {
    auto up = [&](const std::vector<float>& v) {
        DeviceArray a(b, v.size());
        b.upload(a.buf(), v.data(), v.size());
        return a;
    };
    DeviceArray q = up(p.q), k = up(p.k_pool), v = up(p.v_pool), out(b, p.q.size());
    b.fill(out.buf(), NAN);
    b.attention(out.buf(), q.buf(), k.buf(), v.buf(), p.table, p.s);
    std::vector<float> h(p.q.size());
    b.download(h.data(), out.buf(), h.size());
    return h;
}

// The tile counts of one attention call, from the mask's classification of the
// kernel's tiling (query tiles from the chunk's first query, key tiles from
// position 0), times heads: what the kernel must report.
AttentionTileCounts expected_counts(const AttentionShape& s, int query_tile, int key_tile) {
    AttentionTileCounts c;
    const int n_keys = s.n_keys();
    for (int i0 = 0; i0 < s.n_queries; i0 += query_tile) {
        const int qa = s.pos0 + i0, qb = s.pos0 + std::min(s.n_queries, i0 + query_tile) - 1;
        for (int k0 = 0; k0 < n_keys; k0 += key_tile) {
            const TileClass t =
                s.mask.classify_tile(qa, qb, k0, std::min(n_keys, k0 + key_tile) - 1);
            (t == TileClass::empty     ? c.skipped
             : t == TileClass::partial ? c.partial
                                       : c.full) += s.n_heads;
        }
    }
    return c;
}

// The kernels one attention call launches on the emulated gpu, in order, with
// their grids' y (a split call's key segments): recorded, then run in order.
struct Launched {
    std::string name;
    unsigned segments;
};
std::vector<Launched> launches_of(Backend& b, const Problem& p, std::vector<float>& got) {
    const DeviceArray q = upload(b, p.q), k = upload(b, p.k_pool), v = upload(b, p.v_pool);
    DeviceArray out(b, p.q.size());
    b.fill(out.buf(), NAN);
    simt::LaunchRecorder recorder;
    recorder.epoch = ~0ull;  // no step graph's: no resident array flushes it early
    simt::active_recorder = &recorder;
    try {
        b.attention(out.buf(), q.buf(), k.buf(), v.buf(), p.table, p.s);
    } catch (...) {
        simt::active_recorder = nullptr;
        throw;
    }
    simt::active_recorder = nullptr;
    std::vector<Launched> launched;
    for (const simt::LaunchRecord& r : recorder.records) launched.push_back({r.name, r.grid[1]});
    recorder.flush();
    got = download(b, out);
    return launched;
}

}  // namespace

TEST_CASE("gpu flash attention: every head_dim instantiation against cpu-ref on awkward sizes",
          "[gpu][kernels][flash][arch]") {
    auto cpu = make_backend("cpu-ref");
    const auto forms = gpu_backend_forms(GpuVariant::fast);
    REQUIRE(flash_head_dims().size() >= 7);
    for (const int dh : flash_head_dims()) {
        for (const FlashCase& c : kCases) {
            // The mask's prompt: the chunk's keys, any ids (no docs:bos mask here).
            const std::vector<int32_t> tokens(std::size_t(c.pos0 + c.n_queries), 5);
            for (const char* spec : kMasks) {
                const BoundMask mask = make_mask(spec, mask_context(tokens, c.n_heads));
                Problem p = make_problem(c, dh, 1000 + 7 * dh + c.n_queries);
                p.s.mask = mask.view();
                const std::vector<float> want = run_attention(*cpu, p);
                require_not_all_zero(want, "cpu-ref attention");
                for (const auto& gpu : forms) {
                    INFO(gpu->name() << " Dh=" << dh << ", " << c.what << ", mask " << spec);
                    gpu->reset_attention_tile_counts();
                    const std::vector<float> got = run_attention(*gpu, p);
                    // Online softmax sums p_j in another order (lane shares, then a
                    // tree) and rescales tile by tile; the library expf: a few ulp
                    // of outputs of size ~1 (v in [-1, 1), convex weights).
                    require_allclose(got, want, 1e-6, 1e-5,
                                     "online softmax reorders sums; library expf: a few ulp");
                    const AttentionTileCounts n = gpu->attention_tile_counts();
                    // The tiles chosen for this Dh, device and call (kernels.h
                    // flash_tiles): 64 x 64 (v3) where shared memory allows; 16
                    // queries a tile for a call of at most 16 (the same key tile).
                    if (gpu->name() == "gpu (emulated)") {
                        const gpu_emulated::FlashTiles t =
                            gpu_emulated::flash_tiles(dh, c.n_queries);
                        REQUIRE(n.query_tile == t.queries);
                        REQUIRE(n.key_tile == t.keys);
                        REQUIRE(t.keys == gpu_emulated::flash_tiles(dh).keys);
                        REQUIRE(t.queries ==
                                (c.n_queries <= 16 ? 16 : gpu_emulated::flash_tiles(dh).queries));
                    }
                    const AttentionTileCounts e = expected_counts(p.s, n.query_tile, n.key_tile);
                    REQUIRE(n.skipped == e.skipped);
                    REQUIRE(n.partial == e.partial);
                    REQUIRE(n.full == e.full);
                }
            }
        }
    }
}

TEST_CASE("gpu attention past head_dim 256 runs the generic path: gpu-ref's kernel, its bits",
          "[gpu][kernels][flash]") {
    const FlashCase c{"12 queries", 12, 0, 2, 1, 4};
    for (const int dh : {257, 300}) {
        const Problem p = make_problem(c, dh, 77);
        auto cpu = make_backend("cpu-ref");
        const std::vector<float> want = run_attention(*cpu, p);
        require_not_all_zero(want, "cpu-ref attention");
        // gpu-ref takes any head_dim, bit for bit cpu-ref's; gpu past flash attention's
        // largest compiled size (256) runs that same kernel, so the same bits, and
        // no flash tile is counted.
        for (const auto& ref : gpu_backend_forms(GpuVariant::reference))
            require_bitwise_equal(run_attention(*ref, p), want, "gpu-ref past 256");
        for (const auto& gpu : gpu_backend_forms(GpuVariant::fast)) {
            INFO(gpu->name() << " Dh=" << dh);
            gpu->reset_attention_tile_counts();
            require_bitwise_equal(run_attention(*gpu, p), want, "gpu past 256: the generic path");
            const AttentionTileCounts n = gpu->attention_tile_counts();
            REQUIRE(n.skipped + n.partial + n.full == 0);
        }
    }
    // Flash attention itself still names its range when asked for more.
    require_error([] { gpu_emulated::flash_tiles(257); },
                  "flash attention takes head_dim 1 to 256; this model has head_dim 257");
}

}  // namespace plab::test

namespace plab::test {

TEST_CASE("gpu flash attention: a decode call split over 256-key segments has the prompt's bits",
          "[gpu][kernels][flash][decode][arch]") {
    // A 601-token prompt attended whole (64-query tiles: a block merges its rows'
    // key segments 0-255, 256-511, 512-600 one after another) and then decode
    // calls for its last rows (16-query tiles: one block per segment and head,
    // then the merge launch). Their rows must be the prompt's bit for bit, for
    // every mask: under window:37+sink:3 the last rows see nothing of the
    // middle segment, which must leave their totals exactly as they were.
    const int kKeys = 601;
    auto cpu = make_backend("cpu-ref");
    const std::vector<int32_t> prompt(kKeys, 5);
    for (const int dh : {48, 64, 160}) {
        const FlashCase whole_case{"the whole prompt", kKeys, 0, 4, 2, 16};
        const Problem whole = make_problem(whole_case, dh, 4700 + dh);
        for (const char* spec : kMasks) {
            const BoundMask mask = make_mask(spec, mask_context(prompt, whole_case.n_heads));
            Problem w = whole;
            w.s.mask = mask.view();
            const std::vector<float> want = run_attention(*cpu, w);
            for (const auto& gpu : gpu_backend_forms(GpuVariant::fast)) {
                const std::vector<float> all = run_attention(*gpu, w);
                INFO(gpu->name() << " Dh=" << dh << ", mask " << spec);
                require_allclose(all, want, 1e-6, 1e-5,
                                 "online softmax reorders sums; library expf: a few ulp");
                for (const auto& [n, pos0] :
                     {std::pair{1, kKeys - 1}, std::pair{16, kKeys - 16}, std::pair{5, 300}}) {
                    INFO(n << " queries at " << pos0);
                    Problem d = w;
                    d.s.n_queries = n;
                    d.s.pos0 = pos0;
                    const std::size_t row = std::size_t(whole_case.n_heads) * dh;
                    d.q.assign(w.q.begin() + std::ptrdiff_t(pos0 * row),
                               w.q.begin() + std::ptrdiff_t((pos0 + n) * row));
                    const std::vector<float> rows(all.begin() + std::ptrdiff_t(pos0 * row),
                                                  all.begin() + std::ptrdiff_t((pos0 + n) * row));
                    std::vector<float> got;
                    if (gpu->name() == "gpu (emulated)") {
                        // It was split: the flash kernel over one block per
                        // segment the call's keys reach, then the merge.
                        const std::vector<Launched> l = launches_of(*gpu, d, got);
                        const int segments = gpu_emulated::flash_segments(pos0 + n);
                        REQUIRE(segments == (pos0 + n + 255) / 256);
                        REQUIRE(l.size() == 2);
                        CHECK(l[0].name.starts_with("attention_flash_kernel<"));
                        CHECK(l[0].segments == unsigned(segments));
                        CHECK(l[1].name == "attention_merge_kernel");
                    } else {
                        got = run_attention(*gpu, d);
                    }
                    require_bitwise_equal(got, rows, "a decode call's rows vs the prompt's");
                }
            }
        }
    }
}

}  // namespace plab::test
