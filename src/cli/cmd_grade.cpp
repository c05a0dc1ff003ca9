// `plab grade ASSIGNMENT FILE`: a student's Python or C++ file graded against
// the engine, check by check (lessons/assignments/README.md).
//
// The cases are generated here from a seed; the student's functions run in
// lessons/assignments/harness.py under Debian's /usr/bin/python3 with a time
// limit (a .cpp file compiled first, its extern "C" functions called through
// the assignment's cpp_adapter.py); the reference tensors come from the
// engine's own code (grade_*.cpp). A crash or an exception in the student's
// code is a failed check with its message; only bad input (an unknown
// assignment, a missing file, a file that does not import or compile) is a
// `plab: error:` line. Exit 0 when every check passes.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>

#include "cli/common.h"
#include "cli/grade.h"
#include "core/error.h"

namespace plab::cli {
namespace grade {

const std::vector<Assignment>& assignments() {
    static const std::vector<Assignment> all = {
        {"attention", "one head's causal attention, then any mask as a 0/1 matrix",
         attention_checks},
        {"rope", "RoPE at absolute positions, chunk by chunk", rope_checks},
        {"kv_cache", "a paged KV cache: block table, append, gather", kv_cache_checks},
        {"sampler", "temperature, top-k, top-p, and draws", sampler_checks},
        {"chunked_prefill", "the whole model's prefill from the weights, chunk by chunk",
         chunked_prefill_checks},
        {"online_softmax", "attention over key tiles with a running max and denominator",
         online_softmax_checks},
    };
    return all;
}

}  // namespace grade

namespace {

// The table's names, "a, b, c or d" (last_join " or ") or "a, b, c, d"; with
// cpp_only, those with a C++ variant (a cpp_adapter.py beside the starter).
std::string assignment_names(bool cpp_only, const char* last_join) {
    std::vector<std::string> names;
    for (const grade::Assignment& x : grade::assignments())
        if (!cpp_only || !grade::cpp_adapter(x.name).empty()) names.push_back(x.name);
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i)
        out += (i == 0 ? "" : i + 1 == names.size() ? last_join : ", ") + names[i];
    return out;
}

struct GradeOptions {
    std::string assignment;
    std::string file;
    std::uint64_t seed = 1;
    int timeout_s = 60;
    std::string python = "/usr/bin/python3";
    std::string cxx = "c++";
    bool json = false;
};

const grade::Assignment& find_assignment(const std::string& name) {
    std::string names;
    for (const grade::Assignment& a : grade::assignments()) {
        if (a.name == name) return a;
        names += (names.empty() ? "" : ", ") + a.name;
    }
    throw Error("unknown assignment '" + name + "'; the assignments are " + names +
                " (lessons/assignments/README.md)");
}

// Everything `plab grade` shows, text or JSON: the assignment, the file and
// every check's result, with the totals the score is made of.
struct GradeResult {
    std::string assignment;  // its name
    std::string summary;     // what it asks for
    std::string file;        // the student's file
    std::uint64_t seed = 1;  // of the generated cases
    std::vector<grade::CheckResult> checks;
    int checks_passed = 0;  // checks whose every case passed
    int cases = 0, cases_passed = 0;
    bool all_pass() const { return checks_passed == static_cast<int>(checks.size()); }
};

// The student's file as the harness will run it: a .py as it is, a .cpp
// through the assignment's adapter (refused where there is none).
grade::Submission grade_submission(const GradeOptions& o, const grade::Assignment& a) {
    PLAB_CHECK(
        access(o.file.c_str(), R_OK) == 0,
        o.file << ": no such file (or not readable); give the student's .py (or .cpp) file, e.g. "
                  "lessons/assignments/"
               << a.name << "/starter.py");
    PLAB_CHECK(o.timeout_s >= 1 && o.timeout_s <= 3600,
               "--timeout " << o.timeout_s << " must be between 1 and 3600 seconds");
    grade::Submission student{o.file, "", ""};
    if (grade::is_cpp_file(o.file)) {
        student.adapter = grade::cpp_adapter(a.name);
        PLAB_CHECK(!student.adapter.empty(),
                   "assignment " << a.name << " has no C++ variant (those with one: "
                                 << assignment_names(true, ", ") << "); give a .py file");
    }
    return student;
}

GradeResult compute_grade(const GradeOptions& o) {
    const grade::Assignment& a = find_assignment(o.assignment);
    grade::Submission student = grade_submission(o, a);
    std::mt19937_64 rng(o.seed);
    const std::vector<grade::Check> checks = a.make_checks(rng);
    nlohmann::json reply;
    {
        // A C++ file: compiled into a temporary library, removed at the end of
        // this block (before the exit run_grade makes, which would skip the destructor).
        std::unique_ptr<grade::CppBuild> build;
        if (!student.adapter.empty()) {
            build = std::make_unique<grade::CppBuild>(o.cxx, o.file, std::max(60, o.timeout_s));
            student.library = build->library();
        }
        reply = grade::run_harness(o.python, student, checks, o.timeout_s);
    }
    GradeResult r;
    r.assignment = a.name;
    r.summary = a.summary;
    r.file = o.file;
    r.seed = o.seed;
    r.checks = grade::grade_checks(checks, reply);
    for (const grade::CheckResult& c : r.checks) {
        r.checks_passed += c.passed == c.cases ? 1 : 0;
        r.cases += c.cases;
        r.cases_passed += c.passed;
    }
    return r;
}

nlohmann::json grade_json(const GradeResult& g) {
    nlohmann::json j;
    j["assignment"] = g.assignment;
    j["file"] = g.file;
    j["seed"] = g.seed;
    j["checks"] = nlohmann::json::array();
    for (const grade::CheckResult& r : g.checks) {
        nlohmann::json c = {{"name", r.name},
                            {"pass", r.passed == r.cases},
                            {"cases", r.cases},
                            {"cases_passed", r.passed},
                            {"score", double(r.passed) / r.cases}};
        if (r.passed < r.cases)
            c["first_failure"] = {{"case", r.failure_where},
                                  {"what", r.failure_what},
                                  {"detail", r.failure_detail},
                                  {"hint", r.hint}};
        j["checks"].push_back(c);
    }
    j["checks_passed"] = g.checks_passed;
    j["score"] = double(g.checks_passed) / g.checks.size();
    j["pass"] = g.all_pass();
    return j;
}

void print_grade_text(const GradeResult& g) {
    std::printf("Grading %s (%s): %s, seed %llu\n\n", g.assignment.c_str(), g.summary.c_str(),
                g.file.c_str(), static_cast<unsigned long long>(g.seed));
    std::printf("  %-44s %7s  %s\n", "check", "cases", "result");
    for (const grade::CheckResult& r : g.checks)
        std::printf("  %-44s %3d/%-3d  %s\n", r.name.c_str(), r.passed, r.cases,
                    r.passed == r.cases ? "pass" : "FAIL");
    for (const grade::CheckResult& r : g.checks) {
        if (r.passed == r.cases) continue;
        std::printf("\n%s: %s\n  case: %s\n  %s: %s\n  hint: %s\n", r.name.c_str(),
                    r.failure_is_first ? "first failure" : "first failure a known mistake explains",
                    r.failure_where.c_str(), r.failure_what.c_str(), r.failure_detail.c_str(),
                    r.hint.c_str());
    }
    std::printf("\nScore: %d of %zu checks pass (%d of %d cases)\n", g.checks_passed,
                g.checks.size(), g.cases_passed, g.cases);
}

void run_grade(const GradeOptions& o) {
    const GradeResult r = compute_grade(o);
    if (o.json) {
        print_json(grade_json(r));
    } else {
        print_grade_text(r);
    }
    std::fflush(stdout);
    if (!r.all_pass()) std::exit(1);
}

}  // namespace

void add_grade_command(CLI::App& app) {
    auto o = std::make_shared<GradeOptions>();
    CLI::App* cmd = app.add_subcommand(
        "grade", "grade a student's assignment file against the engine, check by check");
    // Both lists from the table of assignments (grade::assignments()).
    cmd->add_option("assignment", o->assignment,
                    assignment_names(false, " or ") + " (lessons/assignments/)")
        ->required();
    cmd->add_option("file", o->file,
                    "the student's Python file, or a .cpp file for a C++ variant (" +
                        assignment_names(true, ", ") + ")")
        ->required();
    cmd->add_option("--seed", o->seed, "seed of the generated cases")->capture_default_str();
    cmd->add_option("--timeout", o->timeout_s, "seconds the student's code may run in all")
        ->capture_default_str();
    cmd->add_option("--python", o->python, "the Python that runs it (numpy must import)")
        ->capture_default_str();
    cmd->add_option("--cxx", o->cxx, "the C++ compiler for a .cpp file")->capture_default_str();
    cmd->add_flag("--json", o->json, "a score per check, for course autograders");
    cmd->callback([o] { run_grade(*o); });
}

}  // namespace plab::cli
