// The rows of the backend-ops table (test_backend_ops.cpp): one per Backend
// op, a few odd shapes each, seeded inputs, outputs poisoned with NaN, and
// for each fast backend the tolerance it is held to, with its reason.
// backend_op_rows.cpp makes them; test_backend_ops.cpp runs and compares them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "test_util.h"

namespace plab::test::backend_ops {

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

// The tolerances, each with its reason (backend_op_rows.cpp). Bitwise: what
// the reference backends promise; outputs exact on every backend whatever
// the row's tolerance; copies; RoPE. Then attention's and its probe's.
extern const Tolerance kReference;
extern const Tolerance kExactOutput;
extern const Tolerance kCopy;
extern const Tolerance kRope;
extern const Tolerance kAttentionCpu;
extern const Tolerance kAttentionGpu;
extern const Tolerance kProbsFast;

// An output with NaN in every element: one the op forgets stays NaN (inputs
// go up and outputs come back with test_util.h's upload and download).
DeviceArray poisoned(Backend& b, std::size_t n);

// cos and sin of pos·10000^(-2i/Dh), (max_seq_len, Dh/2) row-major each: the
// formula of core/rope.h; any table would do, as every backend reads the same.
struct Rope {
    std::vector<float> cos, sin;
};
Rope rope_table(int max_seq_len, int head_dim);

// The rows that read or write the KV cache (backend_op_rows_cache.cpp).
OpRow rope_kv_append_row();
OpRow kv_append_row();
OpRow attention_row();
OpRow attention_batch_row();
OpRow attention_probs_row();

inline std::string str(int v) {
    return std::to_string(v);
}

// Every op of Backend that computes something, in the order core/backend.h
// declares them. A new op gets a row here (test_backend_ops.cpp's second case
// fails until it has one, or is listed in its kNotOps with the reason).
std::vector<OpRow> op_rows();

}  // namespace plab::test::backend_ops
