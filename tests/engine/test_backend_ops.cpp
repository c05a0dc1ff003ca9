// Every Backend op on every backend against cpu-ref, as one table (issue 44,
// part 7), in the style of ggml's test-backend-ops.
//
// What it shows: the forward pass is written once over the Backend interface
// (core/backend.h), so an op must mean the same thing wherever it runs. Each
// row of the table is one op with a few odd shapes (1, 7, 33, 65 and 129
// rows; widths and head dims that are no multiple of 4, 8 or 16; GQA;
// shuffled block tables with spare and freed blocks; masks that look back a
// window or ahead in a prefix, with score modifiers); each column is a
// backend the registry offers. A cell runs the op on seeded random inputs
// (never zeros) into outputs poisoned with NaN and compares what it wrote
// with cpu-ref's run on the same inputs: bit for bit on the reference
// backends (the project's promise: gpu-ref == cpu-ref), within the row's
// stated tolerance on the fast ones, each with the reason for it. Unused KV
// pool slots hold NaN too, so a kernel that reads a key it should not, or
// writes a slot it should not, fails. The table is printed once:
//
//   // clang-format off
//   op (shapes)         cpu-ref      cpu                 gpu-ref (emulated)  gpu (emulated)
//   embed (3)           bitwise      bitwise             bitwise             bitwise
//   rmsnorm (3)         bitwise      7.2e-07 (4% tol)    bitwise             7.2e-07 (4% tol)
//   attention (9)       bitwise      4.8e-07 (15% tol)   bitwise             6.2e-07 (49% tol) *
//   // clang-format on
//
// bitwise: every output has cpu-ref's bits; "7.2e-07 (4% tol)": the largest
// |got - cpu-ref| of the op's shapes, and the largest share of the allowed
// difference any element used; "*": the backend refused some shapes (listed
// under the table, with its reason); "not offered": the registry has no such
// backend here. Every cell checks every shape (CHECK, not REQUIRE), so the
// table shows every failing cell, and each failure names the op, the backend,
// the shape, the output, the first bad index and both values.
//
// A second case reads the Backend class from src/core/backend.h and fails when
// a virtual method is neither a row of the table nor listed as no op, with why.
//
// Left out on purpose: the paths inside one backend (cpu's GEMM contract, its
// decode-from-the-pool and key-mirror paths, threads; gpu's tile choices, each
// flash head dim, timing): the per-backend files check those deeper
// (tests/engine/test_cpu_fast_paths.cpp, test_cpu_gemm.cpp, test_threads.cpp,
// tests/gpu/). Shapes are small: the GPU backends run emulated (kernels/simt)
// on a machine without a CUDA device. Backends come from the registry by name
// only; this file includes no backend's or kernel's header.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/backend.h"
#include "runtime/registry.h"
#include "test_util.h"

using namespace plab;
using namespace plab::test;

namespace {

// ---- a cell's pieces ----------------------------------------------------------

// One output of an op, downloaded to the host. Indices (argmax) travel as
// floats: exact below 2^24.
struct Tensor {
    std::string name;
    std::vector<float> values;
    bool exact = false;      // bitwise on every backend, whatever the row's tolerance
    bool holds_nan = false;  // NaN marks pool slots the op must leave alone
    bool index = false;      // indices (argmax): 0 is an answer, not a sign of nothing written
};
using Outputs = std::vector<Tensor>;

// How far a fast backend's output may be from cpu-ref's, per element:
// |got - want| <= atol + rtol·|want|. Both 0: bitwise. `why` says where the
// difference comes from; it is printed under the table and with a failure.
struct Tolerance {
    double atol = 0;
    double rtol = 0;
    std::string why;
    bool bitwise() const { return atol == 0 && rtol == 0; }
};

// One shape of an op. `run` uploads the case's inputs (made once from fixed
// seeds: every backend gets the same), poisons the outputs with NaN, runs the
// op and downloads what it wrote.
struct OpCase {
    std::string shape;
    std::function<Outputs(Backend&)> run;
    Tolerance cpu;     // the fast CPU backend, "cpu"
    Tolerance gpu;     // the fast GPU backend, "gpu"
    int head_dim = 0;  // > 0: a fast backend may refuse this Dh (gpu's flash kernel)
};

struct OpRow {
    std::string op;  // the Backend method, exactly as declared
    std::vector<OpCase> cases;
};

DeviceArray upload(Backend& b, const std::vector<float>& host) {
    DeviceArray a(b, host.size());
    b.upload(a.buf(), host.data(), host.size());
    return a;
}

// An output buffer with NaN in every element: one the op forgets stays NaN.
DeviceArray poisoned(Backend& b, std::size_t n) {
    DeviceArray a(b, n);
    b.fill(a.buf(), NAN);
    return a;
}

std::vector<float> download(Backend& b, const DeviceArray& a) {
    std::vector<float> h(a.size());
    b.download(h.data(), a.buf(), h.size());
    return h;
}

std::string str(int v) {
    return std::to_string(v);
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

// cos and sin of pos·10000^(-2i/Dh), (max_seq_len, Dh/2) row-major each: the
// formula of core/rope.h; any table would do, as every backend reads the same.
struct Rope {
    std::vector<float> cos, sin;
};
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

// A sequence's block table over a pool with `spare` blocks nobody uses, the
// blocks in shuffled physical order (kernels must follow the table).
std::vector<int32_t> shuffled_table(int n_blocks, int spare, std::uint64_t seed) {
    std::vector<int32_t> all(std::size_t(n_blocks + spare));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), std::mt19937_64(seed));
    all.resize(std::size_t(n_blocks));
    return all;
}

int slot_of(const std::vector<int32_t>& table, int pos, int block_size) {
    return table[std::size_t(pos / block_size)] * block_size + pos % block_size;
}

// A layer's K and V pools: `pool_blocks` blocks of `block_size` rows of
// `row` floats, NaN except the slots of positions 0..n_keys-1 (seeded random)
// whose block is not freed.
struct Pools {
    std::vector<float> k, v;
};
Pools make_pools(const std::vector<int32_t>& table, int pool_blocks, int block_size, int row,
                 int n_keys, std::uint64_t seed) {
    Pools p{std::vector<float>(std::size_t(pool_blocks) * block_size * row, NAN), {}};
    p.v = p.k;
    const auto k = random_floats(std::size_t(n_keys) * row, seed, -2.0f, 2.0f);
    const auto v = random_floats(std::size_t(n_keys) * row, seed + 1);
    for (int pos = 0; pos < n_keys; ++pos) {
        if (table[std::size_t(pos / block_size)] == kFreedBlock) continue;  // stays NaN
        const std::size_t to = std::size_t(slot_of(table, pos, block_size)) * row;
        std::copy_n(k.begin() + std::ptrdiff_t(pos) * row, row, p.k.begin() + std::ptrdiff_t(to));
        std::copy_n(v.begin() + std::ptrdiff_t(pos) * row, row, p.v.begin() + std::ptrdiff_t(to));
    }
    return p;
}

// A mask as data (core/mask.h) with the words it points to (ALiBi slopes),
// kept alive with it; view() gives the value an AttentionShape holds.
struct MaskData {
    std::string what = "causal";
    Mask mask;  // n_terms 0: causal
    std::vector<uint32_t> words;
    Mask view() const {
        Mask m = mask;
        m.data = words.empty() ? nullptr : words.data();
        m.data_words = int32_t(words.size());
        return m;
    }
};

// window:W (+ sink:S) (Mistral; StreamingLLM), with ALiBi slopes 2^(-8(h+1)/H)
// (Press et al. 2022) and tanh soft-capping at `cap` (Gemma 2) when cap > 0.
std::shared_ptr<MaskData> window_mask(int window, int sinks, int n_heads, float cap) {
    auto m = std::make_shared<MaskData>();
    m->what = "window " + str(window) + (sinks > 0 ? " + sink " + str(sinks) : "") +
              (cap > 0 ? " + ALiBi + softcap " + str(int(cap)) : "");
    m->mask.n_terms = 1;
    m->mask.terms[0] = MaskTerm{MaskKind::window, window, sinks, 0, 0};
    if (cap > 0) {
        m->mask.alibi = 1;
        m->mask.alibi_offset = 0;
        m->mask.n_heads = n_heads;
        m->mask.softcap = cap;
        for (int h = 0; h < n_heads; ++h) {
            const float slope = float(std::exp2(-8.0 * (h + 1) / n_heads));
            uint32_t bits;
            std::memcpy(&bits, &slope, sizeof bits);
            m->words.push_back(bits);
        }
    }
    return m;
}

// prefix:P (prefix-LM, Raffel et al. 2020): the first P positions see each other.
std::shared_ptr<MaskData> prefix_mask(int p) {
    auto m = std::make_shared<MaskData>();
    m->what = "prefix " + str(p);
    m->mask.n_terms = 1;
    m->mask.terms[0] = MaskTerm{MaskKind::prefix, p, 0, 0, 0};
    return m;
}

// One attention problem: a chunk of queries over a paged cache.
struct AttentionCase {
    int n_queries, pos0, n_heads, n_kv_heads, head_dim, block_size;
    std::shared_ptr<MaskData> mask = std::make_shared<MaskData>();
    // Blocks the mask lets no query of the chunk see are freed (kFreedBlock in
    // the table), as a KV cache does once a key slides out of every window.
    bool free_unseen_blocks = false;
};

struct AttentionInputs {
    AttentionCase c;
    std::vector<int32_t> table;
    Pools pools;
    std::vector<float> q;
    int pool_blocks = 0;

    AttentionShape shape() const {
        AttentionShape s;
        s.n_queries = c.n_queries;
        s.pos0 = c.pos0;
        s.n_heads = c.n_heads;
        s.n_kv_heads = c.n_kv_heads;
        s.head_dim = c.head_dim;
        s.block_size = c.block_size;
        s.scale = 1.0f / std::sqrt(float(c.head_dim));
        s.mask = c.mask->view();
        return s;
    }
    int row() const { return c.n_kv_heads * c.head_dim; }
    std::string describe() const {
        return "C " + str(c.n_queries) + ", pos0 " + str(c.pos0) + ", H " + str(c.n_heads) +
               ", Hkv " + str(c.n_kv_heads) + ", Dh " + str(c.head_dim) + ", B " +
               str(c.block_size) + ", " + c.mask->what +
               (c.free_unseen_blocks ? ", unseen blocks freed" : "");
    }
};

AttentionInputs attention_inputs(const AttentionCase& c, std::uint64_t seed) {
    AttentionInputs in{c, {}, {}, {}, 0};
    const int n_keys = c.pos0 + c.n_queries;
    const int n_blocks = (n_keys + c.block_size - 1) / c.block_size;
    in.pool_blocks = n_blocks + 2;
    in.table = shuffled_table(n_blocks, 2, seed);
    if (c.free_unseen_blocks) {
        const Mask m = c.mask->view();
        for (int blk = 0; blk < n_blocks; ++blk) {
            bool seen = false;
            for (int q = c.pos0; q < n_keys; ++q)
                for (int k = blk * c.block_size; k < (blk + 1) * c.block_size; ++k)
                    seen = seen || m.visible(q, k);
            if (!seen) in.table[std::size_t(blk)] = kFreedBlock;
        }
        CHECK(std::count(in.table.begin(), in.table.end(), kFreedBlock) > 0);
    }
    in.pools = make_pools(in.table, in.pool_blocks, c.block_size, in.row(), n_keys, seed + 1);
    in.q = random_floats(std::size_t(c.n_queries) * c.n_heads * c.head_dim, seed + 3, -2.0f, 2.0f);
    return in;
}

// The pools on a backend as a KV cache makes them: prepare_kv_pool first (cpu
// keeps a transposed copy of K; results must not depend on it), then the contents.
struct DevicePools {
    DeviceArray k, v;
};
DevicePools upload_pools(Backend& b, const AttentionInputs& in) {
    DevicePools d{DeviceArray(b, in.pools.k.size()), upload(b, in.pools.v)};
    b.prepare_kv_pool(d.k.buf(), in.c.block_size, in.row());
    b.upload(d.k.buf(), in.pools.k.data(), in.pools.k.size());
    return d;
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

OpRow kv_append_row() {
    OpRow row{"kv_append", {}};
    struct Case {
        int rows, pos0, row_size, block_size;
    };
    // A chunk that crosses blocks, a decode step, a cold prompt of 33 rows;
    // rows of 12 (Hkv 2 · Dh 6), 7 and 16 floats.
    for (const Case c : {Case{7, 3, 12, 5}, Case{1, 22, 7, 4}, Case{33, 0, 16, 16}}) {
        const int n_blocks = (c.pos0 + c.rows + c.block_size - 1) / c.block_size;
        const int pool_blocks = n_blocks + 2;
        const auto table = shuffled_table(n_blocks, 2, 800 + c.rows);
        std::vector<int32_t> slots;
        for (int p = c.pos0; p < c.pos0 + c.rows; ++p)
            slots.push_back(slot_of(table, p, c.block_size));
        const auto k = random_floats(std::size_t(c.rows) * c.row_size, 810 + c.rows, -2.0f, 2.0f);
        const auto v = random_floats(std::size_t(c.rows) * c.row_size, 820 + c.rows);
        const std::size_t pool = std::size_t(pool_blocks) * c.block_size * c.row_size;
        row.cases.push_back({"C " + str(c.rows) + " at " + str(c.pos0) + ", row " +
                                 str(c.row_size) + ", B " + str(c.block_size),
                             [=](Backend& b) {
                                 const DeviceArray dk = upload(b, k), dv = upload(b, v);
                                 DeviceArray k_pool(b, pool);
                                 b.prepare_kv_pool(k_pool.buf(), c.block_size, c.row_size);
                                 b.fill(k_pool.buf(), NAN);
                                 const DeviceArray v_pool = poisoned(b, pool);
                                 b.kv_append(k_pool.buf(), v_pool.buf(), dk.buf(), dv.buf(), slots,
                                             c.row_size);
                                 return Outputs{{"K pool", download(b, k_pool), false, true},
                                                {"V pool", download(b, v_pool), false, true}};
                             },
                             kCopy, kCopy});
    }
    return row;
}

// The attention problems of the attention and attention_probs rows: a decode
// query, chunks with and without cached positions before them (65 queries:
// gpu's 64-query tile and one more; 129 keys), GQA, block
// sizes that do not divide the keys, Dh odd (7, 33: gpu's flash kernel runs
// them on the next compiled head dim, 8 and 48, with the extra components
// zero — kernels/kernels.h; above 128 gpu runs gpu-ref's kernel), Dh 32 with blocks of
// 16 (cpu's decode reads K from its transposed mirror), and masks that look
// back a window (its unseen blocks freed in the last case), forward in a
// prefix, and modify scores.
std::vector<AttentionCase> attention_cases() {
    return {
        {1, 33, 3, 1, 7, 5},
        {7, 0, 4, 2, 16, 16},
        {33, 5, 2, 1, 8, 7},
        {3, 40, 2, 2, 8, 4, window_mask(9, 2, 2, 5.0f)},
        {7, 0, 3, 3, 1, 3, prefix_mask(4)},
        {1, 70, 4, 2, 32, 16},
        {2, 50, 2, 1, 33, 8, window_mask(20, 1, 2, 30.0f)},
        {3, 40, 2, 1, 8, 4, window_mask(9, 0, 2, 0.0f), true},
        {65, 64, 4, 2, 48, 16},
    };
}

OpRow attention_row() {
    OpRow row{"attention", {}};
    std::uint64_t seed = 900;
    for (const AttentionCase& c : attention_cases()) {
        const AttentionInputs in = attention_inputs(c, seed += 10);
        row.cases.push_back({in.describe(),
                             [=](Backend& b) {
                                 const DevicePools pools = upload_pools(b, in);
                                 const DeviceArray q = upload(b, in.q);
                                 const DeviceArray out = poisoned(b, in.q.size());
                                 b.attention(out.buf(), q.buf(), pools.k.buf(), pools.v.buf(),
                                             in.table, in.shape());
                                 return Outputs{{"out", download(b, out)}};
                             },
                             kAttentionCpu, kAttentionGpu, c.head_dim});
    }
    return row;
}

OpRow attention_batch_row() {
    OpRow row{"attention_batch", {}};
    // A batched step: decode queries, a 3-query chunk and a 7-query prompt,
    // each over its own blocks of one shared pool, in one call. Dh 16 and Dh 7
    // (gpu runs 7 on its 8 kernel, the extra component zero).
    struct Seq {
        int n_queries, pos0;
    };
    const std::vector<Seq> seqs = {{1, 20}, {3, 9}, {7, 0}, {1, 0}, {1, 44}};
    for (const auto& [h, hkv, dh, bs] : {std::tuple{4, 2, 16, 4}, std::tuple{3, 1, 7, 5}}) {
        const int n_heads = h, n_kv_heads = hkv, head_dim = dh, block_size = bs;
        const int row_size = n_kv_heads * head_dim;
        std::vector<std::vector<int32_t>> tables;
        std::vector<std::vector<float>> qs;
        std::vector<AttentionShape> shapes;
        int next_block = 0;
        for (std::size_t i = 0; i < seqs.size(); ++i) {
            const int n_keys = seqs[i].pos0 + seqs[i].n_queries;
            const int n_blocks = (n_keys + block_size - 1) / block_size;
            std::vector<int32_t> t(static_cast<std::size_t>(n_blocks));
            std::iota(t.begin(), t.end(), next_block);
            std::shuffle(t.begin(), t.end(), std::mt19937_64(1000 + i));
            next_block += n_blocks;
            tables.push_back(t);
            qs.push_back(random_floats(std::size_t(seqs[i].n_queries) * n_heads * head_dim,
                                       1010 + i, -2.0f, 2.0f));
            AttentionShape s;
            s.n_queries = seqs[i].n_queries;
            s.pos0 = seqs[i].pos0;
            s.n_heads = n_heads;
            s.n_kv_heads = n_kv_heads;
            s.head_dim = head_dim;
            s.block_size = block_size;
            s.scale = 1.0f / std::sqrt(float(head_dim));
            shapes.push_back(s);
        }
        // Every sequence's positions filled; the pool's last block spare (NaN).
        const int pool_blocks = next_block + 1;
        Pools pools{std::vector<float>(std::size_t(pool_blocks) * block_size * row_size, NAN), {}};
        pools.v = pools.k;
        for (std::size_t i = 0; i < seqs.size(); ++i) {
            const Pools own = make_pools(tables[i], pool_blocks, block_size, row_size,
                                         seqs[i].pos0 + seqs[i].n_queries, 1020 + i);
            for (std::size_t f = 0; f < own.k.size(); ++f) {
                if (!std::isnan(own.k[f])) pools.k[f] = own.k[f];
                if (!std::isnan(own.v[f])) pools.v[f] = own.v[f];
            }
        }
        row.cases.push_back(
            {str(int(seqs.size())) + " sequences (C 1..7), H " + str(n_heads) + ", Hkv " +
                 str(n_kv_heads) + ", Dh " + str(head_dim) + ", B " + str(block_size),
             [=](Backend& b) {
                 DeviceArray k_pool(b, pools.k.size());
                 b.prepare_kv_pool(k_pool.buf(), block_size, row_size);
                 b.upload(k_pool.buf(), pools.k.data(), pools.k.size());
                 const DeviceArray v_pool = upload(b, pools.v);
                 std::vector<DeviceArray> q, out;
                 std::vector<AttentionCall> calls;
                 for (std::size_t i = 0; i < qs.size(); ++i) {
                     q.push_back(upload(b, qs[i]));
                     out.push_back(poisoned(b, qs[i].size()));
                     calls.push_back({out.back().buf(), q.back().buf(), tables[i], shapes[i]});
                 }
                 b.attention_batch(k_pool.buf(), v_pool.buf(), calls);
                 Outputs o;
                 for (std::size_t i = 0; i < out.size(); ++i)
                     o.push_back({"out of sequence " + str(int(i)), download(b, out[i])});
                 return o;
             },
             kAttentionCpu, kAttentionGpu, head_dim});
    }
    return row;
}

OpRow attention_probs_row() {
    OpRow row{"attention_probs", {}};
    std::uint64_t seed = 1100;
    for (const AttentionCase& c : attention_cases()) {
        const AttentionInputs in = attention_inputs(c, seed += 10);
        const int head = c.n_heads - 1;
        const std::size_t cells = std::size_t(c.n_queries) * (c.pos0 + c.n_queries);
        row.cases.push_back(
            {in.describe() + ", head " + str(head),
             [=](Backend& b) {
                 const DevicePools pools = upload_pools(b, in);
                 const DeviceArray q = upload(b, in.q);
                 const DeviceArray probs = poisoned(b, cells);
                 const DeviceArray scores = poisoned(b, cells);
                 b.attention_probs(probs.buf(), scores.buf(), q.buf(), pools.k.buf(), in.table,
                                   in.shape(), head);
                 return Outputs{{"probs", download(b, probs)}, {"scores", download(b, scores)}};
             },
             kProbsFast, kProbsFast});
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

// Every op of Backend that computes something, in the order core/backend.h
// declares them. A new op gets a row here (the second case below fails until it
// has one, or is listed in kNotOps with the reason).
std::vector<OpRow> op_rows() {
    return {embed_row(),           rmsnorm_row(),   matmul_row(),
            matmul_parts_row(),    rope_row(),      rope_rows_row(),
            kv_append_row(),       attention_row(), attention_batch_row(),
            attention_probs_row(), swiglu_row(),    add_row(),
            add_rmsnorm_row(),     argmax_row(),    argmax_rows_row()};
}

// The virtual methods of Backend that are no row of the table, and why.
const std::map<std::string, std::string> kNotOps = {
    {"name", "metadata: printed in the table's header"},
    {"is_reference", "metadata: checked against the registry name (-ref) in every column"},
    {"alloc", "memory: every cell allocates its inputs and outputs"},
    {"release", "memory: every cell releases them (DeviceArray)"},
    {"upload", "memory: every cell uploads its inputs"},
    {"download", "memory: every cell downloads its outputs"},
    {"fill", "memory: every cell poisons its outputs with fill(NaN)"},
    {"synchronize", "waits for queued work; download waits too"},
    {"prepare_weight", "a layout hint, results must not depend on it: the matmul row calls it"},
    {"prepare_kv_pool",
     "a layout hint, results must not depend on it: the kv_append and attention rows call it"},
    {"attention_tile_counts",
     "instrumentation of the fast kernels (test_cpu_fast_paths, test_flash)"},
    {"reset_attention_tile_counts", "instrumentation (as attention_tile_counts)"},
    {"times_device_ops", "device timing (tests/gpu/test_gpu_timing.cpp)"},
    {"set_device_op_timing", "device timing (tests/gpu/test_gpu_timing.cpp)"},
    {"take_device_op_times", "device timing (tests/gpu/test_gpu_timing.cpp)"},
};

// ---- comparing one cell ---------------------------------------------------------

// What one backend's outputs of one op were, over all its shapes.
struct Cell {
    bool offered = false;
    std::string backend;  // its name() ("gpu (emulated)")
    int ran = 0;          // shapes run and compared
    std::vector<std::string> refused;
    bool bitwise = true;
    double max_err = 0;    // max |got - cpu-ref| where the bits differ
    double max_share = 0;  // max |got - cpu-ref| / allowed
    int failed = 0;        // shapes that failed
    int shapes = 0;        // shapes of the op

    std::string text() const {
        if (!offered) return "not offered";
        std::string t;
        if (failed > 0) {
            t = "FAIL (" + str(failed) + " of " + str(shapes) + " shapes)";
        } else if (ran == 0) {
            t = "refused all";
        } else if (bitwise) {
            t = "bitwise";
        } else {
            char buf[48];
            std::snprintf(buf, sizeof buf, "%.1e (%d%% tol)", max_err,
                          int(std::ceil(100 * max_share)));
            t = buf;
        }
        return refused.empty() ? t : t + " *";
    }
};

// The tolerance of a fast backend for this case, by its registry name.
const Tolerance* fast_tolerance(const OpCase& c, const std::string& backend) {
    if (backend == "cpu") return &c.cpu;
    if (backend == "gpu") return &c.gpu;
    return nullptr;
}

// A float with enough digits to tell neighbours apart, and its bits.
std::string exact_text(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.9g (0x%08x)", double(f), u);
    return buf;
}

// Compares one output with cpu-ref's: identical bits always pass; otherwise
// both finite and within the tolerance (none: bitwise). Returns whether it
// passed; a failure is reported (FAIL_CHECK) with everything needed to find it.
bool compare(const std::string& where, const Tensor& got, const Tensor& want, const Tolerance& tol,
             Cell& cell) {
    if (got.values.size() != want.values.size()) {
        FAIL_CHECK(where << ", " << want.name << ": " << got.values.size() << " values, cpu-ref "
                         << want.values.size());
        return false;
    }
    for (std::size_t i = 0; i < got.values.size(); ++i) {
        const float a = got.values[i], e = want.values[i];
        if (std::memcmp(&a, &e, sizeof a) == 0) continue;
        cell.bitwise = false;
        const double diff = std::fabs(double(a) - double(e));
        const double allowed = tol.atol + tol.rtol * std::fabs(double(e));
        if (std::isfinite(diff)) {
            cell.max_err = std::max(cell.max_err, diff);
            cell.max_share = std::max(cell.max_share, allowed > 0 ? diff / allowed : INFINITY);
        }
        if (tol.bitwise() || !(diff <= allowed)) {
            if (tol.bitwise()) {
                FAIL_CHECK(where << ", " << want.name << ": first difference at element " << i
                                 << ": got " << exact_text(a) << ", cpu-ref " << exact_text(e)
                                 << "; bitwise required: " << tol.why);
            } else {
                FAIL_CHECK(where << ", " << want.name << ": first bad element " << i << ": got "
                                 << exact_text(a) << ", cpu-ref " << exact_text(e) << ", |diff| "
                                 << diff << " > allowed " << allowed << " = " << tol.atol << " + "
                                 << tol.rtol << "·|cpu-ref| (" << tol.why << ")");
            }
            return false;
        }
    }
    return true;
}

// The oracle's own output must be worth comparing with: not all zero, and
// NaN only where NaN marks slots the op leaves alone.
void check_oracle(const std::string& where, const Tensor& t) {
    bool any_nonzero = false, any_nan = false;
    for (float f : t.values) {
        any_nonzero = any_nonzero || (f != 0.0f && !std::isnan(f));
        any_nan = any_nan || std::isnan(f);
    }
    if (!any_nonzero && !t.index)
        FAIL_CHECK(where << ", " << t.name << ": cpu-ref's output is all zero");
    if (any_nan && !t.holds_nan)
        FAIL_CHECK(where << ", " << t.name << ": cpu-ref's output holds NaN");
}

// Does this error say the backend cannot run this head dim (and nothing else)?
bool refuses_head_dim(const std::string& message, int head_dim) {
    return head_dim > 0 && message.find("head_dim") != std::string::npos &&
           message.find(str(head_dim)) != std::string::npos;
}

Cell run_cell(const OpRow& row, const std::string& name, Backend& b,
              const std::vector<Outputs>& oracle) {
    Cell cell;
    cell.offered = true;
    cell.backend = b.name();
    cell.shapes = int(row.cases.size());
    for (std::size_t ci = 0; ci < row.cases.size(); ++ci) {
        const OpCase& c = row.cases[ci];
        const std::string where = row.op + " on " + b.name() + ", " + c.shape;
        const Tolerance* tol = b.is_reference() ? &kReference : fast_tolerance(c, name);
        if (tol == nullptr) {
            FAIL_CHECK(where << ": no tolerance stated for the fast backend '" << name
                             << "': give the OpCase one, with its reason");
            ++cell.failed;
            continue;
        }
        Outputs got;
        try {
            got = c.run(b);
        } catch (const std::exception& e) {
            if (!b.is_reference() && refuses_head_dim(e.what(), c.head_dim)) {
                cell.refused.push_back(c.shape + ": " + e.what());
                continue;
            }
            FAIL_CHECK(where << ": threw: " << e.what());
            ++cell.failed;
            continue;
        }
        ++cell.ran;
        const Outputs& want = oracle[ci];
        if (got.size() != want.size()) {
            FAIL_CHECK(where << ": " << got.size() << " outputs, cpu-ref " << want.size());
            ++cell.failed;
            continue;
        }
        bool ok = true;
        for (std::size_t t = 0; t < want.size(); ++t) {
            ok = compare(where, got[t], want[t], want[t].exact ? kExactOutput : *tol, cell) && ok;
        }
        if (!ok) ++cell.failed;
    }
    // A backend may refuse a head dim, never every shape of an op.
    if (cell.ran == 0)
        FAIL_CHECK(row.op << " on " << b.name() << ": ran none of its " << row.cases.size()
                          << " shapes");
    return cell;
}

std::string pad(const std::string& s, std::size_t width) {
    return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

std::string tolerance_text(const Tolerance& t) {
    if (t.bitwise()) return "bitwise";
    char buf[64];
    if (t.rtol == 0)
        std::snprintf(buf, sizeof buf, "%.1e", t.atol);
    else
        std::snprintf(buf, sizeof buf, "%.0e + %.0e·|ref|", t.atol, t.rtol);
    return buf;
}

}  // namespace

TEST_CASE("backend ops: every op on every backend against cpu-ref, as one table",
          "[backend_ops][gpu]") {
    const std::vector<OpRow> rows = op_rows();
    // The project's four backends in this order, then any other the registry offers.
    std::vector<std::string> columns = {"cpu-ref", "cpu", "gpu-ref", "gpu"};
    const std::vector<std::string> offered = backend_names();
    for (const std::string& n : offered)
        if (std::find(columns.begin(), columns.end(), n) == columns.end()) columns.push_back(n);
    std::map<std::string, std::unique_ptr<Backend>> backends;
    for (const std::string& n : offered) {
        backends[n] = make_backend(n);
        INFO("backend " << n << " (" << backends[n]->name() << ")");
        // The reference backends, and only they, promise cpu-ref's bits.
        CHECK(backends[n]->is_reference() == (n.size() > 4 && n.ends_with("-ref")));
    }

    // 1. The oracle: cpu-ref on every shape, its outputs worth comparing.
    auto cpu_ref = make_backend("cpu-ref");
    std::vector<std::vector<Outputs>> oracle(rows.size());
    for (std::size_t r = 0; r < rows.size(); ++r) {
        for (const OpCase& c : rows[r].cases) {
            oracle[r].push_back(c.run(*cpu_ref));
            for (const Tensor& t : oracle[r].back()) check_oracle(rows[r].op + ", " + c.shape, t);
        }
    }

    // 2. Every cell: the op's shapes on one backend (cpu-ref too: a second
    //    instance, which must repeat its bits).
    std::vector<std::vector<Cell>> cells(rows.size(), std::vector<Cell>(columns.size()));
    for (std::size_t r = 0; r < rows.size(); ++r) {
        for (std::size_t col = 0; col < columns.size(); ++col) {
            const auto it = backends.find(columns[col]);
            if (it == backends.end()) continue;  // not offered
            cells[r][col] = run_cell(rows[r], columns[col], *it->second, oracle[r]);
        }
    }

    // 3. The table, once.
    std::ostringstream out;
    out << "\nEvery Backend op on every backend against cpu-ref (GPU backends: "
        << gpu_form_description() << ")\n\n";
    const std::size_t op_width = 20, width = 22;
    out << pad("op (shapes)", op_width);
    for (std::size_t col = 0; col < columns.size(); ++col) {
        const auto it = backends.find(columns[col]);
        out << pad(it == backends.end() ? columns[col] : it->second->name(), width);
    }
    out << "\n";
    for (std::size_t r = 0; r < rows.size(); ++r) {
        out << pad(rows[r].op + " (" + str(int(rows[r].cases.size())) + ")", op_width);
        for (const Cell& cell : cells[r]) out << pad(cell.text(), width);
        out << "\n";
    }
    out << "\nbitwise: cpu-ref's bits on every shape; \"7.2e-07 (4% tol)\": the largest "
           "|got - cpu-ref|, and the largest share of the tolerance an element used.\n";
    bool any_refused = false;
    for (std::size_t r = 0; r < rows.size(); ++r) {
        for (const Cell& cell : cells[r]) {
            for (const std::string& why : cell.refused) {
                if (!any_refused) out << "* refused shapes (the other shapes of the op ran):\n";
                any_refused = true;
                out << "  " << rows[r].op << " on " << cell.backend << ", " << why << "\n";
            }
        }
    }
    out << "\nTolerances of the fast backends (the reference ones: bitwise):\n";
    for (const OpRow& row : rows) {
        const auto line = [&](const std::string& who, const Tolerance& t) {
            bool per_shape = false;  // a bound computed from each shape's inputs
            for (const OpCase& c : row.cases)
                per_shape = per_shape || fast_tolerance(c, who.substr(0, 3))->atol != t.atol;
            out << "  " << pad(row.op, op_width - 2) << pad(who, 9)
                << (per_shape ? "per shape, e.g. " : "") << tolerance_text(t) << ": " << t.why
                << "\n";
        };
        const OpCase& first = row.cases.front();
        if (first.cpu.why == first.gpu.why && first.cpu.atol == first.gpu.atol &&
            first.cpu.rtol == first.gpu.rtol) {
            line("cpu, gpu", first.cpu);
        } else {
            line("cpu", first.cpu);
            line("gpu", first.gpu);
        }
    }
    std::cout << out.str() << std::flush;

    // One assertion for the whole table (each failing shape was reported above).
    std::string failed_cells;
    for (std::size_t r = 0; r < rows.size(); ++r)
        for (const Cell& cell : cells[r])
            if (cell.offered && (cell.failed > 0 || cell.ran == 0))
                failed_cells += " " + rows[r].op + " on " + cell.backend + ";";
    INFO("failed cells:" << failed_cells);
    CHECK(failed_cells.empty());
}

TEST_CASE("backend ops: the table has a row for every op the Backend interface declares",
          "[backend_ops]") {
    // The virtual methods of class Backend, read from its header (comments
    // dropped): the name before the '(' of each `virtual ... (`.
    const std::string header =
        read_bytes(std::filesystem::path(PLAB_TESTS_DIR) / ".." / "src" / "core" / "backend.h");
    REQUIRE_FALSE(header.empty());
    const std::size_t begin = header.find("class Backend {");
    REQUIRE(begin != std::string::npos);
    const std::size_t end = header.find("\n};", begin);
    REQUIRE(end != std::string::npos);
    const std::string body =
        std::regex_replace(header.substr(begin, end - begin), std::regex("//[^\n]*"), "");
    std::set<std::string> declared;
    const std::regex virtual_method(R"(virtual\s+[^(;]*?(~?\w+)\s*\()");
    for (auto it = std::sregex_iterator(body.begin(), body.end(), virtual_method);
         it != std::sregex_iterator(); ++it) {
        const std::string name = (*it)[1];
        if (name[0] != '~') declared.insert(name);
    }
    // Guards the reading itself: Backend has had 30 virtual methods since issue 14.
    REQUIRE(declared.size() >= 25);

    std::set<std::string> rows;
    for (const OpRow& row : op_rows()) {
        INFO("row " << row.op);
        CHECK(rows.insert(row.op).second);  // one row per op
        CHECK_FALSE(row.cases.empty());
        CHECK(kNotOps.count(row.op) == 0);
    }
    for (const std::string& name : declared) {
        INFO("Backend::" << name
                         << " is neither a row of the table in tests/engine/test_backend_ops.cpp "
                            "nor in its kNotOps: a new op gets a row (seeded inputs, odd shapes, "
                            "outputs poisoned with NaN, a tolerance with its reason per fast "
                            "backend); a method that computes nothing goes in kNotOps, with why");
        CHECK((rows.count(name) + kNotOps.count(name)) == 1);
    }
    for (const std::string& name : rows) {
        INFO("the table's row " << name << " names no virtual method of Backend");
        CHECK(declared.count(name) == 1);
    }
    for (const auto& [name, why] : kNotOps) {
        INFO("kNotOps lists " << name << ", which Backend does not declare");
        CHECK(declared.count(name) == 1);
    }
    CHECK(declared.size() == rows.size() + kNotOps.size());
}
