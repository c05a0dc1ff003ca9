// `plab grade ASSIGNMENT FILE`: a student's Python or C++ file graded against
// the engine, check by check (lessons/assignments/README.md).
//
// The cases are generated here from a seed; the student's functions run in
// the grading sandbox (grade/sandbox.h: no network, nothing of the machine but
// /usr and /etc, limits on time, CPU, memory, processes and output) through
// lessons/assignments/harness.py, each check under its own time limit; a .cpp
// file is compiled in the sandbox first, with AddressSanitizer and UBSan. The
// reference tensors come from the engine's own code (grade/*.cpp). A crash, an
// exception or a limit in the student's code is a failed check with its
// reason; only bad input (an unknown assignment, a missing file, a file that
// does not import or compile, a sandbox that cannot start) is a `plab: error:`
// line. Exit 0 when every check passes.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>

#include "cli/common.h"
#include "core/error.h"
#include "grade/grade.h"

namespace plab::cli {

namespace {

// ".py or .cpp": the kinds of file an assignment takes.
std::string kinds_text(const std::vector<std::string>& kinds) {
    std::string out;
    for (std::size_t i = 0; i < kinds.size(); ++i)
        out += (i == 0 ? "" : i + 1 == kinds.size() ? " or " : ", ") + kinds[i];
    return out;
}

// The table's names, "a, b, c or d" (last_join " or ") or "a, b, c, d"; with
// cpp_only, those with a C++ variant (a starter.cpp beside the starter).
std::string assignment_names(bool cpp_only, const char* last_join) {
    std::vector<std::string> names;
    for (const grade::Assignment& x : grade::assignments())
        if (!cpp_only || grade::takes(x.name, ".cpp")) names.push_back(x.name);
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i)
        out += (i == 0 ? "" : i + 1 == names.size() ? last_join : ", ") + names[i];
    return out;
}

// The assignments that take a CUDA file (.cu), "a, b".
std::string cuda_assignment_names() {
    std::string out;
    for (const grade::Assignment& x : grade::assignments())
        if (grade::takes(x.name, ".cu")) out += (out.empty() ? "" : ", ") + x.name;
    return out;
}

struct GradeOptions {
    std::string assignment;
    std::string file;
    std::uint64_t seed = 1;
    grade::RunOptions run;
    bool no_sandbox = false, no_sanitize = false;
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
    grade::RunOptions run;  // how it ran: sandbox, sanitizers, limits
    bool all_pass() const { return checks_passed == static_cast<int>(checks.size()); }
};

// The adapter the student's file is run through: "" for a .py, the
// assignment's cpp_adapter.py for a .cpp (refused where there is none).
std::string submission_adapter(const GradeOptions& o, const grade::Assignment& a) {
    const std::vector<std::string> kinds = grade::file_kinds(a.name);
    PLAB_CHECK(access(o.file.c_str(), R_OK) == 0,
               o.file << ": no such file (or not readable); give the student's "
                      << kinds_text(kinds) << " file, e.g. lessons/assignments/" << a.name
                      << "/starter" << kinds.at(0));
    grade::check_limits(o.run.limits);
    const std::string kind = grade::file_kind(o.file);
    if (kind == ".cpp")
        PLAB_CHECK(std::find(kinds.begin(), kinds.end(), kind) != kinds.end(),
                   "assignment " << a.name << " has no C++ variant (those with one: "
                                 << assignment_names(true, ", ") << "); give a "
                                 << kinds_text(kinds) << " file");
    PLAB_CHECK(std::find(kinds.begin(), kinds.end(), kind) != kinds.end(),
               "assignment " << a.name << " takes a " << kinds_text(kinds) << " file (like "
                             << "lessons/assignments/" << a.name << "/starter" << kinds.at(0)
                             << "), not " << (kind.empty() ? "this" : "a " + kind) << " file");
    return kind == ".py" ? std::string() : grade::cpp_adapter(a.name);
}

GradeResult compute_grade(const GradeOptions& o) {
    const grade::Assignment& a = find_assignment(o.assignment);
    const std::string adapter = submission_adapter(o, a);
    std::mt19937_64 rng(o.seed);
    const std::vector<grade::Check> checks = a.make_checks(rng);
    grade::RunOptions run = o.run;
    run.sandboxed = !o.no_sandbox;
    run.sanitize = !o.no_sanitize;
    if (!run.sandboxed)
        std::fprintf(stderr,
                     "plab: warning: --no-sandbox: %s runs with your rights (your files, the "
                     "network, solution.*), limited in time, CPU, memory and output only\n",
                     o.file.c_str());
    // The stage (a temporary folder) is gone when run_submission returns,
    // before the exit run_grade makes.
    const nlohmann::json reply = grade::run_submission(run, o.file, adapter, checks);
    GradeResult r;
    r.assignment = a.name;
    r.summary = a.summary;
    r.file = o.file;
    r.seed = o.seed;
    r.run = run;
    r.checks = grade::grade_checks(checks, reply);
    for (const grade::CheckResult& c : r.checks) {
        r.checks_passed += c.passed == c.cases ? 1 : 0;
        r.cases += c.cases;
        r.cases_passed += c.passed;
    }
    return r;
}

// "sandboxed (bubblewrap), C++ with AddressSanitizer and UBSan; per check 10 s, ...".
std::string how_run_text(const GradeResult& g) {
    const bool cpp = grade::is_cpp_file(g.file);
    return std::string(g.run.sandboxed ? "sandboxed (bubblewrap)"
                                       : "NOT sandboxed (--no-sandbox)") +
           (cpp ? g.run.sanitize ? ", AddressSanitizer and UBSan" : ", no sanitizers" : "") + "; " +
           grade::limits_text(g.run.limits, g.run.sandboxed);
}

nlohmann::json grade_json(const GradeResult& g) {
    nlohmann::json j;
    j["assignment"] = g.assignment;
    j["file"] = g.file;
    j["seed"] = g.seed;
    const grade::Limits& l = g.run.limits;
    j["sandbox"] = {{"isolated", g.run.sandboxed},
                    {"sanitizers", grade::is_cpp_file(g.file) && g.run.sanitize},
                    {"check_timeout_s", l.check_timeout_s},
                    {"total_timeout_s", l.total_timeout_s},
                    {"cpu_s", l.cpu_s},
                    {"memory_mib", l.memory_mib},
                    {"processes", l.processes},
                    {"output_mib", l.output_mib}};
    j["checks"] = nlohmann::json::array();
    for (const grade::CheckResult& r : g.checks) {
        nlohmann::json c = {{"name", r.name},
                            {"pass", r.passed == r.cases},
                            {"cases", r.cases},
                            {"cases_passed", r.passed},
                            {"score", double(r.passed) / r.cases}};
        if (!r.limit.empty()) c["limit"] = r.limit;
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

// The result column: pass, FAIL, or FAIL with the limit the check ran into.
std::string result_text(const grade::CheckResult& r) {
    static const std::pair<const char*, const char*> kLimits[] = {
        {"timeout", "timed out"},       {"total-timeout", "file timed out"},
        {"cpu", "CPU limit"},           {"memory", "memory limit"},
        {"processes", "process limit"}, {"output", "output limit"},
        {"network", "no network"},      {"files", "read-only files"},
        {"sanitizer", "memory error"},  {"crash", "crashed"}};
    if (r.passed == r.cases) return "pass";
    for (const auto& [limit, text] : kLimits)
        if (r.limit == limit) return std::string("FAIL (") + text + ")";
    return "FAIL";
}

void print_grade_text(const GradeResult& g) {
    std::printf("Grading %s (%s): %s, seed %llu\n", g.assignment.c_str(), g.summary.c_str(),
                g.file.c_str(), static_cast<unsigned long long>(g.seed));
    std::printf("Run %s\n\n", how_run_text(g).c_str());
    std::printf("  %-44s %7s  %s\n", "check", "cases", "result");
    for (const grade::CheckResult& r : g.checks)
        std::printf("  %-44s %3d/%-3d  %s\n", r.name.c_str(), r.passed, r.cases,
                    result_text(r).c_str());
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
                    "the student's Python file, a .cpp file for a C++ variant (" +
                        assignment_names(true, ", ") + "), or a .cu file (" +
                        cuda_assignment_names() + ": CUDA run on the SIMT emulator)")
        ->required();
    cmd->add_option("--seed", o->seed, "seed of the generated cases")->capture_default_str();
    grade::Limits& l = o->run.limits;
    cmd->add_option("--timeout", l.check_timeout_s,
                    "wall seconds one check may run (all its cases); a check past it fails alone")
        ->capture_default_str();
    cmd->add_option("--total-timeout", l.total_timeout_s,
                    "wall seconds the whole file may run (and, apart, its compiling)")
        ->capture_default_str();
    cmd->add_option("--cpu-time", l.cpu_s, "CPU seconds each process may use")
        ->capture_default_str();
    cmd->add_option("--memory", l.memory_mib,
                    "MiB of memory: resident under AddressSanitizer, address space otherwise")
        ->capture_default_str();
    cmd->add_option("--processes", l.processes, "processes and threads at once")
        ->capture_default_str();
    cmd->add_option("--output", l.output_mib,
                    "MiB the code may print, and MiB it may write to its private /tmp")
        ->capture_default_str();
    cmd->add_flag("--no-sandbox", o->no_sandbox,
                  "run the student's code with your rights (trusted files only; a warning)");
    cmd->add_flag("--no-sanitize", o->no_sanitize,
                  "compile C++ without AddressSanitizer and UBSan");
    cmd->add_option("--python", o->run.python, "the Python that runs it (numpy must import)")
        ->capture_default_str();
    cmd->add_option("--cxx", o->run.cxx, "the C++ compiler for a .cpp file")->capture_default_str();
    cmd->add_flag("--json", o->json, "a score per check, for course autograders");
    cmd->callback([o] { run_grade(*o); });
}

}  // namespace plab::cli
