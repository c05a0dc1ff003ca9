// `plab grade-class`: a whole class graded, `jobs` students at a time
// (lessons/assignments/README.md, "Grading a class").
//
// What it teaches: a batch runner that an interrupt or a crash cannot leave
// half-done. Each submission is graded by its own `plab grade ... --json`
// child (a process group of its own, with a wall-clock limit), so one
// student's endless loop or crash costs that student's row only; each row
// goes into the CSV with one write() and an fsync, so a file is either fully
// in the CSV or not there, and the same command run again grades the rest.
// Left out: sandboxing the student's code (that is `plab grade`'s job, and its
// flags are passed through untouched).
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace plab::grade {

struct ClassOptions {
    std::string plab_exe;    // this program (/proc/self/exe): each child runs `plab_exe grade`
    std::string assignment;  // as `plab grade` takes it
    std::string dir;         // the students' files
    std::string csv;         // OUT, resumed; "" for rows on stdout
    int jobs = 2;            // children at once
    std::vector<std::string> grade_args;  // passed to every `plab grade` after --json
    int child_wall_s = 150;               // a child running longer is killed
};

// One submission's row of the CSV.
struct ClassRow {
    std::string file;   // the submission's name in DIR
    std::string score;  // the report's score as JSON writes it ("1.0", "0.2"); "0" with no report
    int checks_passed = 0;
    int checks = -1;     // the report's number of checks; -1: no report (an empty field)
    std::string error;   // "" with a report; else why there is none (one line)
    double seconds = 0;  // wall time of its `plab grade`
};

// The names of DIR's regular files ending .py, .cpp, .cc or .cxx, sorted by
// the bytes of the name. Throws plab::Error for a missing or unreadable DIR
// and for a DIR without one submission.
std::vector<std::string> list_submissions(const std::string& dir);

// Where the rows go: OUT, resumed, or stdout (path ""). CSV header
// `file,score,checks_passed,checks,error,seconds`.
class ClassCsv {
public:
    // Opens (or creates) OUT: checks its header, cuts an unfinished last row
    // (an interrupted write) and remembers the files its rows name. Throws
    // plab::Error for a file that is not such a CSV. With path "", writes the
    // header on stdout.
    explicit ClassCsv(const std::string& path);
    ~ClassCsv();
    ClassCsv(const ClassCsv&) = delete;
    ClassCsv& operator=(const ClassCsv&) = delete;

    // Whether OUT already has a row for this submission (the name in DIR).
    bool has(const std::string& file) const;
    // Bytes of an unfinished last row cut from OUT when opened (0: none).
    std::size_t dropped_bytes() const { return dropped_bytes_; }
    // The row as one line, written with one write() (and an fsync into OUT).
    void append(const ClassRow& row);

private:
    void resume(const std::string& path);
    void write_line(const std::string& line);

    std::string path_;
    int fd_ = 1;
    std::set<std::string> done_;  // CSV-decoded file fields
    std::size_t dropped_bytes_ = 0;
};

// How a run of grade_class ended.
struct ClassRun {
    int graded = 0;            // rows handed to on_row
    bool interrupted = false;  // SIGINT or SIGTERM: the children killed, no row half-made
};

// Grades `files` (names in o.dir) with up to o.jobs `plab grade` children at
// once, writing each child's report beside its file (NAME.json, and NAME.err
// when it said something on stderr). on_row gets each row as its child
// finishes: rows come in the order files FINISH, not the order of `files`.
// SIGINT and SIGTERM stop the run: running children are killed and reaped,
// and the run returns with interrupted set.
ClassRun grade_class(const ClassOptions& o, const std::vector<std::string>& files,
                     const std::function<void(const ClassRow&)>& on_row);

}  // namespace plab::grade
