// Every GPU kernel, through the Backend interface, against cpu-ref.
//
// What it shows: gpu-ref's ops give cpu-ref's bits; gpu's fast ops stay within
// a stated tolerance. Inputs are seeded random numbers (never zeros), every
// output buffer is poisoned with NaN before the op (an element a kernel forgets
// to write fails the comparison), and sizes are odd (1, 7, 33, 129, ...) so
// they do not divide the 16x16 matmul tiles, the 32-key attention tiles or the
// 256-thread blocks. KV pool slots that no position uses hold NaN, so an
// attention kernel that reads a masked or missing key fails too.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <random>

#include "core/attention_shape.h"
#include "core/rope.h"
#include "gpu_test_util.h"
#include "kernels.h"
#include "runtime/registry.h"
#include "test_util.h"

namespace plab::test {
namespace {

// One op's inputs uploaded to a backend, and an output poisoned with NaN.
struct OpRun {
    Backend& b;
    std::vector<DeviceArray> in;
    DeviceArray out;

    OpRun(Backend& backend, const std::vector<std::vector<float>>& inputs, std::size_t out_size)
        : b(backend), out(backend, out_size) {
        for (const auto& v : inputs) {
            in.emplace_back(backend, v.size());
            backend.upload(in.back().buf(), v.data(), v.size());
        }
        backend.fill(out.buf(), NAN);
    }
    Buffer operator[](std::size_t i) const { return in[i].buf(); }
    std::vector<float> result(const DeviceArray& a) const {
        std::vector<float> h(a.size());
        b.download(h.data(), a.buf(), a.size());
        return h;
    }
    std::vector<float> result() const { return result(out); }
};

using OpFn = std::function<std::vector<float>(Backend&)>;

// Runs `op` on cpu-ref and on every form of both GPU variants; gpu-ref must
// match bitwise, gpu within atol + rtol·|ref| (`why` says where the error
// comes from) — or bitwise in its emulated form when `bitwise_when_emulated`
// (the emulated kernels are built with -ffp-contract=off: a kernel that sums
// in cpu-ref's order then has nothing left to round differently). The
// observed max |gpu - cpu-ref| is printed for every form, next to the bound.
// `fast` false: the op is checked on gpu-ref only (the shape is one the gpu
// variant refuses; the caller says where that is tested).
void check_op(const std::string& what, const OpFn& op, double atol, double rtol,
              const std::string& why, bool bitwise_when_emulated = false, bool fast = true) {
    auto ref_backend = make_backend("cpu-ref");
    const std::vector<float> ref = op(*ref_backend);
    require_not_all_zero(ref, what + " on cpu-ref");
    for (auto& b : gpu_backend_forms(GpuVariant::reference)) {
        INFO(what << " on " << b->name());
        require_bitwise_equal(op(*b), ref, what + " on " + b->name());
    }
    if (!fast) return;
    for (auto& b : gpu_backend_forms(GpuVariant::fast)) {
        const std::vector<float> got = op(*b);
        const bool emulated = b->name().find("(emulated)") != std::string::npos;
        const bool bitwise = bitwise_when_emulated && emulated;
        if (atol != 0 || rtol != 0) {
            WARN(what << " on " << b->name() << ": max |gpu - cpu-ref| " << max_abs_diff(got, ref)
                      << ", allowed " << (bitwise ? "0 (bitwise; a native form: " : "") << atol
                      << " + " << rtol << "*|ref|" << (bitwise ? ")" : ""));
        }
        INFO(what << " on " << b->name());
        if (bitwise) {
            require_bitwise_equal(got, ref, what + " on " + b->name() + " (" + why + ")");
        } else {
            require_allclose(got, ref, atol, rtol, why);
        }
    }
}

bool flash_supports(int head_dim) {
    const std::vector<int> dims = flash_head_dims();
    return std::find(dims.begin(), dims.end(), head_dim) != dims.end();
}

// How far a native (FMA-contracted) k-order sum may be from cpu-ref's.
// Both kernels sum k in cpu-ref's order (zero padding adds exact zeros), so
// the emulated form gives cpu-ref's bits. Natively, nvcc contracts acc + x·w
// into one FMA (the product is not rounded first). First-order error analysis
// (Higham, "Accuracy and Stability of Numerical Algorithms", ch. 3) of the two
// k-order sums s_t (rounded product, rounded add) and f_t (FMA): |s_t - f_t|
// grows per step by at most u·|x_t·w_t| (the product's rounding) + 2u·|S_t|
// (the two sums' roundings, S_t the exact partial sum), u = 2^-24. So each
// output is within u·sum_t (|x_t w_t| + 2|S_t|). The second-order terms (the
// computed partial sums are not exactly S_t) add at most 2k²u ≈ 2e-3 (k = 129)
// of u·sum_t |x_t w_t|: the factor 1.01 covers them. The bound is computed
// from the inputs (the largest over outputs), not guessed.
double fma_bound(const float* x, const float* w, int m, int n, int k) {
    double bound = 0;
    for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
            double partial = 0, b = 0;
            for (int t = 0; t < k; ++t) {
                const double p = double(x[std::size_t(i) * k + t]) * w[std::size_t(j) * k + t];
                partial += p;
                b += std::fabs(p) + 2 * std::fabs(partial);
            }
            bound = std::max(bound, b);
        }
    }
    return bound * 1.01 * std::ldexp(1.0, -24);
}

}  // namespace

TEST_CASE("gpu kernels: embed gathers rows", "[gpu][kernels]") {
    for (int dim : {1, 7, 33}) {
        const int vocab = 37, n = 7;
        const auto table = random_floats(std::size_t(vocab) * dim, 100 + dim);
        const auto tokens = random_tokens(n, vocab, 200 + dim);
        check_op(
            "embed dim " + std::to_string(dim),
            [&](Backend& b) {
                OpRun r(b, {table}, std::size_t(n) * dim);
                b.embed(r.out.buf(), tokens, r[0], dim);
                return r.result();
            },
            0, 0, "a copy is exact");
    }
}

TEST_CASE("gpu kernels: rmsnorm", "[gpu][kernels]") {
    for (int dim : {1, 7, 33, 129, 300}) {
        for (int rows : {1, 7}) {
            const auto x = random_floats(std::size_t(rows) * dim, 300 + dim + rows);
            const auto w = random_floats(dim, 400 + dim, 0.5f, 1.5f);
            check_op(
                "rmsnorm " + std::to_string(rows) + "x" + std::to_string(dim),
                [&](Backend& b) {
                    OpRun r(b, {x, w}, x.size());
                    b.rmsnorm(r.out.buf(), r[0], r[1], rows, dim, 1e-5f);
                    return r.result();
                },
                1e-6, 1e-5,
                "the fast kernel sums x^2 in a tree (shuffles) and uses 1/sqrtf: a few ulp");
        }
    }
}

TEST_CASE("gpu kernels: matmul ref, tiled and blocked", "[gpu][kernels]") {
    struct Mnk {
        int m, n, k;
        int x_offset = 0;  // x starts this many floats into its buffer
    };
    // 1 to 8 rows take matmul_rows (slices of 256 k: 700 and 513 are several,
    // the last ragged), other small products matmul_tiled, larger ones matmul_blocked (the rule
    // and the tile, which depends on how many blocks the shape gives, are
    // checked below): 64x64 for the mid-sized ones, 128x64 for 1536 x 700,
    // 128x128 for 1600 x 1300. Its 16-byte loads need k % 4 == 0 and aligned
    // operands: k = 13, 33 and a misaligned x (offset 1) take its 4-byte loads.
    for (const Mnk s :
         {Mnk{1, 1, 1}, Mnk{1, 7, 33}, Mnk{7, 33, 129}, Mnk{1, 300, 700}, Mnk{8, 40, 513},
          Mnk{33, 17, 20}, Mnk{129, 7, 5}, Mnk{17, 16, 16}, Mnk{64, 64, 16}, Mnk{130, 1100, 36},
          Mnk{200, 300, 33}, Mnk{257, 1090, 100}, Mnk{65, 1090, 40, 1}, Mnk{1536, 700, 12},
          Mnk{1600, 1300, 12}, Mnk{1600, 1300, 13}}) {
        const auto x = random_floats(std::size_t(s.m) * s.k + s.x_offset, 500 + s.m * 7 + s.k);
        const auto w = random_floats(std::size_t(s.n) * s.k, 600 + s.n * 7 + s.k);
        const double bound = fma_bound(x.data() + s.x_offset, w.data(), s.m, s.n, s.k);
        check_op(
            "matmul " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k),
            [&](Backend& b) {
                OpRun r(b, {x, w}, std::size_t(s.m) * s.n);
                const Buffer xb = r[0].slice(std::size_t(s.x_offset), std::size_t(s.m) * s.k);
                b.matmul(r.out.buf(), xb, r[1], s.m, s.n, s.k);
                return r.result();
            },
            bound, 0,
            "k-order sums; emulated: no FMA, bitwise; native: FMA, within the first-order bound "
            "u * sum_t (|x_t w_t| + 2 |S_t|)",
            true);
    }
}

TEST_CASE("gpu kernels: matmul_blocked picks the largest tile that still fills the device",
          "[gpu][kernels]") {
    // The emulated device reports sm_90's 132 multiprocessors.
    using gpu_emulated::matmul_blocked_tile;
    using Tile = std::pair<int, int>;
    auto tile = [](int m, int n) {
        const auto t = matmul_blocked_tile(m, n);
        return Tile{t.rows, t.cols};
    };
    CHECK(tile(1600, 1300) == Tile{128, 128});  // 13 x 11 = 143 blocks of 128x128
    CHECK(tile(1536, 700) == Tile{128, 64});    // 12 x 6 = 72 of 128x128, 12 x 11 = 132 of 128x64
    CHECK(tile(2048, 288) == Tile{64, 64});     // stories15M's W_o at 2048 tokens: 16 x 3 = 48
    CHECK(tile(2048, 2048) == Tile{128, 128});  // stories110M's gate/up at 2048 tokens
    CHECK(tile(64, 64) == Tile{64, 64});
    // Whether gpu takes it at all: 64+ rows and 64x64 blocks for an eighth of
    // the 132 multiprocessors (17): a 128-token stories15M prefill's 128 x 288
    // products (10 blocks) stay on matmul_tiled, its 128 x 768 ones (24) do not.
    using gpu_emulated::matmul_blocked_pays;
    CHECK_FALSE(matmul_blocked_pays(128, 288));
    CHECK(matmul_blocked_pays(128, 768));
    CHECK_FALSE(matmul_blocked_pays(63, 32000));  // a decode step's classifier
    CHECK(matmul_blocked_pays(64, 17 * 64));      // exactly 17 blocks
    CHECK_FALSE(matmul_blocked_pays(64, 16 * 64));
    CHECK(matmul_blocked_pays(2048, 288));
    // The shapes of the matmul test above that take it, each load path covered.
    for (const auto& [m, n] : {Tile{200, 300}, Tile{130, 1100}, Tile{257, 1090}, Tile{65, 1090},
                               Tile{1536, 700}, Tile{1600, 1300}}) {
        CHECK(matmul_blocked_pays(m, n));
    }
    CHECK_FALSE(matmul_blocked_pays(64, 64));
}

TEST_CASE("gpu kernels: matmul_parts is one launch, and each part keeps its own matmul's bits",
          "[gpu][kernels]") {
    // Q, K and V of a GQA layer (a wide part, two narrow ones), and gate/up.
    // Widths that divide no tile; together the parts take matmul_blocked
    // (64x64, 128x64, 128x128 tiles), alone the narrow ones take matmul_tiled.
    struct Case {
        int m, k;
        std::vector<int> widths;
    };
    for (const Case& c : {Case{150, 36, {200, 72, 72}}, Case{1100, 12, {700, 300, 300}},
                          Case{1600, 13, {600, 400, 300}}, Case{300, 20, {330, 330}}}) {
        const std::string what = "matmul_parts " + std::to_string(c.m) + " x (" +
                                 std::to_string(c.widths.size()) + " parts) x " +
                                 std::to_string(c.k);
        const auto x = random_floats(std::size_t(c.m) * c.k, 700 + c.m);
        std::vector<std::vector<float>> w;
        double bound = 0;
        std::size_t out_size = 0;
        for (std::size_t p = 0; p < c.widths.size(); ++p) {
            w.push_back(random_floats(std::size_t(c.widths[p]) * c.k, 800 + c.m + p));
            bound = std::max(bound, fma_bound(x.data(), w.back().data(), c.m, c.widths[p], c.k));
            out_size += std::size_t(c.m) * c.widths[p];
        }
        // Runs the parts into one output buffer, side by side; `fused` false:
        // each part as its own matmul.
        auto run = [&](Backend& b, bool fused) {
            std::vector<std::vector<float>> inputs{x};
            inputs.insert(inputs.end(), w.begin(), w.end());
            OpRun r(b, inputs, out_size);
            std::vector<MatmulPart> parts;
            std::size_t offset = 0;
            for (std::size_t p = 0; p < c.widths.size(); ++p) {
                const std::size_t size = std::size_t(c.m) * c.widths[p];
                parts.push_back({r.out.buf().slice(offset, size), r[p + 1], c.widths[p]});
                offset += size;
            }
            if (fused) {
                b.matmul_parts(r[0], c.m, c.k, parts);
            } else {
                for (const MatmulPart& p : parts) b.matmul(p.out, r[0], p.w, c.m, p.n, c.k);
            }
            return r.result();
        };
        // Against cpu-ref (whose matmul_parts is one matmul per part).
        check_op(
            what, [&](Backend& b) { return run(b, true); }, bound, 0,
            "k-order sums; emulated: no FMA, bitwise; native: FMA, within the first-order bound",
            true);
        for (auto& gpu : gpu_backend_forms(GpuVariant::fast)) {
            INFO(what << " on " << gpu->name());
            // One launch: the op clock sees one matmul where there are parts.
            gpu->set_device_op_timing(true);
            gpu->take_device_op_times();
            const std::vector<float> fused = run(*gpu, true);
            const auto ops = gpu->take_device_op_times();
            gpu->set_device_op_timing(false);
            REQUIRE(std::count_if(ops.begin(), ops.end(),
                                  [](const DeviceOpTime& t) { return t.op == "matmul"; }) == 1);
            // The bits of the parts' own launches (other kernels, other tiles:
            // the same k-order chain per output), natively too.
            require_bitwise_equal(fused, run(*gpu, false), what + ": one launch vs one per part");
        }
    }
}

TEST_CASE("gpu kernels: rope rotates every head by its position", "[gpu][kernels]") {
    const int head_dim = 8, max_seq = 64;
    const RopeTable table = make_rope_table(max_seq, head_dim, 10000.0);
    for (int rows : {1, 7, 33}) {
        for (int n_heads : {1, 3}) {
            const int pos0 = rows == 33 ? 29 : 5;
            const auto x = random_floats(std::size_t(rows) * n_heads * head_dim, 700 + rows);
            check_op(
                "rope rows " + std::to_string(rows),
                [&](Backend& b) {
                    OpRun r(b, {x, table.cos, table.sin}, 1);
                    b.rope(r[0], rows, n_heads, head_dim, pos0, r[1], r[2]);
                    return r.result(r.in[0]);
                },
                0, 0, "same rope_rotate and table: exact");
        }
    }
}

TEST_CASE("rope_rows: each row at its own position equals rope of that row alone",
          "[gpu][kernels]") {
    // A batched step's rows (positions jumping between sequences), packed
    // documents (restarting), repeats and a descending run. The oracle on
    // each backend is its own rope, one row per call, at that row's
    // position; across backends check_op holds them to cpu-ref's bits.
    const int head_dim = 9, max_seq = 64;  // odd: the last component is not rotated
    const RopeTable table = make_rope_table(max_seq, head_dim, 10000.0);
    const std::vector<int32_t> positions = {5, 6, 7, 40, 0, 1, 2, 63, 63, 12, 11, 10, 3};
    const int rows = static_cast<int>(positions.size());
    for (int n_heads : {1, 3}) {
        const std::size_t row = std::size_t(n_heads) * head_dim;
        const auto x = random_floats(std::size_t(rows) * row, 900 + n_heads);
        const OpFn batched = [&](Backend& b) {
            OpRun r(b, {x, table.cos, table.sin}, 1);
            b.rope_rows(r[0], rows, n_heads, head_dim, positions, r[1], r[2]);
            return r.result(r.in[0]);
        };
        check_op("rope_rows, " + std::to_string(n_heads) + " heads", batched, 0, 0,
                 "same rope_rotate and table: exact");
        std::vector<std::unique_ptr<Backend>> backends;
        backends.push_back(make_backend("cpu-ref"));
        backends.push_back(make_backend("cpu"));
        for (auto& b : gpu_backend_forms(GpuVariant::reference)) backends.push_back(std::move(b));
        for (auto& b : gpu_backend_forms(GpuVariant::fast)) backends.push_back(std::move(b));
        for (auto& b : backends) {
            OpRun r(*b, {x, table.cos, table.sin}, 1);
            for (int i = 0; i < rows; ++i)
                b->rope(r[0].slice(std::size_t(i) * row, row), 1, n_heads, head_dim,
                        positions[std::size_t(i)], r[1], r[2]);
            INFO("rope_rows vs one rope per row on " << b->name());
            require_bitwise_equal(batched(*b), r.result(r.in[0]), "rope_rows on " + b->name());
        }
    }
}

TEST_CASE("gpu kernels: kv_append scatters rows into slots", "[gpu][kernels]") {
    const int row_size = 12, block_size = 5, pool_blocks = 6, rows = 7;
    const auto k = random_floats(std::size_t(rows) * row_size, 800);
    const auto v = random_floats(std::size_t(rows) * row_size, 801);
    const auto table = shuffled_block_table(2, pool_blocks, 802);
    std::vector<int32_t> slots;
    for (int p = 3; p < 3 + rows; ++p) slots.push_back(kv_slot(table.data(), p, block_size));
    const std::size_t pool = std::size_t(pool_blocks) * block_size * row_size;
    for (bool values : {false, true}) {
        check_op(
            values ? "kv_append V" : "kv_append K",
            [&](Backend& b) {
                OpRun r(b, {k, v, std::vector<float>(pool, NAN)}, pool);
                b.kv_append(r[2], r.out.buf(), r[0], r[1], slots, row_size);
                auto kp = r.result(r.in[2]);
                auto vp = r.result();
                // NaN marks untouched slots on both sides; compare them as 0.
                auto& pick = values ? vp : kp;
                for (float& f : pick) f = std::isnan(f) ? 0.0f : f;
                return pick;
            },
            0, 0, "a copy is exact");
    }
}

TEST_CASE("gpu kernels: causal attention over a paged cache", "[gpu][kernels]") {
    struct Case {
        int n_queries, pos0, n_heads, n_kv_heads, head_dim, block_size;
    };
    for (const Case c : {Case{1, 0, 1, 1, 1, 1}, Case{7, 3, 3, 1, 7, 5}, Case{5, 2, 1, 1, 1, 2},
                         Case{7, 0, 4, 2, 6, 4}, Case{1, 40, 3, 3, 8, 5}, Case{33, 5, 2, 1, 16, 7},
                         Case{7, 29, 4, 1, 10, 16}, Case{40, 90, 1, 1, 4, 3}}) {
        const AttentionShape s =
            attention_shape(c.n_queries, c.pos0, c.n_heads, c.n_kv_heads, c.head_dim, c.block_size);
        const int n_keys = s.n_keys();
        const int n_blocks = (n_keys + c.block_size - 1) / c.block_size;
        const int pool_blocks = n_blocks + 3;
        const auto table = shuffled_block_table(n_blocks, pool_blocks, 900 + n_keys);
        const int row = c.n_kv_heads * c.head_dim;
        // Pools full of NaN except the slots of positions 0..n_keys-1.
        std::vector<float> k_pool(std::size_t(pool_blocks) * c.block_size * row, NAN);
        std::vector<float> v_pool = k_pool;
        const auto kr = random_floats(std::size_t(n_keys) * row, 901 + n_keys, -2.0f, 2.0f);
        const auto vr = random_floats(std::size_t(n_keys) * row, 902 + n_keys);
        for (int p = 0; p < n_keys; ++p) {
            const int slot = kv_slot(table.data(), p, c.block_size);
            std::copy_n(kr.begin() + std::size_t(p) * row, row,
                        k_pool.begin() + std::size_t(slot) * row);
            std::copy_n(vr.begin() + std::size_t(p) * row, row,
                        v_pool.begin() + std::size_t(slot) * row);
        }
        const auto q = random_floats(std::size_t(c.n_queries) * c.n_heads * c.head_dim,
                                     903 + n_keys, -2.0f, 2.0f);
        const std::string name =
            "attention C=" + std::to_string(c.n_queries) + " pos0=" + std::to_string(c.pos0) +
            " H=" + std::to_string(c.n_heads) + " Hkv=" + std::to_string(c.n_kv_heads) +
            " Dh=" + std::to_string(c.head_dim) + " B=" + std::to_string(c.block_size);
        check_op(
            name,
            [&](Backend& b) {
                OpRun r(b, {q, k_pool, v_pool}, q.size());
                b.attention(r.out.buf(), r[0], r[1], r[2], table, s);
                return r.result();
            },
            1e-6, 1e-5,
            "online softmax rescales partial sums tile by tile and uses the library expf: "
            "a few ulp on outputs of size ~1",
            false,
            // gpu's flash kernel runs the Dh it is compiled for (test_gpu_flash.cpp
            // covers each, and the refusal of the others); gpu-ref runs them all.
            flash_supports(c.head_dim));
        const int head = c.n_heads - 1;
        check_op(
            name + " probabilities of the last head",
            [&](Backend& b) {
                OpRun r(b, {q, k_pool}, std::size_t(c.n_queries) * n_keys);
                b.attention_probs(r.out.buf(), Buffer{}, r[0], r[1], table, s, head);
                return r.result();
            },
            0, 0, "both GPU variants use the reference probe kernel: exact");
    }
}

TEST_CASE("gpu kernels: swiglu and residual add", "[gpu][kernels]") {
    for (int n : {1, 7, 129, 1000}) {
        const auto g = random_floats(n, 1000 + n, -4.0f, 4.0f);
        const auto u = random_floats(n, 1100 + n);
        check_op(
            "swiglu n=" + std::to_string(n),
            [&](Backend& b) {
                OpRun r(b, {g, u}, n);
                b.swiglu(r.out.buf(), r[0], r[1], n);
                return r.result();
            },
            0, 0, "same strict_swiglu: exact");
        check_op(
            "add n=" + std::to_string(n),
            [&](Backend& b) {
                OpRun r(b, {g, u}, 1);
                b.add(r[0], r[1], n);
                return r.result(r.in[0]);
            },
            0, 0, "one rounded add: exact");
    }
}

TEST_CASE("gpu kernels: argmax picks the lowest index among equal maxima", "[gpu][kernels]") {
    // The expected index is known by construction, not asked of another
    // backend: random values in [-1, 1) and a maximum of 5 planted at known
    // places. The rule (greedy decoding's, runtime/sampler.h) is the lowest
    // index among equal maxima, so a kernel that keeps the last or any
    // occurrence, or depends on its reduction order, fails.
    std::vector<std::unique_ptr<Backend>> backends;
    backends.push_back(make_backend("cpu-ref"));
    backends.push_back(make_backend("cpu"));
    for (auto& b : gpu_backend_forms(GpuVariant::reference)) backends.push_back(std::move(b));
    for (auto& b : gpu_backend_forms(GpuVariant::fast)) backends.push_back(std::move(b));
    struct Planted {
        const char* what;
        std::vector<int> at;  // where the maximum goes, in the order it is written
    };
    for (int n : {1, 7, 33, 129, 1000, 4099}) {
        for (const Planted& p : {Planted{"one maximum", {(2 * n) / 3}},
                                 Planted{"three equal maxima, late first", {n - 1, n / 2, n / 3}},
                                 Planted{"every element equal", {}}}) {
            auto x = random_floats(n, 1200 + n);
            int expect = n;
            for (int i : p.at) {
                x[std::size_t(i)] = 5.0f;
                expect = std::min(expect, i);
            }
            if (p.at.empty()) {  // all equal: the first element wins
                std::fill(x.begin(), x.end(), 0.25f);
                expect = 0;
            }
            for (auto& b : backends) {
                DeviceArray a(*b, x.size());
                b->upload(a.buf(), x.data(), x.size());
                INFO("argmax n=" << n << ", " << p.what << ", on " << b->name());
                REQUIRE(b->argmax(a.buf(), x.size()) == expect);
            }
        }
    }
}

TEST_CASE("argmax_rows: each row's lowest index among equal maxima, on every backend",
          "[gpu][kernels]") {
    // A batched step's greedy tokens: one call for all rows. Each row gets
    // its own planted maximum (or maxima) at a known place, some in a
    // vector's tail, so a row that reads its neighbour's values, a lost row
    // or a last-occurrence rule fails. Expected indices by construction.
    std::vector<std::unique_ptr<Backend>> backends;
    backends.push_back(make_backend("cpu-ref"));
    backends.push_back(make_backend("cpu"));
    for (auto& b : gpu_backend_forms(GpuVariant::reference)) backends.push_back(std::move(b));
    for (auto& b : gpu_backend_forms(GpuVariant::fast)) backends.push_back(std::move(b));
    for (int n : {1, 17, 1000, 4099}) {
        for (int rows : {1, 3, 70}) {
            auto x = random_floats(std::size_t(rows) * n, 4400 + n + rows);
            std::vector<int32_t> expect(static_cast<std::size_t>(rows));
            for (int r = 0; r < rows; ++r) {
                float* row = x.data() + std::size_t(r) * n;
                const int first = (r * 7919 + n / 2) % n;  // the lowest planted index
                const int second = std::min(n - 1, first + 1 + r % 5);
                row[second] = 6.0f;  // an equal maximum after it, when there is room
                row[first] = 6.0f;
                expect[std::size_t(r)] = first;
            }
            for (auto& b : backends) {
                DeviceArray a(*b, x.size());
                b->upload(a.buf(), x.data(), x.size());
                std::vector<int32_t> got(std::size_t(rows), -1);
                b->argmax_rows(a.buf(), rows, std::size_t(n), got);
                INFO("argmax_rows n=" << n << " rows=" << rows << " on " << b->name());
                REQUIRE(got == expect);
            }
        }
    }
}

}  // namespace plab::test
