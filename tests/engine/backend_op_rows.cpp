// The rows of the backend-ops table: what each Backend op is run on, and how
// close each fast backend must come to cpu-ref (backend_op_rows.h).
#include "backend_op_rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"

namespace plab::test::backend_ops {

// An output buffer with NaN in every element: one the op forgets stays NaN.
DeviceArray poisoned(Backend& b, std::size_t n) {
    DeviceArray a(b, n);
    b.fill(a.buf(), NAN);
    return a;
}

// ---- the tolerances, each with its reason ---------------------------------------
// The bounds are those the per-backend tests hold the same ops to
// (test_cpu_fast_paths.cpp, test_threads.cpp, tests/gpu/test_kernels.cpp).

// Bitwise: what the reference backends promise, and what a fast backend
// gives where it has nothing to round differently.
const Tolerance kReference{0, 0,
                           "a reference backend: cpu-ref's bits by construction (the same "
                           "core/ math in the same order)"};
const Tolerance kExactOutput{0, 0, "exact on every backend (x after one rounded add; an index)"};
const Tolerance kCopy{0, 0, "a copy: exact"};
const Tolerance kRope{0, 0, "the same rope_rotate_pair on the same table, no FMA: exact"};
const Tolerance kAdd{0, 0, "one rounded add per element: exact"};
const Tolerance kIndex{0, 0, "an index (the greedy token), lowest on ties: exact"};
const Tolerance kNormCpu{1e-6, 1e-5,
                         "the sum of squares in vector lanes, not in order: a few ulp of the "
                         "1/rms factor"};
const Tolerance kNormGpu{1e-6, 1e-5,
                         "the sum of squares in a tree (warp shuffles) and 1/sqrtf: a few ulp"};
const Tolerance kAttentionCpu{1e-6, 1e-5,
                              "GEMM blocking, lane-wise softmax and a vector exp instead of "
                              "strict_expf: a few ulp on outputs of size ~1"};
const Tolerance kAttentionGpu{1e-6, 1e-5,
                              "online softmax rescales partial sums tile by tile and uses the "
                              "library expf: a few ulp on outputs of size ~1"};
const Tolerance kSwigluCpu{1e-6, 1e-5, "Eigen's vectorised exp against strict_expf: a few ulp"};
const Tolerance kSwigluGpu{0, 0, "the same strict_swiglu (core/strict_math.h): exact"};
const Tolerance kProbsFast{0, 0,
                           "the probe is the reference's on both fast backends (a viewer "
                           "probe, not a hot path): exact"};

// Any order of summing k products is within γ_k·Σ|x·w| ≈ k·2⁻²⁴·Σ|x·w| of the
// exact sum (Higham, "Accuracy and Stability of Numerical Algorithms", eq.
// 3.5; an FMA only shrinks it), so two orders are within twice that. The
// bound is computed from the inputs, at the largest output (test_threads.cpp).
double matmul_bound(const std::vector<float>& x, const std::vector<float>& w, int m, int n, int k) {
    double most = 0;
    for (int r = 0; r < m; ++r) {
        for (int c = 0; c < n; ++c) {
            double abs_sum = 0;
            for (int i = 0; i < k; ++i)
                abs_sum += std::fabs(double(x[std::size_t(r) * k + i]) * w[std::size_t(c) * k + i]);
            most = std::max(most, abs_sum);
        }
    }
    return 2.0 * k * std::ldexp(1.0, -24) * most;
}

Tolerance matmul_cpu(double bound) {
    return {bound, 0,
            "one FMA chain over k per output (the cpu GEMM's contract) vs cpu-ref's rounded "
            "products and adds: within 2·k·2^-24·max Σ|x·w| (Higham 3.5)"};
}
Tolerance matmul_gpu(double bound) {
    return {bound, 0,
            "k-order sums, FMA-contracted natively (emulated: no FMA, cpu-ref's bits): within "
            "2·k·2^-24·max Σ|x·w| (Higham 3.5)"};
}

// ---- inputs ---------------------------------------------------------------------

Rope rope_table(int max_seq_len, int head_dim) {
    const int half = std::max(head_dim / 2, 1);
    Rope t{std::vector<float>(std::size_t(max_seq_len) * half, 1.0f),
           std::vector<float>(std::size_t(max_seq_len) * half, 0.0f)};
    for (int pos = 0; pos < max_seq_len; ++pos) {
        for (int i = 0; i < head_dim / 2; ++i) {
            const double angle = pos * std::pow(10000.0, -2.0 * i / head_dim);
            t.cos[std::size_t(pos) * half + i] = float(std::cos(angle));
            t.sin[std::size_t(pos) * half + i] = float(std::sin(angle));
        }
    }
    return t;
}

// Seeded values in [-1, 1) with the largest, 2, twice: at n/3 and at n-1.
// argmax must answer n/3 (the lowest index on ties).
std::vector<float> row_with_tie(std::size_t n, std::uint64_t seed) {
    auto x = random_floats(n, seed);
    x[n / 3] = 2.0f;
    x[n - 1] = 2.0f;
    return x;
}

// ---- the rows: one per op, a few odd shapes each -----------------------------------

OpRow embed_row() {
    OpRow row{"embed", {}};
    for (int dim : {1, 7, 33}) {
        const int vocab = 37, n = 7;
        const auto table = random_floats(std::size_t(vocab) * dim, 100 + dim);
        auto tokens = random_tokens(n, vocab, 200 + dim);
        tokens[1] = vocab - 1;  // the last row of the table
        tokens[n - 1] = tokens[0];
        row.cases.push_back({"C 7, D " + str(dim) + ", V 37",
                             [=](Backend& b) {
                                 const DeviceArray t = upload(b, table);
                                 const DeviceArray out = poisoned(b, std::size_t(n) * dim);
                                 b.embed(out.buf(), tokens, t.buf(), dim);
                                 return Outputs{{"out", download(b, out)}};
                             },
                             kCopy, kCopy});
    }
    return row;
}

OpRow rmsnorm_row() {
    OpRow row{"rmsnorm", {}};
    for (const auto& [r, d] : {std::pair{1, 7}, {7, 33}, {33, 129}}) {
        const int rows = r, dim = d;  // plain copies: the lambda captures them
        const auto x = random_floats(std::size_t(rows) * dim, 300 + dim, -3.0f, 3.0f);
        const auto w = random_floats(std::size_t(dim), 310 + dim, 0.5f, 1.5f);
        row.cases.push_back({"R " + str(rows) + ", D " + str(dim),
                             [=](Backend& b) {
                                 const DeviceArray dx = upload(b, x), dw = upload(b, w);
                                 const DeviceArray out = poisoned(b, x.size());
                                 b.rmsnorm(out.buf(), dx.buf(), dw.buf(), rows, dim, 1e-5f);
                                 return Outputs{{"out", download(b, out)}};
                             },
                             kNormCpu, kNormGpu});
    }
    return row;
}

OpRow matmul_row() {
    OpRow row{"matmul", {}};
    struct Mnk {
        int m, n, k;
        bool prepared;  // prepare_weight first, as DeviceModel does for a model's weights
    };
    // 65 x 1100 is large enough for gpu's blocked GEMM (the others take its
    // 16x16 tiles); k = 13 and 33 are no multiple of its 4-float loads.
    for (const Mnk s : {Mnk{1, 7, 33, true}, Mnk{7, 33, 129, false}, Mnk{33, 17, 20, true},
                        Mnk{65, 1100, 13, true}, Mnk{129, 33, 48, false}}) {
        const auto x = random_floats(std::size_t(s.m) * s.k, 400 + s.m);
        const auto w = random_floats(std::size_t(s.n) * s.k, 410 + s.n);
        const double bound = matmul_bound(x, w, s.m, s.n, s.k);
        row.cases.push_back({"M " + str(s.m) + ", N " + str(s.n) + ", K " + str(s.k) +
                                 (s.prepared ? ", weight prepared" : ""),
                             [=](Backend& b) {
                                 const DeviceArray dx = upload(b, x), dw = upload(b, w);
                                 if (s.prepared) b.prepare_weight(dw.buf(), s.n, s.k);
                                 const DeviceArray out = poisoned(b, std::size_t(s.m) * s.n);
                                 b.matmul(out.buf(), dx.buf(), dw.buf(), s.m, s.n, s.k);
                                 return Outputs{{"out", download(b, out)}};
                             },
                             matmul_cpu(bound), matmul_gpu(bound)});
    }
    return row;
}

OpRow matmul_parts_row() {
    OpRow row{"matmul_parts", {}};
    struct Parts {
        int m, k;
        std::vector<int> n;
    };
    // Q, K, V of a GQA layer (one wide, two narrow); gate and up; together wide
    // enough for gpu's blocked GEMM.
    for (const Parts& p :
         {Parts{7, 33, {33, 9, 9}}, Parts{33, 20, {17, 17}}, Parts{65, 12, {700, 300, 300}}}) {
        const auto x = random_floats(std::size_t(p.m) * p.k, 500 + p.m);
        std::vector<std::vector<float>> w;
        double bound = 0;
        std::string widths;
        for (std::size_t i = 0; i < p.n.size(); ++i) {
            w.push_back(random_floats(std::size_t(p.n[i]) * p.k, 510 + p.m + i));
            bound = std::max(bound, matmul_bound(x, w.back(), p.m, p.n[i], p.k));
            widths += (i ? "+" : "") + str(p.n[i]);
        }
        row.cases.push_back({"M " + str(p.m) + ", N " + widths + ", K " + str(p.k),
                             [=](Backend& b) {
                                 const DeviceArray dx = upload(b, x);
                                 std::vector<DeviceArray> dw, out;
                                 std::vector<MatmulPart> parts;
                                 for (std::size_t i = 0; i < w.size(); ++i) {
                                     dw.push_back(upload(b, w[i]));
                                     out.push_back(poisoned(b, std::size_t(p.m) * p.n[i]));
                                     parts.push_back({out.back().buf(), dw.back().buf(), p.n[i]});
                                 }
                                 b.matmul_parts(dx.buf(), p.m, p.k, parts);
                                 Outputs o;
                                 for (std::size_t i = 0; i < out.size(); ++i)
                                     o.push_back({"part " + str(int(i)), download(b, out[i])});
                                 return o;
                             },
                             matmul_cpu(bound), matmul_gpu(bound)});
    }
    return row;
}

OpRow rope_row() {
    OpRow row{"rope", {}};
    struct Case {
        int rows, n_heads, head_dim, pos0;
    };
    // Dh 9: odd, its last component is not rotated (a partial rotary embedding).
    for (const Case c : {Case{1, 1, 8, 5}, Case{7, 3, 9, 5}, Case{33, 2, 6, 29}}) {
        const auto x =
            random_floats(std::size_t(c.rows) * c.n_heads * c.head_dim, 600 + c.rows, -2.0f, 2.0f);
        const Rope t = rope_table(64, c.head_dim);
        row.cases.push_back({"C " + str(c.rows) + ", H " + str(c.n_heads) + ", Dh " +
                                 str(c.head_dim) + ", pos0 " + str(c.pos0),
                             [=](Backend& b) {
                                 const DeviceArray dx = upload(b, x);
                                 const DeviceArray cos = upload(b, t.cos), sin = upload(b, t.sin);
                                 b.rope(dx.buf(), c.rows, c.n_heads, c.head_dim, c.pos0, cos.buf(),
                                        sin.buf());
                                 return Outputs{{"x (in place)", download(b, dx)}};
                             },
                             kRope, kRope});
    }
    return row;
}

OpRow rope_rows_row() {
    OpRow row{"rope_rows", {}};
    // A batched step's rows (positions jumping between sequences), packed
    // documents (restarting at 0), a repeat and a descending run.
    const std::vector<int32_t> mixed = {5, 6, 7, 40, 0, 1, 2, 63, 63, 12, 11, 10, 3};
    for (const auto& [p, h, d] :
         {std::tuple{mixed, 3, 9}, std::tuple{std::vector<int32_t>{63}, 1, 8}}) {
        const std::vector<int32_t> positions = p;
        const int n_heads = h, head_dim = d;
        const int rows = int(positions.size());
        const auto x = random_floats(std::size_t(rows) * n_heads * head_dim, 700 + rows);
        const Rope t = rope_table(64, head_dim);
        row.cases.push_back({"C " + str(rows) + ", H " + str(n_heads) + ", Dh " + str(head_dim),
                             [=](Backend& b) {
                                 const DeviceArray dx = upload(b, x);
                                 const DeviceArray cos = upload(b, t.cos), sin = upload(b, t.sin);
                                 b.rope_rows(dx.buf(), rows, n_heads, head_dim, positions,
                                             cos.buf(), sin.buf());
                                 return Outputs{{"x (in place)", download(b, dx)}};
                             },
                             kRope, kRope});
    }
    return row;
}

OpRow swiglu_row() {
    OpRow row{"swiglu", {}};
    for (int n : {1, 7, 129, 1000}) {
        const auto g = random_floats(std::size_t(n), 1200 + n, -4.0f, 4.0f);
        const auto u = random_floats(std::size_t(n), 1210 + n);
        row.cases.push_back({"n " + str(n),
                             [=](Backend& b) {
                                 const DeviceArray dg = upload(b, g), du = upload(b, u);
                                 const DeviceArray out = poisoned(b, g.size());
                                 b.swiglu(out.buf(), dg.buf(), du.buf(), g.size());
                                 return Outputs{{"out", download(b, out)}};
                             },
                             kSwigluCpu, kSwigluGpu});
    }
    return row;
}

OpRow matmul_swiglu_row() {
    OpRow row{"matmul_swiglu", {}};
    // A decode row, a small chunk, and 65 rows (gpu: past its one-row kernel).
    for (const auto& [m_, f_, k_] : {std::tuple{1, 7, 33}, {7, 33, 20}, {65, 17, 129}}) {
        const int m = m_, f = f_, k = k_;
        const auto x = random_floats(std::size_t(m) * k, 1220 + k);
        const auto wg = random_floats(std::size_t(f) * k, 1230 + f, -2.0f, 2.0f);
        const auto wu = random_floats(std::size_t(f) * k, 1240 + f);
        // Each product within the matmul row's bound (dg, du), carried through
        // silu(g)·u: |Δ| <= max|silu'|·|u|·dg + |silu(g)|·du, and silu' < 1.1.
        const double dg = matmul_bound(x, wg, m, f, k), du = matmul_bound(x, wu, m, f, k);
        double most_u = 0, most_silu = 0;
        for (int i = 0; i < m; ++i) {
            for (int j = 0; j < f; ++j) {
                double g = 0, u = 0;
                for (int t = 0; t < k; ++t) {
                    g += double(x[std::size_t(i) * k + t]) * wg[std::size_t(j) * k + t];
                    u += double(x[std::size_t(i) * k + t]) * wu[std::size_t(j) * k + t];
                }
                most_u = std::max(most_u, std::fabs(u) + du);
                most_silu = std::max(most_silu, std::fabs(g / (1 + std::exp(-g))) + 1.1 * dg);
            }
        }
        const double carried = 1.1 * most_u * dg + most_silu * du;
        const Tolerance cpu{carried + 1e-6, 1e-5,
                            "both products within the matmul bound, carried through silu(g)·u, "
                            "and Eigen's vectorised exp: a few ulp more"};
        const Tolerance gpu{carried, 0,
                            "both products within the matmul bound (FMA natively; emulated: "
                            "cpu-ref's bits), carried through the same strict_swiglu"};
        row.cases.push_back(
            {"M " + str(m) + ", F " + str(f) + ", K " + str(k),
             [=](Backend& b) {
                 const DeviceArray dx = upload(b, x), dg_ = upload(b, wg), du_ = upload(b, wu);
                 const DeviceArray out = poisoned(b, std::size_t(m) * f);
                 const DeviceArray up = poisoned(b, std::size_t(m) * f);
                 b.matmul_swiglu(out.buf(), up.buf(), dx.buf(), dg_.buf(), du_.buf(), m, f, k);
                 return Outputs{{"out", download(b, out)}};
             },
             cpu, gpu});
    }
    return row;
}

OpRow add_row() {
    OpRow row{"add", {}};
    for (int n : {1, 7, 1000}) {
        const auto x = random_floats(std::size_t(n), 1300 + n, -3.0f, 3.0f);
        const auto y = random_floats(std::size_t(n), 1310 + n, -3.0f, 3.0f);
        row.cases.push_back({"n " + str(n),
                             [=](Backend& b) {
                                 const DeviceArray dx = upload(b, x), dy = upload(b, y);
                                 b.add(dx.buf(), dy.buf(), x.size());
                                 return Outputs{{"x (in place)", download(b, dx)}};
                             },
                             kAdd, kAdd});
    }
    return row;
}

OpRow add_rmsnorm_row() {
    OpRow row{"add_rmsnorm", {}};
    for (const auto& [r, d] : {std::pair{1, 7}, {7, 33}, {3, 300}}) {
        const int rows = r, dim = d;
        const std::size_t n = std::size_t(rows) * dim;
        const auto x = random_floats(n, 1400 + dim, -3.0f, 3.0f);
        const auto y = random_floats(n, 1410 + dim, -3.0f, 3.0f);
        const auto w = random_floats(std::size_t(dim), 1420 + dim, 0.5f, 1.5f);
        row.cases.push_back(
            {"R " + str(rows) + ", D " + str(dim),
             [=](Backend& b) {
                 const DeviceArray dx = upload(b, x), dy = upload(b, y);
                 const DeviceArray dw = upload(b, w), out = poisoned(b, n);
                 b.add_rmsnorm(dx.buf(), dy.buf(), out.buf(), dw.buf(), rows, dim, 1e-5f);
                 // x after the residual add: one rounded add, exact everywhere.
                 return Outputs{{"x (in place)", download(b, dx), true}, {"out", download(b, out)}};
             },
             kNormCpu, kNormGpu});
    }
    return row;
}

OpRow argmax_row() {
    OpRow row{"argmax", {}};
    for (int n : {1, 7, 33, 1001}) {
        const auto x = row_with_tie(std::size_t(n), 1500 + n);
        row.cases.push_back(
            {"n " + str(n) + (n > 1 ? ", max at two indices" : ""),
             [=](Backend& b) {
                 const DeviceArray dx = upload(b, x);
                 return Outputs{
                     {"index", {float(b.argmax(dx.buf(), x.size()))}, true, false, true}};
             },
             kIndex, kIndex});
    }
    return row;
}

OpRow argmax_rows_row() {
    OpRow row{"argmax_rows", {}};
    for (const auto& [r_, n_] : {std::pair{7, 33}, {1, 1001}, {3, 5}}) {
        const int rows = r_, n = n_;
        std::vector<float> x;
        for (int r = 0; r < rows; ++r) {
            const auto one = r % 2 == 0 ? row_with_tie(std::size_t(n), 1600 + r)
                                        : random_floats(std::size_t(n), 1600 + r);
            x.insert(x.end(), one.begin(), one.end());
        }
        row.cases.push_back({"rows " + str(rows) + ", n " + str(n),
                             [=](Backend& b) {
                                 const DeviceArray dx = upload(b, x);
                                 std::vector<int32_t> out(std::size_t(rows), -1);
                                 b.argmax_rows(dx.buf(), rows, std::size_t(n), out);
                                 std::vector<float> idx(out.begin(), out.end());
                                 return Outputs{{"indices", idx, true, false, true}};
                             },
                             kIndex, kIndex});
    }
    return row;
}

std::vector<OpRow> op_rows() {
    return {embed_row(),
            rmsnorm_row(),
            matmul_row(),
            matmul_parts_row(),
            rope_row(),
            rope_rows_row(),
            rope_kv_append_row(),
            kv_append_row(),
            attention_row(),
            attention_batch_row(),
            attention_probs_row(),
            swiglu_row(),
            matmul_swiglu_row(),
            add_row(),
            add_rmsnorm_row(),
            argmax_row(),
            argmax_rows_row()};
}

}  // namespace plab::test::backend_ops
