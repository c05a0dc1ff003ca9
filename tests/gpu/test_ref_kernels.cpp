// The reference kernels of gpu-ref (matmul_blocked_ref, attention_ref, rope) on the
// inputs that their faster shapes (issue 14 item 5) could get wrong: sizes
// that do not fill a tile, zeros whose sign a different sum would flip, odd
// head counts and odd head_dim.
//
// What it shows: speed came from *who loads what* (shared-memory tiles, one
// thread per rotated pair, each exp once), never from a different sum, so
// every result keeps cpu-ref's bits, the sign of every zero included
// (require_bitwise_equal compares bits: +0.0 and -0.0 differ). Outputs are
// poisoned with NaN first; inputs are seeded random numbers.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "core/attention_shape.h"
#include "core/rope.h"
#include "gpu_test_util.h"
#include "runtime/registry.h"
#include "test_util.h"

namespace plab::test {
namespace {

using RefOp = std::function<std::vector<float>(Backend&)>;

// Runs `op` on cpu-ref, then on every form of gpu-ref this machine has, and
// requires the same bits. Returns cpu-ref's result, for the caller to check
// that the case it built is really there (a zero of the intended sign, ...).
std::vector<float> require_gpu_ref_bits(const std::string& what, const RefOp& op) {
    auto cpu_ref = make_backend("cpu-ref");
    const std::vector<float> expected = op(*cpu_ref);
    for (auto& b : gpu_backend_forms(GpuVariant::reference)) {
        INFO(what << " on " << b->name());
        require_bitwise_equal(op(*b), expected, what + " on " + b->name());
    }
    return expected;
}

std::vector<float> run_matmul(Backend& b, const std::vector<float>& x, const std::vector<float>& w,
                              int m, int n, int k) {
    const DeviceArray dx = upload(b, x);
    const DeviceArray dw = upload(b, w);
    DeviceArray out(b, std::size_t(m) * n);
    b.fill(out.buf(), NAN);
    b.matmul(out.buf(), dx.buf(), dw.buf(), m, n, k);
    return download(b, out);
}

bool is_negative_zero(float f) {
    return f == 0.0f && std::signbit(f);
}
bool is_positive_zero(float f) {
    return f == 0.0f && !std::signbit(f);
}
int count_if_bits(const std::vector<float>& v, bool (*pred)(float)) {
    int n = 0;
    for (float f : v) n += pred(f) ? 1 : 0;
    return n;
}

}  // namespace

TEST_CASE("gpu-ref matmul_blocked_ref on awkward sizes equals cpu-ref bit for bit",
          "[gpu][kernels][ref]") {
    // matmul_blocked_ref's tiles: 64x64 outputs per block, k in slices of 32. These
    // sizes leave partial row and column tiles and a short last k slice (k
    // not a multiple of 32, or of 16), and also fill tiles exactly.
    struct Mnk {
        int m, n, k;
    };
    for (const Mnk s : {Mnk{1, 65, 33}, Mnk{65, 63, 31}, Mnk{70, 130, 97}, Mnk{3, 200, 65},
                        Mnk{64, 64, 32}, Mnk{129, 1, 300}, Mnk{2, 3, 1}, Mnk{67, 129, 64}}) {
        const auto x = random_floats(std::size_t(s.m) * s.k, 3100 + s.m * 7 + s.k);
        const auto w = random_floats(std::size_t(s.n) * s.k, 3200 + s.n * 7 + s.k);
        const std::string what = "matmul_blocked_ref " + std::to_string(s.m) + "x" +
                                 std::to_string(s.n) + "x" + std::to_string(s.k);
        const auto ref = require_gpu_ref_bits(
            what, [&](Backend& b) { return run_matmul(b, x, w, s.m, s.n, s.k); });
        require_not_all_zero(ref, what + " on cpu-ref");
    }
}

TEST_CASE("gpu-ref matmul_blocked_ref keeps the sign of zero outputs that cpu-ref computes",
          "[gpu][kernels][ref]") {
    // cpu-ref sums from +0.0 (core/strict_math.h strict_dot), and in IEEE
    // round-to-nearest +0.0 + (-0.0) = +0.0: an output whose every product is
    // -0.0 is +0.0. A kernel that started its sum from the first product, or
    // from -0.0, would give -0.0. The products here are -0.0 two ways: a row
    // of x that is all -0.0 against positive weights, and a row of tiny
    // negatives against tiny positives (-1e-30 x 1e-30 underflows to -0.0).
    // The other rows are random. k = 0 (no product at all) must give +0.0 too.
    const int m = 5, n = 67, k = 37;  // partial tiles, a short last slice
    auto x = random_floats(std::size_t(m) * k, 3300);
    auto w = random_floats(std::size_t(n) * k, 3301, 0.5f, 1.5f);  // positive
    for (int t = 0; t < k; ++t) {
        x[std::size_t(1) * k + t] = -0.0f;
        x[std::size_t(3) * k + t] = -1e-30f;
    }
    for (int t = 0; t < k; ++t) w[std::size_t(66) * k + t] = 1e-30f;
    const auto ref = require_gpu_ref_bits("matmul_blocked_ref with -0.0 products",
                                          [&](Backend& b) { return run_matmul(b, x, w, m, n, k); });
    require_not_all_zero(ref, "matmul_blocked_ref with -0.0 products on cpu-ref");
    // The case is really there: row 1 is all zeros, and cpu-ref says +0.0.
    INFO("cpu-ref's row 1 (all products -0.0): " << ref[n]);
    REQUIRE(count_if_bits(ref, is_positive_zero) >= n + 1);
    REQUIRE(count_if_bits(ref, is_negative_zero) == 0);

    const auto empty = require_gpu_ref_bits("matmul_blocked_ref with k = 0", [&](Backend& b) {
        return run_matmul(b, std::vector<float>{}, std::vector<float>{}, 3, 70, 0);
    });
    REQUIRE(count_if_bits(empty, is_positive_zero) == 3 * 70);
}

TEST_CASE("gpu-ref attention_ref gives -0.0 and +0.0 exactly where cpu-ref does",
          "[gpu][kernels][ref]") {
    // Value component 0 of every key is the smallest negative subnormal
    // (-2^-149): its weighted sum is a tiny negative number (or -0.0 where
    // e_j·v underflows), and dividing by the denominator (> 1 with several
    // keys) rounds it to -0.0 for most queries: a zero with a sign only a
    // division keeps. Component 1 of every key is -0.0: each product
    // e_j·(-0.0) is -0.0 and the sum from +0.0 stays +0.0. The kernel must
    // match cpu-ref on both. Keys live in a scrambled paged cache whose unused
    // slots hold NaN; shapes have GQA, an odd head_dim and several queries.
    const AttentionShape s = attention_shape(5, 6, 3, 1, 5, 4);
    const int n_keys = s.n_keys();
    const int n_blocks = (n_keys + s.block_size - 1) / s.block_size;
    const int pool_blocks = n_blocks + 2;
    const std::vector<int32_t> table = shuffled_block_table(n_blocks, pool_blocks, 3400);
    const int row = s.n_kv_heads * s.head_dim;
    std::vector<float> k_pool(std::size_t(pool_blocks) * s.block_size * row, NAN);
    std::vector<float> v_pool = k_pool;
    const auto kr = random_floats(std::size_t(n_keys) * row, 3401, -2.0f, 2.0f);
    const auto vr = random_floats(std::size_t(n_keys) * row, 3402);
    const float tiny_negative = -std::numeric_limits<float>::denorm_min();
    for (int p = 0; p < n_keys; ++p) {
        const std::size_t slot = std::size_t(kv_slot(table.data(), p, s.block_size)) * row;
        std::copy_n(kr.begin() + std::size_t(p) * row, row, k_pool.begin() + slot);
        std::copy_n(vr.begin() + std::size_t(p) * row, row, v_pool.begin() + slot);
        v_pool[slot + 0] = tiny_negative;
        v_pool[slot + 1] = -0.0f;
    }
    const auto q = random_floats(std::size_t(s.n_queries) * s.n_heads * s.head_dim, 3403);
    const auto ref =
        require_gpu_ref_bits("attention_ref with zero-signed outputs", [&](Backend& b) {
            const DeviceArray dq = upload(b, q);
            const DeviceArray dk = upload(b, k_pool);
            const DeviceArray dv = upload(b, v_pool);
            DeviceArray out(b, q.size());
            b.fill(out.buf(), NAN);
            b.attention(out.buf(), dq.buf(), dk.buf(), dv.buf(), table, s);
            return download(b, out);
        });
    require_not_all_zero(ref, "attention_ref on cpu-ref");
    // The case is really there: cpu-ref gives -0.0 in component 0 of some
    // rows and +0.0 in component 1 of every row.
    int negative_zeros = 0, positive_zeros = 0;
    for (int r = 0; r < s.n_queries * s.n_heads; ++r) {
        negative_zeros += is_negative_zero(ref[std::size_t(r) * s.head_dim + 0]) ? 1 : 0;
        positive_zeros += is_positive_zero(ref[std::size_t(r) * s.head_dim + 1]) ? 1 : 0;
    }
    INFO("rows " << s.n_queries * s.n_heads << ": -0.0 in component 0 of " << negative_zeros
                 << ", +0.0 in component 1 of " << positive_zeros);
    REQUIRE(negative_zeros > 0);
    REQUIRE(positive_zeros == s.n_queries * s.n_heads);
}

TEST_CASE("gpu-ref rope on odd rows, odd heads and odd head_dim equals cpu-ref bit for bit",
          "[gpu][kernels][ref]") {
    // rope gives each rotated pair (i, i + Dh/2) its own thread. An odd
    // head_dim leaves its last component unrotated (partial rotary,
    // core/rope.h): a kernel that paired by (Dh+1)/2 or touched that
    // component fails. Head_dim 1 has no pair at all (an empty launch).
    // Some inputs are -0.0 (rotated by position 0: cos 1, sin 0, and the
    // result keeps a sign that cpu-ref computes). The whole x is compared,
    // the unrotated components included.
    const int max_seq = 80;
    int negative_zeros = 0;  // in cpu-ref's outputs, over all cases
    for (int head_dim : {1, 2, 7, 9, 48}) {
        const RopeTable table = make_rope_table(max_seq, head_dim, 10000.0);
        for (int rows : {1, 3, 33}) {
            for (int n_heads : {1, 5}) {
                const int pos0 = rows == 33 ? 41 : (rows == 3 ? 0 : 7);
                auto x = random_floats(std::size_t(rows) * n_heads * head_dim,
                                       3500 + head_dim * 100 + rows * 10 + n_heads);
                for (std::size_t e = 1; e < x.size(); e += 3) x[e] = -0.0f;
                const std::string what =
                    "rope Dh=" + std::to_string(head_dim) + " rows=" + std::to_string(rows) +
                    " H=" + std::to_string(n_heads) + " pos0=" + std::to_string(pos0);
                const auto ref = require_gpu_ref_bits(what, [&](Backend& b) {
                    const DeviceArray dx = upload(b, x);
                    const DeviceArray dc = upload(b, table.cos);
                    const DeviceArray ds = upload(b, table.sin);
                    b.rope(dx.buf(), rows, n_heads, head_dim, pos0, dc.buf(), ds.buf());
                    return download(b, dx);
                });
                require_not_all_zero(ref, what + " on cpu-ref");
                negative_zeros += count_if_bits(ref, is_negative_zero);
                if (head_dim == 1) {  // nothing rotates: x comes back as it went in
                    REQUIRE(std::memcmp(ref.data(), x.data(), x.size() * sizeof(float)) == 0);
                }
            }
        }
    }
    REQUIRE(negative_zeros > 0);  // the zero signs were really compared
}

TEST_CASE("gpu-ref launch checks say when 32-bit indices would overflow", "[gpu][kernels][ref]") {
    // The reference kernels index with 32-bit ints (a 64-bit division costs
    // dozens of instructions per thread); sizes beyond 2^31 get one clear
    // line at the launch, before any memory is touched.
    for (auto& b : gpu_backend_forms(GpuVariant::reference)) {
        INFO(b->name());
        const Buffer huge{nullptr, std::size_t(1) << 40};  // only the size is read
        require_error([&] { b->matmul(huge, huge, huge, 70000, 70000, 8); },
                      "matmul_blocked_ref indexes with 32-bit ints");
        require_error([&] { b->rope(huge, 1 << 20, 64, 64, 0, huge, huge); },
                      "rope indexes with 32-bit ints");
    }
}

}  // namespace plab::test
