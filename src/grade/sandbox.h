// The grading sandbox: a student's code (and the compiler reading it) runs
// isolated, with limits, so that grading a class is safe for the grader.
//
// What it teaches an instructor: an autograder runs untrusted code, as
// Gradescope's containers and CMS/IOI's `isolate` do. Here bubblewrap (Debian's
// `bubblewrap`) gives each run its own namespaces: no network (a loopback of
// its own), a file system of /usr and /etc read-only plus a private /tmp of a
// fixed size and the stage (the submission, the harness), nothing else of the
// machine — not the repository, not solution.py, not anyone's home; its own
// process ids, so nothing it starts outlives it. The limits are rlimits (CPU
// seconds, address space, file size, no core dumps) and a process count set
// inside the sandbox's own user namespace, so it counts this sandbox's
// processes only. Run as root, plab first drops to uid 65534 (setpriv): the
// kernel never enforces a process count for uid 0.
// What it is not: a boundary against kernel exploits (lessons/INSTRUCTORS.md).
#pragma once

#include <string>
#include <vector>

namespace plab::grade {

// What a graded submission may use; each a flag of `plab grade`.
struct Limits {
    int check_timeout_s = 10;  // --timeout: wall seconds of one check, all its cases
    int total_timeout_s = 60;  // --total-timeout: wall seconds of the whole file (and of compiling)
    int cpu_s = 60;            // --cpu-time: CPU seconds of each process
    int memory_mib = 1024;     // --memory: resident MiB under AddressSanitizer, else address space
    int processes = 64;        // --processes: processes and threads at once
    int output_mib = 8;        // --output: MiB printed, and MiB written to the private /tmp
};

// "per check 10 s, whole file 60 s, CPU 60 s a process, memory 1024 MiB, 64 processes,
// output 8 MiB": what `plab grade` states before its table. Without the sandbox
// the process count is not limited (it would count all the user's processes).
std::string limits_text(const Limits& limits, bool sandboxed);
// A program's path: `program` itself when it names one (a '/' in it) that
// runs, else the first on $PATH; "" when there is none.
std::string find_program(const std::string& program);
// The last non-empty line of a program's output: what it said last (an error).
std::string last_line(std::string text);
// Checks each limit's range; throws plab::Error naming the flag.
void check_limits(const Limits& limits);

// A private folder on the host (mkdtemp under $TMPDIR, else /tmp) that the
// sandboxed command sees as /grade: the submission, the harness, the
// compiler's output. Removed with this object.
class Stage {
public:
    explicit Stage(bool sandboxed);
    ~Stage();
    Stage(const Stage&) = delete;
    Stage& operator=(const Stage&) = delete;
    // A path inside the stage ("submission/alice.py") on the host, and as the
    // sandboxed command sees it (the same without a sandbox).
    std::string host(const std::string& rel) const { return dir_ + "/" + rel; }
    std::string inside(const std::string& rel) const {
        return (sandboxed_ ? std::string("/grade") : dir_) + "/" + rel;
    }
    void copy_in(const std::string& from, const std::string& rel) const;
    void write(const std::string& rel, const std::string& text) const;
    void make_dir(const std::string& rel) const;
    const std::string& dir() const { return dir_; }

private:
    std::string dir_;
    bool sandboxed_;
};

// One command to run on the stage.
struct SandboxCommand {
    std::vector<std::string> argv;      // paths as `Stage::inside` gives them
    std::vector<std::string> env;       // "KEY=VALUE"; PATH, HOME, TMPDIR and LANG are set
    std::vector<std::string> extra_ro;  // host folders also visible (a --python outside /usr)
    std::string chdir = "submission";   // working directory, in the stage
    bool writable_stage = false;        // the compiler writes its library there
    bool limit_address_space = true;    // false under AddressSanitizer (it reserves terabytes)
    std::string stdin_rel;              // stage file on stdin, "" for /dev/null
    int file_mib = 0;                   // largest file it may write; 0: Limits::output_mib
    int wall_s = 60;                    // killed after
};

// How it ran.
struct SandboxResult {
    int exit_code = 0;             // 128 + signal when killed by one
    bool timed_out = false;        // ran past wall_s
    bool output_exceeded = false;  // printed more than Limits::output_mib
    std::string out;               // stdout (the harness's JSON lines)
    std::string err;               // stderr, its first 64 KiB
    double seconds = 0;
};

class Sandbox {
public:
    // sandboxed false is --no-sandbox: the same limits but the process count,
    // no isolation.
    Sandbox(bool sandboxed, const Limits& limits);
    bool sandboxed() const { return sandboxed_; }
    const Limits& limits() const { return limits_; }
    SandboxResult run(const Stage& stage, const SandboxCommand& command) const;
    // "" when bubblewrap starts here; else one line saying why it does not
    // (bubblewrap missing, user namespaces not allowed). $PLAB_BWRAP names
    // another bwrap (tests use a missing one).
    static std::string cannot_start();

private:
    bool sandboxed_;
    Limits limits_;
};

}  // namespace plab::grade
