// `plab grade-class` (class_runner.h): the submissions listed, one `plab grade`
// child per file run `jobs` at a time in a poll loop, and the CSV they fill.
//
// Why children and not threads: a student's file can loop, crash or eat
// memory, and `plab grade` already confines it (its sandbox, its limits); a
// process group per child lets the loop kill a grader with everything in its
// group (kill(-pgid)) when it runs past its wall-clock limit or when the
// teacher presses Ctrl-C (the children's own groups do not get the terminal's
// SIGINT: the loop decides).
// Why one write() per row: the CSV is the run's only memory. A row written
// whole and fsync'd before the next is either in the file or not, so a run
// stopped anywhere is resumed by running it again (ClassCsv's constructor cuts
// a row the stop left unfinished).
#include "grade/class_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace plab::grade {

// Named, not only anonymous: the grader's files are compiled in unity batches,
// where another file's file-local helpers share this translation unit.
namespace class_runner_impl {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kHeader = "file,score,checks_passed,checks,error,seconds";
// A report of 5 checks is some 2 KiB; 4 MiB is room for any report, and a
// child that prints more (a student's file printing in a loop) is drained, not kept.
constexpr std::size_t kMaxStdout = std::size_t(4) << 20;
constexpr std::size_t kMaxStderr = std::size_t(64) << 10;
// How often the loop looks at the clock and the interrupt flag while no child writes.
constexpr int kTickMs = 100;

// Set by the SIGINT/SIGTERM handler and nothing else: all the work of
// stopping (killing, reaping) is done by the loop, outside the handler.
volatile std::sig_atomic_t g_interrupted = 0;

void on_interrupt(int) {
    g_interrupted = 1;
}

// `s` with every byte sequence that is not UTF-8 replaced by U+FFFD, one per
// maximal invalid subpart (the Unicode Standard, 3.9, "U+FFFD Substitution of
// Maximal Subparts"): a file name or a compiler's message in another encoding
// must not make the whole CSV unreadable to a spreadsheet.
std::string valid_utf8(const std::string& s) {
    const auto* b = reinterpret_cast<const unsigned char*>(s.data());
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        const unsigned c = b[i];
        std::size_t len = 0;            // of the sequence its first byte announces
        unsigned lo = 0x80, hi = 0xBF;  // the range of its second byte
        if (c < 0x80) {
            len = 1;
        } else if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            lo = c == 0xE0 ? 0xA0 : 0x80;  // no overlong forms
            hi = c == 0xED ? 0x9F : 0xBF;  // no surrogates
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            lo = c == 0xF0 ? 0x90 : 0x80;  // no overlong forms
            hi = c == 0xF4 ? 0x8F : 0xBF;  // nothing past U+10FFFF
        }
        std::size_t ok = len == 0 ? 0 : 1;  // bytes of the sequence that are valid so far
        while (ok > 0 && ok < len && i + ok < s.size()) {
            const unsigned t = b[i + ok];
            if (t < (ok == 1 ? lo : 0x80u) || t > (ok == 1 ? hi : 0xBFu)) break;
            ++ok;
        }
        if (len > 0 && ok == len) {
            out.append(s, i, len);
            i += len;
        } else {
            out += "\xEF\xBF\xBD";
            i += std::max<std::size_t>(ok, 1);
        }
    }
    return out;
}

// A CSV field (RFC 4180): quoted, with quotes doubled, when it holds a comma,
// a quote, CR or LF.
std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

std::string csv_line(const ClassRow& r) {
    std::string error = valid_utf8(r.error);
    std::replace(error.begin(), error.end(), '\n', ' ');
    std::replace(error.begin(), error.end(), '\r', ' ');
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", r.seconds);
    return csv_field(valid_utf8(r.file)) + "," + csv_field(r.score) + "," +
           std::to_string(r.checks_passed) + "," + (r.checks < 0 ? "" : std::to_string(r.checks)) +
           "," + csv_field(error) + "," + seconds + "\n";
}

// The records of a CSV text, each its decoded fields, and where the last
// record ended by a newline outside quotes ends: what follows is a row an
// interrupted write left unfinished.
struct CsvRecords {
    std::vector<std::vector<std::string>> rows;
    std::size_t complete_end = 0;
};

CsvRecords parse_csv(const std::string& text) {
    CsvRecords r;
    std::vector<std::string> fields(1);
    bool quoted = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (quoted) {
            if (c != '"') {
                fields.back() += c;
            } else if (i + 1 < text.size() && text[i + 1] == '"') {
                fields.back() += '"';
                ++i;
            } else {
                quoted = false;
            }
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            fields.emplace_back();
        } else if (c == '\n') {
            // A CRLF line end (a spreadsheet's): its CR was read as text outside quotes.
            if (i > 0 && text[i - 1] == '\r') fields.back().pop_back();
            r.rows.push_back(std::move(fields));
            fields.assign(1, "");
            r.complete_end = i + 1;
        } else {
            fields.back() += c;
        }
    }
    return r;
}

std::string read_fd(int fd, const std::string& path) {
    std::string text;
    char buffer[65536];
    for (;;) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        PLAB_CHECK(n >= 0, "cannot read " << path << " (" << std::strerror(errno) << ")");
        if (n == 0) return text;
        text.append(buffer, std::size_t(n));
    }
}

std::string first_line(const std::string& s) {
    std::string line = s.substr(0, s.find('\n'));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
}

// The header of a file that is not ours, for the message that refuses it.
std::string shown_header(const std::string& text) {
    std::string line = valid_utf8(first_line(text));
    if (line.size() > 80) line = line.substr(0, 80) + "...";
    return "'" + line + "'";
}

}  // namespace
}  // namespace class_runner_impl

// ---- the submissions -------------------------------------------------------

std::vector<std::string> list_submissions(const std::string& dir) {
    namespace fs = std::filesystem;
    const char* want =
        "; give the folder of the students' files (NAME.py, or NAME.cpp for a C++ variant)";
    std::error_code ec;
    const fs::file_status st = fs::status(dir, ec);
    PLAB_CHECK(!ec || ec == std::errc::no_such_file_or_directory,
               "cannot read " << dir << " (" << ec.message() << ")" << want);
    PLAB_CHECK(fs::exists(st), dir << ": no such directory" << want);
    PLAB_CHECK(fs::is_directory(st), dir << " is not a directory" << want);
    std::vector<std::string> names;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        std::error_code type_ec;
        if (!it->is_regular_file(type_ec)) continue;
        const std::string ext = it->path().extension().string();
        if (ext == ".py" || ext == ".cpp" || ext == ".cc" || ext == ".cxx")
            names.push_back(it->path().filename().string());
    }
    PLAB_CHECK(!ec, "cannot read the directory " << dir << " (" << ec.message() << ")" << want);
    PLAB_CHECK(!names.empty(),
               dir << " holds no submission (no file ending .py, .cpp, .cc or .cxx)" << want);
    std::sort(names.begin(), names.end());  // std::string's order: the names' bytes, unsigned
    return names;
}

// ---- the CSV ---------------------------------------------------------------

// (The public functions name their helpers class_runner_impl::..., never with
// a using-directive: that would make them plab::grade's names, beside the other
// files' helpers in the same unity batch.)

ClassCsv::ClassCsv(const std::string& path) : path_(path) {
    namespace impl = class_runner_impl;
    if (path.empty()) {
        std::fflush(stdout);  // rows go out with write(2): nothing of stdio's may follow them
        write_line(std::string(impl::kHeader) + "\n");
        return;
    }
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    PLAB_CHECK(fd_ >= 0, "cannot open --csv " << path << " (" << std::strerror(errno)
                                              << "); give a file in a folder you can write to");
    try {
        resume(path);
    } catch (...) {
        ::close(fd_);
        throw;
    }
}

ClassCsv::~ClassCsv() {
    if (!path_.empty()) ::close(fd_);
}

void ClassCsv::resume(const std::string& path) {
    namespace impl = class_runner_impl;
    const std::string text = impl::read_fd(fd_, path);
    const impl::CsvRecords csv = impl::parse_csv(text);
    const std::string header = std::string(impl::kHeader) + "\n";
    const std::string refuse = " is not a grade-class CSV (its header is ";
    const char* fix = "); give a new file or remove it";
    if (csv.rows.empty()) {
        // No complete line: a new file, or a header an interrupt cut short. Any
        // other text is someone else's file, never truncated.
        PLAB_CHECK(header.compare(0, text.size(), text) == 0,
                   path << refuse << impl::shown_header(text) << fix);
    } else {
        const std::vector<std::string> expected = {"file",   "score", "checks_passed",
                                                   "checks", "error", "seconds"};
        PLAB_CHECK(csv.rows[0] == expected, path << refuse << impl::shown_header(text) << fix);
        for (std::size_t i = 1; i < csv.rows.size(); ++i)
            if (!csv.rows[i][0].empty()) done_.insert(csv.rows[i][0]);
    }
    if (csv.complete_end < text.size()) {
        dropped_bytes_ = text.size() - csv.complete_end;
        PLAB_CHECK(::ftruncate(fd_, off_t(csv.complete_end)) == 0 && ::fsync(fd_) == 0,
                   "cannot cut the unfinished last row of " << path << " (" << std::strerror(errno)
                                                            << ")");
    }
    if (csv.rows.empty()) write_line(header);
}

bool ClassCsv::has(const std::string& file) const {
    return done_.count(class_runner_impl::valid_utf8(file)) > 0;  // the name as its row spells it
}

void ClassCsv::append(const ClassRow& row) {
    write_line(class_runner_impl::csv_line(row));
}

void ClassCsv::write_line(const std::string& line) {
    // One write() of the whole line, then fsync: a regular file takes it
    // whole, so after any stop the row is in OUT entirely or not at all. The
    // loop only goes on with a write to a pipe that a signal cut short.
    const std::string where = path_.empty() ? std::string("stdout") : path_;
    for (std::size_t done = 0; done < line.size();) {
        const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
        if (n < 0 && errno == EINTR) continue;
        PLAB_CHECK(n > 0, "cannot write to " << where << " (" << std::strerror(errno) << ")");
        done += std::size_t(n);
    }
    if (!path_.empty())
        PLAB_CHECK(::fsync(fd_) == 0,
                   "cannot write to " << where << " (fsync: " << std::strerror(errno) << ")");
}

// ---- the children ----------------------------------------------------------

namespace class_runner_impl {
namespace {

// One `plab grade` running: its pipes, what it said so far, its clock.
struct Child {
    std::string file;        // the submission's name in DIR
    pid_t pid = -1;          // also its process group's id
    int out = -1, err = -1;  // read ends of its stdout and stderr (-1 once at end of file)
    std::string out_text, err_text;
    bool out_cut = false, err_cut = false;  // more came than was kept
    Clock::time_point start;
    bool killed = false;  // by the loop, past the wall-clock limit
};

void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
}

// Reads what the pipe holds now (it is non-blocking): keeps up to `cap`
// bytes, drops the rest. At end of file the pipe is closed. A bounded number
// of reads, so a child that writes without end cannot hold the loop here.
void drain(int& fd, std::string& kept, std::size_t cap, bool& cut) {
    char buffer[65536];
    for (int reads = 0; fd >= 0 && reads < 64; ++reads) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n <= 0) return close_fd(fd);  // end of file, or a pipe that cannot be read
        const std::size_t room = cap - std::min(cap, kept.size());
        kept.append(buffer, std::min(room, std::size_t(n)));
        cut = cut || std::size_t(n) > room;
    }
}

void drain_child(Child& c) {
    drain(c.out, c.out_text, kMaxStdout, c.out_cut);
    drain(c.err, c.err_text, kMaxStderr, c.err_cut);
}

// fork + exec `plab_exe grade ASSIGNMENT DIR/FILE --json ARGS...` in a
// process group of its own, stdout and stderr into pipes, stdin /dev/null.
Child start_child(const ClassOptions& o, const std::string& file) {
    std::vector<std::string> args = {o.plab_exe, "grade", o.assignment,
                                     (fs::path(o.dir) / file).string(), "--json"};
    args.insert(args.end(), o.grade_args.begin(), o.grade_args.end());
    std::vector<char*> argv;  // built before fork: the child only calls async-signal-safe functions
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int out[2], err[2];
    PLAB_CHECK(::pipe2(out, O_CLOEXEC) == 0,
               "cannot create a pipe (" << std::strerror(errno) << ")");
    if (::pipe2(err, O_CLOEXEC) != 0) {
        ::close(out[0]);
        ::close(out[1]);
        PLAB_CHECK(false, "cannot create a pipe (" << std::strerror(errno) << ")");
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::setpgid(0, 0);
        struct sigaction dfl = {};
        dfl.sa_handler = SIG_DFL;  // SIGPIPE is ignored in the loop, not in the grader
        ::sigaction(SIGPIPE, &dfl, nullptr);
        const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null >= 0) ::dup2(null, 0);
        ::dup2(out[1], 1);
        ::dup2(err[1], 2);
        ::execv(argv[0], argv.data());
        const char said[] = "plab: error: grade-class cannot run the grader (exec failed)\n";
        const ssize_t ignored = ::write(2, said, sizeof said - 1);
        (void)ignored;
        ::_exit(127);
    }
    const int fork_errno = errno;
    ::close(out[1]);
    ::close(err[1]);
    if (pid < 0) {
        ::close(out[0]);
        ::close(err[0]);
        PLAB_CHECK(false, "cannot start a grader (fork: " << std::strerror(fork_errno) << ")");
    }
    // Also from this side, so that a kill(-pid) right away finds the group.
    ::setpgid(pid, pid);
    ::fcntl(out[0], F_SETFL, O_NONBLOCK);
    ::fcntl(err[0], F_SETFL, O_NONBLOCK);
    Child c;
    c.file = file;
    c.pid = pid;
    c.out = out[0];
    c.err = err[0];
    c.start = Clock::now();
    return c;
}

// The running children. Whatever way the loop is left (done, interrupted,
// an exception from a row's write), none is left behind.
struct Children {
    std::vector<Child> list;
    Children() = default;
    Children(const Children&) = delete;
    Children& operator=(const Children&) = delete;
    ~Children() { kill_all(); }
    void kill_all() {
        for (Child& c : list) {
            ::kill(-c.pid, SIGKILL);  // the grader and what it started in its group
            ::kill(c.pid, SIGKILL);
        }
        for (Child& c : list) {
            while (::waitpid(c.pid, nullptr, 0) < 0 && errno == EINTR) {
            }
            close_fd(c.out);
            close_fd(c.err);
        }
        list.clear();
    }
};

// SIGINT and SIGTERM set the flag (no SA_RESTART: poll returns at once);
// SIGPIPE is ignored, so a closed stdout is a write error with a message, and
// the children are killed on the way out. All restored at the end of the run.
struct InterruptHandlers {
    struct sigaction old_int, old_term, old_pipe;  // filled in by sigaction()
    InterruptHandlers() {
        g_interrupted = 0;
        struct sigaction sa = {};
        sa.sa_handler = on_interrupt;
        sigemptyset(&sa.sa_mask);
        ::sigaction(SIGINT, &sa, &old_int);
        ::sigaction(SIGTERM, &sa, &old_term);
        struct sigaction ignore = {};
        ignore.sa_handler = SIG_IGN;
        ::sigaction(SIGPIPE, &ignore, &old_pipe);
    }
    ~InterruptHandlers() {
        ::sigaction(SIGINT, &old_int, nullptr);
        ::sigaction(SIGTERM, &old_term, nullptr);
        ::sigaction(SIGPIPE, &old_pipe, nullptr);
    }
    InterruptHandlers(const InterruptHandlers&) = delete;
    InterruptHandlers& operator=(const InterruptHandlers&) = delete;
};

// Waits until a child writes or closes a pipe, a signal comes, or a tick passes.
void wait_for_output(std::vector<Child>& list) {
    std::vector<pollfd> fds;
    for (const Child& c : list)
        for (int fd : {c.out, c.err})
            if (fd >= 0) fds.push_back({fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), kTickMs) > 0)
        for (Child& c : list) drain_child(c);
}

// What a grader without a report said: its "plab: error:" line (a warning,
// e.g. --no-sandbox's, may come first), else its first line.
std::string error_line(const std::string& said) {
    const std::size_t at = said.find("plab: error:");
    if (at != std::string::npos && (at == 0 || said[at - 1] == '\n'))
        return first_line(said.substr(at));
    return first_line(said);
}

bool is_report(const nlohmann::json& j) {
    return j.is_object() && j.contains("score") && j["score"].is_number() &&
           j.contains("checks_passed") && j["checks_passed"].is_number_integer() &&
           j.contains("checks") && j["checks"].is_array();
}

// The row of a finished child: from its JSON report, else why there is none.
ClassRow make_row(const ClassOptions& o, const Child& c, int status) {
    ClassRow row;
    row.file = c.file;
    row.seconds = std::chrono::duration<double>(Clock::now() - c.start).count();
    const nlohmann::json report = nlohmann::json::parse(c.out_text, nullptr, false);
    if (!c.killed && is_report(report)) {
        row.score = report["score"].dump();  // 1.0, 0.2: the form Python's str gives a float
        row.checks_passed = report["checks_passed"].get<int>();
        row.checks = int(report["checks"].size());
        return row;
    }
    row.score = "0";
    if (c.killed) {
        row.error = "the grader ran past " + std::to_string(o.child_wall_s) + " s";
    } else if (WIFSIGNALED(status)) {
        row.error = "the grader crashed (signal " + std::to_string(WTERMSIG(status)) + ")";
    } else if (!error_line(c.err_text).empty()) {
        row.error = error_line(c.err_text);  // plab grade's one line: "plab: error: ..."
    } else if (c.out_cut) {
        row.error = "the grader's report is over 4 MiB";
    } else {
        row.error =
            "the grader exited " + std::to_string(WEXITSTATUS(status)) + " without a report";
    }
    return row;
}

// A report beside the submission; one the grader left empty is removed, so
// none is left from an earlier run.
void write_report(const fs::path& report, const std::string& text) {
    if (text.empty()) {
        std::error_code ignored;
        fs::remove(report, ignored);
        return;
    }
    std::ofstream f(report, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    PLAB_CHECK(f.good(), "cannot write " << report.string()
                                         << "; grade-class writes each report beside its "
                                            "submission: give a folder you can write to");
}

// NAME.json (the report) and NAME.err (what the grader said on stderr) beside
// the submission NAME.py, as `plab grade ... --json > NAME.json 2> NAME.err` would.
void write_reports(const ClassOptions& o, const Child& c) {
    const fs::path file = fs::path(o.dir) / c.file;
    write_report(fs::path(file).replace_extension(".json"), c.out_text);
    write_report(fs::path(file).replace_extension(".err"), c.err_text);
}

// ---- the loop --------------------------------------------------------------

ClassRun run_loop(const ClassOptions& o, const std::vector<std::string>& files,
                  const std::function<void(const ClassRow&)>& on_row) {
    PLAB_ASSERT(o.jobs >= 1 && o.child_wall_s >= 1);
    InterruptHandlers handlers;
    Children running;
    ClassRun run;
    std::size_t next = 0;
    while (next < files.size() || !running.list.empty()) {
        // 1. Interrupted: kill and reap every child; their files get no row.
        if (g_interrupted) {
            running.kill_all();
            run.interrupted = true;
            return run;
        }
        // 2. Start children up to `jobs` at once.
        while (running.list.size() < std::size_t(o.jobs) && next < files.size())
            running.list.push_back(start_child(o, files[next++]));
        // 3. Read their output until one writes or ends, a signal comes, or a tick passes.
        wait_for_output(running.list);
        // 4. Kill (the whole process group) a child past its wall-clock limit.
        const auto limit = std::chrono::seconds(o.child_wall_s);
        for (Child& c : running.list) {
            if (!c.killed && Clock::now() - c.start > limit) {
                ::kill(-c.pid, SIGKILL);
                c.killed = true;
            }
        }
        // 5. Reap the finished ones: a row each, in the order they finish.
        for (std::size_t i = 0; i < running.list.size();) {
            Child& c = running.list[i];
            int status = 0;
            if (::waitpid(c.pid, &status, WNOHANG) != c.pid) {
                ++i;
                continue;
            }
            Child done = std::move(c);  // reaped: out of the list the clean-up kills
            running.list.erase(running.list.begin() + std::ptrdiff_t(i));
            drain_child(done);  // what it wrote before it ended (grandchildren may hold the pipes)
            close_fd(done.out);
            close_fd(done.err);
            const ClassRow row = make_row(o, done, status);
            write_reports(o, done);
            on_row(row);
            ++run.graded;
        }
    }
    return run;
}

}  // namespace
}  // namespace class_runner_impl

ClassRun grade_class(const ClassOptions& o, const std::vector<std::string>& files,
                     const std::function<void(const ClassRow&)>& on_row) {
    return class_runner_impl::run_loop(o, files, on_row);
}

}  // namespace plab::grade
