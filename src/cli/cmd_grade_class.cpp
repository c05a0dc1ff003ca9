// `plab grade-class ASSIGNMENT DIR`: every submission in DIR graded by
// `plab grade ... --json`, `--jobs` at a time, one CSV row a file
// (lessons/assignments/README.md, "Grading a class").
//
// The work is grade/class_runner.h's: a child per file in a process group of
// its own, killed past its wall-clock limit, and a CSV that a stopped run
// resumes. This file parses the flags, hands `plab grade`'s own flags to every
// child as they were given, and prints: the rows into --csv OUT (or on
// stdout), a progress line a file on stderr. Exit 0 when every submission has
// its row, whatever the scores; 130 when interrupted (SIGINT, SIGTERM).
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>

#include "cli/common.h"
#include "core/error.h"
#include "grade/class_runner.h"
#include "grade/grade.h"

namespace plab::cli {

namespace {

// `plab grade`'s own flags, handed to every child as given (and only when given:
// `plab grade`'s defaults stay its own). value: the placeholder of a flag that
// takes one ("" for a switch); number: a value CLI11 checks is a number >= 0.
struct GradeClassPassFlag {
    const char* name;
    const char* value;
    bool number;
    const char* help;
};

// clang-format off
constexpr GradeClassPassFlag kGradeClassPassFlags[] = {
    {"--seed",          "N",    true,  "plab grade's: seed of the generated cases"},
    {"--timeout",       "S",    true,  "plab grade's: seconds each check may run (default 10)"},
    {"--total-timeout", "S",    true,  "plab grade's: seconds the whole file may run (default 60)"},
    {"--memory",        "MIB",  true,  "plab grade's: memory the student's code may use"},
    {"--processes",     "N",    true,  "plab grade's: processes the student's code may run"},
    {"--output",        "MIB",  true,  "plab grade's: output the student's code may write"},
    {"--cpu-time",      "S",    true,  "plab grade's: CPU seconds the student's code may use"},
    {"--python",        "PATH", false, "plab grade's: the Python that runs the student's code"},
    {"--cxx",           "PATH", false, "plab grade's: the C++ compiler for a .cpp file"},
    {"--no-sandbox",    "",     false, "plab grade's: run the student's code without its sandbox"},
    {"--no-sanitize",   "",     false, "plab grade's: compile a .cpp file without sanitizers"},
};
// clang-format on
constexpr std::size_t kGradeClassPassCount = std::size(kGradeClassPassFlags);

// `plab grade`'s --total-timeout default, and what a child may add to it: a
// C++ file's compile (plab grade gives the compiler 60 s) and 30 s of start-up
// and margin. A child past the sum is killed with its process group.
constexpr double kGradeClassTotalDefault = 60;
constexpr int kGradeClassChildMargin = 60 + 30;

struct GradeClassOptions {
    std::string assignment, dir, csv;
    int jobs = 2;
    std::string values[kGradeClassPassCount];         // a pass-through flag's value
    CLI::Option* options[kGradeClassPassCount] = {};  // was it given?
};

// This program's own path: every child runs `plab grade` from the very same binary.
std::string grade_class_this_program() {
    char path[4096];
    const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    PLAB_CHECK(n > 0, "cannot find this program's path (/proc/self/exe: "
                          << std::strerror(errno) << "); grade-class runs `plab grade` from it");
    return std::string(path, std::size_t(n));
}

grade::ClassOptions grade_class_options(const GradeClassOptions& o) {
    PLAB_CHECK(o.jobs >= 1 && o.jobs <= 64,
               "--jobs " << o.jobs << " must be between 1 and 64 (graders run at once)");
    // Checked here once, not in every child's row.
    bool known = false;
    std::string names;
    for (const grade::Assignment& a : grade::assignments()) {
        known = known || a.name == o.assignment;
        names += (names.empty() ? "" : ", ") + a.name;
    }
    PLAB_CHECK(known, "unknown assignment '" << o.assignment << "'; the assignments are " << names
                                             << " (lessons/assignments/README.md)");
    grade::ClassOptions c;
    c.plab_exe = grade_class_this_program();
    c.assignment = o.assignment;
    c.dir = o.dir;
    c.csv = o.csv;
    c.jobs = o.jobs;
    double total_s = kGradeClassTotalDefault;
    for (std::size_t i = 0; i < kGradeClassPassCount; ++i) {
        const GradeClassPassFlag& f = kGradeClassPassFlags[i];
        if (o.options[i]->count() == 0) continue;
        c.grade_args.push_back(f.name);
        if (*f.value != '\0') c.grade_args.push_back(o.values[i]);
        if (std::string(f.name) == "--total-timeout")  // a number >= 0: CLI11 checked it
            total_s = std::strtod(o.values[i].c_str(), nullptr);
    }
    // At most a day: a wall-clock limit is a guard, not a schedule.
    if (!std::isfinite(total_s) || total_s > 86400) total_s = 86400;
    c.child_wall_s = int(std::ceil(total_s)) + kGradeClassChildMargin;
    return c;
}

void run_grade_class(const GradeClassOptions& o) {
    const grade::ClassOptions c = grade_class_options(o);
    const std::vector<std::string> files = grade::list_submissions(c.dir);
    grade::ClassCsv csv(c.csv);
    std::vector<std::string> todo;
    for (const std::string& f : files)
        if (!csv.has(f)) todo.push_back(f);
    std::size_t done = files.size() - todo.size();
    if (csv.dropped_bytes() > 0)
        std::fprintf(stderr,
                     "%s: its last row was unfinished (%zu bytes, an interrupted write): cut\n",
                     c.csv.c_str(), csv.dropped_bytes());
    if (c.csv.empty())
        std::fprintf(stderr, "grading %zu submissions, %d at a time\n", files.size(), c.jobs);
    else
        std::fprintf(stderr, "grading %zu submissions (%zu already in %s), %d at a time\n",
                     files.size(), done, c.csv.c_str(), c.jobs);
    // Rows come in the order the graders FINISH (several run at once), not in
    // DIR's order; ClassCsv writes each whole, at once.
    const grade::ClassRun run = grade::grade_class(c, todo, [&](const grade::ClassRow& row) {
        csv.append(row);
        ++done;
        std::fprintf(stderr, "graded %zu of %zu: %s %s (%.1f s)\n", done, files.size(),
                     row.file.c_str(), row.score.c_str(), row.seconds);
    });
    if (!run.interrupted) return;
    if (c.csv.empty())
        std::fprintf(stderr,
                     "interrupted: %zu of %zu graded; with --csv OUT a run that stops is "
                     "resumed by running it again\n",
                     done, files.size());
    else
        std::fprintf(stderr,
                     "interrupted: %zu of %zu graded; run the same command again to grade the "
                     "rest\n",
                     done, files.size());
    std::exit(130);  // 128 + SIGINT, the shell's code for a command stopped by Ctrl-C
}

}  // namespace

void add_grade_class_command(CLI::App& app) {
    auto o = std::make_shared<GradeClassOptions>();
    CLI::App* cmd = app.add_subcommand(
        "grade-class",
        "grade every submission in a folder, --jobs at a time: one CSV row a file, resumable");
    cmd->add_option("assignment", o->assignment, "the assignment, as `plab grade` takes it")
        ->required();
    cmd->add_option("dir", o->dir,
                    "the folder of the students' files (NAME.py, or NAME.cpp for a C++ variant); "
                    "each report lands beside its file as NAME.json (and NAME.err)")
        ->required();
    cmd->add_option("--jobs", o->jobs, "submissions graded at once (1 to 64)")
        ->capture_default_str();
    cmd->add_option("--csv", o->csv,
                    "write the rows into this file and resume it: files it already has a row "
                    "for are skipped (default: rows on stdout)");
    for (std::size_t i = 0; i < kGradeClassPassCount; ++i) {
        const GradeClassPassFlag& f = kGradeClassPassFlags[i];
        if (*f.value == '\0') {
            o->options[i] = cmd->add_flag(f.name, f.help);
            continue;
        }
        o->options[i] = cmd->add_option(f.name, o->values[i], f.help)->type_name(f.value);
        if (f.number) o->options[i]->check(CLI::NonNegativeNumber);
    }
    cmd->callback([o] { run_grade_class(*o); });
}

}  // namespace plab::cli
