// `plab grade`: what an assignment is, to the grader (lessons/assignments/README.md).
//
// What it teaches: a student's piece is checked against the engine's own code,
// tensor by tensor. An assignment makes cases (seeded inputs, odd sizes, chunk
// plans); each case is a list of calls the Python harness
// (lessons/assignments/harness.py) makes on the student's file, and a list of
// expectations on what those calls return: the reference tensor computed by the
// engine, a tolerance that says why, where the case sits (layer/head/position/
// chunk) and known wrong answers with the hint each deserves ("your scores are
// not scaled by 1/sqrt(Dh)"). The grader compares, reports the first failure of
// each check with its index, expected and got, and the hint of the first known
// mistake the answer matches.
// A C++ variant (attention, rope, kv_cache: starter.cpp, solution.cpp) is
// compiled by the system compiler into a temporary shared library; the harness
// calls its extern "C" functions through the assignment's cpp_adapter.py, so
// both variants get the very same cases, checks and hints.
// The student's code runs in the grading sandbox (grade/sandbox.h), each check
// with a time limit of its own; C++ under AddressSanitizer and UBSan.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "grade/sandbox.h"

namespace plab::grade {

// A dense row-major array; what the harness sends and returns. In an expected
// tensor a NaN means "not checked" (a pool slot no position uses).
struct Tensor {
    std::vector<int> shape;
    std::vector<double> data;
    std::size_t size() const { return data.size(); }
};

Tensor tensor(std::vector<int> shape, std::vector<double> data);
Tensor tensor_f(std::vector<int> shape, const std::vector<float>& data);
// As the harness's argument: {"array": [...], "shape": [...], "dtype": ...}.
nlohmann::json to_arg(const Tensor& t, bool integer = false);

// A known wrong answer: if the student's value matches `value`, `hint` says why.
struct Mistake {
    Tensor value;
    std::string hint;
};

struct Expectation {
    int call = 0;                   // which call of the case returns the value
    int part = -1;                  // >= 0: element of a returned tuple ((K, V) of gather)
    std::string what;               // "output", "block table", "K of gather"
    std::string where;              // "T=7 Dh=3, chunk 2 (positions 5..8)"
    std::vector<std::string> axes;  // names of the axes, for the first bad index
    Tensor expected;
    // >= 0: no fixed reference; `expected` is what that call of the same case
    // returned (chunked prefill against the student's own full prefill).
    int same_as_call = -1;
    double atol = 0, rtol = 0;      // |got - expected| <= atol + rtol |expected|
    std::vector<Mistake> mistakes;  // tried in order
    // A hint from the answer itself when no mistake matches ("" if none).
    std::function<std::string(const Tensor& got)> diagnose;
    // When set, replaces the element-by-element comparison: "" when `got` passes,
    // else the failure's detail. `reference` is `expected`, or under same_as_call
    // the other call's answer (draws in distribution; another seed, other draws).
    std::function<std::string(const Tensor& got, const Tensor& reference)> judge;
};

struct Case {
    nlohmann::json calls = nlohmann::json::array();
    std::vector<Expectation> expect;
};

struct Check {
    std::string name;
    std::string hint;  // when no mistake matches
    std::vector<Case> cases;
};

struct Assignment {
    std::string name;
    std::string summary;
    std::vector<Check> (*make_checks)(std::mt19937_64& rng);
};

// Every assignment the grader knows, in teaching order.
const std::vector<Assignment>& assignments();
std::vector<Check> attention_checks(std::mt19937_64& rng);
std::vector<Check> rope_checks(std::mt19937_64& rng);
std::vector<Check> kv_cache_checks(std::mt19937_64& rng);
std::vector<Check> sampler_checks(std::mt19937_64& rng);
std::vector<Check> chunked_prefill_checks(std::mt19937_64& rng);
std::vector<Check> online_softmax_checks(std::mt19937_64& rng);
std::vector<Check> flash_kernel_checks(std::mt19937_64& rng);

// Seeded inputs in [-scale, scale], never all zeros.
std::vector<float> uniform(std::mt19937_64& rng, std::size_t n, float scale = 1.0f);
// A chunk plan over t tokens: random lengths 1..max_chunk.
std::vector<int> random_plan(std::mt19937_64& rng, int t, int max_chunk);
int uniform_int(std::mt19937_64& rng, int lo, int hi);  // lo..hi inclusive

// The result of one check after grading.
struct CheckResult {
    std::string name;
    int cases = 0;
    int passed = 0;
    // The failure shown: the first one a named mistake explains (its hint says
    // what went wrong), else the first failing expectation. A crash or a
    // generic hint in an early case must not hide a diagnosis a later case makes.
    std::string failure_where, failure_what, failure_detail, hint;
    bool failure_is_first = true;  // false: an earlier case failed without a diagnosis
    // The limit a case of this check ran into ("timeout": the check ran past
    // --timeout), "" when none: the table names it beside FAIL.
    std::string limit;
};

// Compares the harness's results (one list of call results per case) with the checks.
std::vector<CheckResult> grade_checks(const std::vector<Check>& checks,
                                      const nlohmann::json& results);

// How the student's code is run: which Python and compiler, sanitizers on C++,
// the sandbox and its limits (grade/sandbox.h).
struct RunOptions {
    std::string python = "/usr/bin/python3";
    std::string cxx = "c++";
    bool sanitize = true;   // C++ compiled with AddressSanitizer and UBSan (--no-sanitize)
    bool sandboxed = true;  // --no-sandbox: the same limits but the process count, no isolation
    Limits limits;
};

// A compiled file (.cpp, .cc, .cxx; .cu: CUDA on the SIMT emulator), graded
// through its assignment's cpp_adapter.py.
bool is_cpp_file(const std::string& file);
// The kind of a submission, ".py", ".cpp" (also .cc, .cxx) or ".cu" ("" for any
// other), and the kinds an assignment takes: those its folder has a starter of.
std::string file_kind(const std::string& file);
std::vector<std::string> file_kinds(const std::string& assignment);
bool takes(const std::string& assignment, const std::string& kind);
// The assignment's cpp_adapter.py, or "" when it has no C++ variant.
std::string cpp_adapter(const std::string& assignment);

// Runs the student's `file` on the checks' cases in the sandbox: a .py through
// lessons/assignments/harness.py, a C++ file compiled first (in the sandbox
// too) and called through `adapter`. Returns {"results": [...]}, one list of
// call results per case; a case that never ran (the whole file ran past its
// limit, printed past its output limit) gets each call's error naming the
// limit, and a check that ran past its own limit names it ("limit": "timeout").
// Throws plab::Error for a file that does not import or compile, or a harness
// that could not run.
nlohmann::json run_submission(const RunOptions& run, const std::string& file,
                              const std::string& adapter, const std::vector<Check>& checks);

}  // namespace plab::grade
