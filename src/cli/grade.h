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
// Left out: running untrusted code safely (the harness runs the student's file as
// the user, with a time limit only).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace plab::cli::grade {

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
};

// Compares the harness's results (one list of call results per case) with the checks.
std::vector<CheckResult> grade_checks(const std::vector<Check>& checks,
                                      const nlohmann::json& results);

// The student's code as the harness runs it: a Python file, or a C++ file
// compiled into `library` and called through the assignment's `adapter`.
struct Submission {
    std::string file;     // what the student handed in (named in every message)
    std::string library;  // "" for Python; else the compiled shared library
    std::string adapter;  // lessons/assignments/NAME/cpp_adapter.py, with `library`
};

// A C++ file (.cpp, .cc, .cxx), graded through its assignment's cpp_adapter.py.
bool is_cpp_file(const std::string& file);
// The assignment's cpp_adapter.py, or "" when it has no C++ variant.
std::string cpp_adapter(const std::string& assignment);

// A C++ submission compiled (`cxx` -O1 -shared -fPIC -std=c++17) into a shared
// library in a fresh temporary directory ($TMPDIR or /tmp), removed with this
// object. A file that does not compile throws plab::Error with the compiler's
// first error line, as a Python file that does not import does.
class CppBuild {
public:
    CppBuild(const std::string& cxx, const std::string& file, int timeout_s);
    ~CppBuild();
    CppBuild(const CppBuild&) = delete;
    CppBuild& operator=(const CppBuild&) = delete;
    const std::string& library() const { return library_; }

private:
    std::string dir_, library_;
};

// Runs the harness on the submission with the cases' calls; returns its reply
// ({"results": ...}). Throws plab::Error for an import failure (a syntax error)
// or a harness that could not run; a time-out gives {"timeout": seconds}.
nlohmann::json run_harness(const std::string& python, const Submission& student,
                           const std::vector<Check>& checks, int timeout_s);

}  // namespace plab::cli::grade
