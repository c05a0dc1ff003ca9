// The matmul ladder (kernels/matmul_ladder_run.h): naive → tiled → blocked →
// rows, each rung against cpu-ref on shapes that fill no tile.
//
// What it shows: the rungs change who loads what, never the sum. The strict
// rungs (naive; blocked_ref, gpu-ref's) give cpu-ref's bits; the fast rungs
// (the gpu backend's tiled, blocked, rows) give each other's bits (each output
// one k-order chain, whatever the tile) and stay within a dot product's
// rounding bound of cpu-ref (they may contract a multiply-add into an FMA
// natively). Inputs are seeded random numbers; outputs start as NaN.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <iterator>
#include <string>

#include "matmul_ladder_run.h"
#include "runtime/registry.h"
#include "test_util.h"

namespace plab::test {
namespace {

struct Product {
    int m, n, k;
};
// 1 and 7 rows (matmul_rows' decode shapes), 70 and 130 rows (blocked's
// tiles, a ragged last one), k odd, k a multiple of 4 (blocked's 16-byte loads).
const Product kProducts[] = {{1, 37, 50}, {7, 130, 33}, {70, 65, 129}, {130, 200, 96}};

std::vector<float> cpu_ref_matmul(const std::vector<float>& x, const std::vector<float>& w,
                                  const Product& p) {
    auto b = make_backend("cpu-ref");
    const DeviceArray dx = upload(*b, x), dw = upload(*b, w);
    DeviceArray out(*b, std::size_t(p.m) * p.n);
    b->matmul(out.buf(), dx.buf(), dw.buf(), p.m, p.n, p.k);
    return download(*b, out);
}

}  // namespace

TEST_CASE("matmul ladder: strict rungs give cpu-ref's bits and fast rungs each other's",
          "[gpu][ladder][matmul]") {
    for (const Product& p : kProducts) {
        INFO(p.m << " x " << p.n << " x " << p.k);
        const auto x = random_floats(std::size_t(p.m) * p.k, 4100 + p.m);
        const auto w = random_floats(std::size_t(p.n) * p.k, 4200 + p.n);
        const std::vector<float> want = cpu_ref_matmul(x, w, p);
        require_not_all_zero(want, "cpu-ref matmul");
        std::vector<float> fast;
        for (MatmulRung rung : kMatmulRungs) {
            if (rung == MatmulRung::rows && p.m > kMatmulRowsRungMax) continue;
            INFO("rung " << matmul_rung_file(rung));
            const std::vector<float> got = gpu_emulated::run_matmul_rung(rung, x, w, p.m, p.n, p.k);
            if (matmul_rung_strict(rung)) {
                require_bitwise_equal(got, want, matmul_rung_file(rung));
                continue;
            }
            if (fast.empty()) fast = got;
            require_bitwise_equal(got, fast, "the fast rungs' one k-order chain an output");
            // A k-term dot product rounded step by step is within k·u·Σ|x_t·w_t|
            // of the exact sum (u = 2⁻²⁴); two such sums are within twice that.
            for (int i = 0; i < p.m; ++i) {
                for (int j = 0; j < p.n; ++j) {
                    double magnitude = 0;
                    for (int t = 0; t < p.k; ++t)
                        magnitude += std::fabs(double(x[std::size_t(i) * p.k + t]) *
                                               w[std::size_t(j) * p.k + t]);
                    const double bound = 2.0 * p.k * std::ldexp(1.0, -24) * magnitude;
                    const std::size_t o = std::size_t(i) * p.n + j;
                    REQUIRE(std::fabs(double(got[o]) - want[o]) <= bound);
                }
            }
        }
        CHECK(!fast.empty());
    }
}

TEST_CASE("matmul ladder: a rows rung asked for more rows than it takes says so",
          "[gpu][ladder][matmul]") {
    const Product p{kMatmulRowsRungMax + 1, 5, 4};
    const auto x = random_floats(std::size_t(p.m) * p.k, 1), w = random_floats(20, 2);
    require_error([&] { gpu_emulated::run_matmul_rung(MatmulRung::rows, x, w, p.m, p.n, p.k); },
                  "matmul_rows takes 1 to 8 rows, got 9");
}

TEST_CASE("matmul ladder: kernels/README.md's table lists the rungs in order, lines counted",
          "[gpu][ladder][matmul][docs]") {
    std::ifstream in(std::string(PLAB_TESTS_DIR) + "/../kernels/README.md");
    const std::string readme((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
    const std::size_t table = readme.find("## The matmul ladder");
    REQUIRE(table != std::string::npos);
    std::size_t at = table;
    for (MatmulRung rung : kMatmulRungs) {
        const std::string file = std::string(matmul_rung_file(rung)) + ".cu";
        INFO(file);
        std::ifstream cu(std::string(PLAB_TESTS_DIR) + "/../kernels/" + file);
        int lines = 0;
        for (std::string line; std::getline(cu, line);) ++lines;
        CHECK(lines > 10);
        // Each row after the one before: the table reads in ladder order.
        const std::size_t row = readme.find("`" + file + "` (" + std::to_string(lines) + ")", at);
        REQUIRE(row != std::string::npos);
        at = row;
    }
}

}  // namespace plab::test
