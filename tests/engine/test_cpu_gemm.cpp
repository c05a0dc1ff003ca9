// The cpu backend's GEMM against its own contract (backends/cpu_fast/cpu_gemm.h):
// every output C[i][j] is one chain of fused multiply-adds over k in
// increasing order, acc = fma(A[i][k], B[k][j], acc) from +0, whatever the
// rows, the panels a task owns, the micro-tile or the reading ahead of the
// next panel group. The oracle is that chain written out with std::fma, so
// the comparison is bitwise. This is what makes chunked prefill equal full
// prefill on `cpu` (lesson 15); the model-level tests check it end to end,
// this one pins the kernel alone, at sizes chosen to reach every path.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "backends/cpu_fast/cpu_gemm.h"
#include "core/backend.h"
#include "core/host_memory.h"
#include "runtime/registry.h"
#include "test_util.h"

using namespace plab;
using namespace plab::test;

namespace {

// C = A·B by the contract, for rows [row0, row1) and columns [col0, col1).
std::vector<float> fma_chains(const std::vector<float>& a, const std::vector<float>& w, int k,
                              int row0, int row1, int col0, int col1) {
    std::vector<float> c(std::size_t(row1 - row0) * (col1 - col0));
    for (int i = row0; i < row1; ++i)
        for (int j = col0; j < col1; ++j) {
            float acc = 0.0f;
            for (int kk = 0; kk < k; ++kk)
                acc = std::fma(a[std::size_t(i) * k + kk], w[std::size_t(j) * k + kk], acc);
            c[std::size_t(i - row0) * (col1 - col0) + (j - col0)] = acc;
        }
    return c;
}

}  // namespace

TEST_CASE("cpu GEMM: every output is one FMA chain over k in order, on every path",
          "[cpu][fast-paths]") {
    const int panel = cpu_gemm::panel_columns();
    struct Case {
        int m, n, k;
    };
    // Rows: a decode step (1), remainders only (5), one micro-tile (6), tiles
    // plus a remainder (13, 64, 130). Columns: less than a register, a last
    // panel of one register (n just past a panel), many panel groups (the
    // read-ahead of the next group; 1000 at 64 rows is a batched step's
    // classifier shape in small). k: 1, odd, and long enough that a row block
    // asks for one line every few k steps, or short enough that it asks for
    // several a step; one row block with a long k (6 x 288) asks for
    // several lines every few k steps (runs of at least 4 steps).
    for (const Case& t :
         {Case{1, 100, 33}, Case{5, 17, 7}, Case{6, panel + 1, 1}, Case{13, 10 * panel, 3},
          Case{64, 1000, 72}, Case{130, 6 * panel + 9, 288}, Case{24, 8 * panel, 200},
          Case{6, 4 * panel + 3, 288}}) {
        INFO("m=" << t.m << " n=" << t.n << " k=" << t.k);
        const auto a = random_floats(std::size_t(t.m) * t.k, 500 + t.m, -1.0f, 1.0f);
        const auto w = random_floats(std::size_t(t.n) * t.k, 600 + t.n, -1.0f, 1.0f);  // (N, K)
        HostVector packed;
        const cpu_gemm::Panels b = cpu_gemm::pack_transposed(w.data(), t.n, t.k, packed);
        const int panels = cpu_gemm::padded_columns(t.n) / panel;
        // The whole product, then a task's slice: some rows, some panels
        // (its C pointer at its first panel, as matmul_parts passes it).
        struct Slice {
            int row0, row1, panel0, panel1;
        };
        for (const Slice& s : {Slice{0, t.m, 0, panels}, Slice{t.m / 3, t.m, panels / 2, panels},
                               Slice{0, (t.m + 1) / 2, 0, (panels + 1) / 2}}) {
            if (s.row0 >= s.row1 || s.panel0 >= s.panel1) continue;
            INFO("rows [" << s.row0 << ", " << s.row1 << "), panels [" << s.panel0 << ", "
                          << s.panel1 << ")");
            const int col0 = s.panel0 * panel, col1 = std::min(t.n, s.panel1 * panel);
            const std::size_t ldc = std::size_t(t.n);
            std::vector<float> c(std::size_t(t.m) * ldc, NAN);  // cells outside stay NaN
            cpu_gemm::gemm(c.data() + col0, ldc, a.data(), std::size_t(t.k), b, s.row0, s.row1,
                           s.panel0, s.panel1);
            std::vector<float> got;
            for (int i = s.row0; i < s.row1; ++i)
                got.insert(got.end(), c.begin() + std::ptrdiff_t(i * ldc + col0),
                           c.begin() + std::ptrdiff_t(i * ldc + col1));
            const auto want = fma_chains(a, w, t.k, s.row0, s.row1, col0, col1);
            require_not_all_zero(want, "fma chains");
            require_bitwise_equal(got, want, "gemm vs its FMA-chain contract");
            // Nothing written outside the slice.
            int written_outside = 0;
            for (int i = 0; i < t.m; ++i)
                for (int j = 0; j < t.n; ++j) {
                    const bool inside = i >= s.row0 && i < s.row1 && j >= col0 && j < col1;
                    if (!inside && !std::isnan(c[std::size_t(i) * ldc + j])) ++written_outside;
                }
            REQUIRE(written_outside == 0);
        }
    }
}

TEST_CASE("cpu matmul: every split of a product into tasks gives the contract's bits",
          "[cpu][fast-paths]") {
    // matmul_parts shares a product out in tasks of rows x panels; the split
    // depends on the shape (cpu_fast.cpp): a decode row, columns only (a
    // wide product), two row halves (a narrow one: W_o and W_down of
    // stories15M, 9 panels, at 48+ rows), row tiles of at most 132 rows
    // (a long chunk). Whichever it is, each output is the one FMA chain.
    auto cpu = make_backend("cpu");
    struct Case {
        int m, n, k;
    };
    for (const Case& t : {Case{1, 288, 288}, Case{64, 288, 768}, Case{128, 288, 288},
                          Case{50, 260, 40}, Case{128, 864, 288}, Case{300, 100, 50}}) {
        INFO("m=" << t.m << " n=" << t.n << " k=" << t.k);
        const auto x = random_floats(std::size_t(t.m) * t.k, 700 + t.m, -1.0f, 1.0f);
        const auto w = random_floats(std::size_t(t.n) * t.k, 800 + t.n, -1.0f, 1.0f);
        DeviceArray dx(*cpu, x.size()), dw(*cpu, w.size()), out(*cpu, std::size_t(t.m) * t.n);
        cpu->upload(dx.buf(), x.data(), x.size());
        cpu->upload(dw.buf(), w.data(), w.size());
        cpu->prepare_weight(dw.buf(), t.n, t.k);  // packed once, as a model's weights are
        cpu->fill(out.buf(), NAN);
        cpu->matmul(out.buf(), dx.buf(), dw.buf(), t.m, t.n, t.k);
        std::vector<float> got(out.buf().size);
        cpu->download(got.data(), out.buf(), got.size());
        const auto want = fma_chains(x, w, t.k, 0, t.m, 0, t.n);
        require_not_all_zero(want, "fma chains");
        require_bitwise_equal(got, want, "matmul vs its FMA-chain contract");
    }
}
