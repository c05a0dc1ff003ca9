// The grading sandbox (sandbox.h): bubblewrap's namespaces, rlimits, a wall
// clock and capped output around one command.
#include "grade/sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"

namespace plab::grade {
namespace {

// The unprivileged user a root grader becomes before the sandbox starts.
constexpr int kNobody = 65534;
// stdout carries the harness's results, not the student's prints (those go to
// stderr); this cap only stops a runaway.
constexpr std::size_t kStdoutCap = std::size_t(256) << 20;
// Of stderr only the start is kept: the messages that say what went wrong.
constexpr std::size_t kStderrKept = std::size_t(64) << 10;

std::string env_or(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : fallback;
}

// bwrap's full path ($PLAB_BWRAP, else the first on $PATH), or "".
std::string bwrap_path() {
    const std::string given = env_or("PLAB_BWRAP", "");
    return given.empty() ? find_program("bwrap") : given;
}

void append(std::vector<std::string>& to, std::initializer_list<std::string> items) {
    to.insert(to.end(), items);
}

// Debian's root folders outside /usr: symlinks into it (merged /usr) made
// again inside, or real folders bound read-only as they are.
void add_root_folders(std::vector<std::string>& a) {
    for (const char* name : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}) {
        const std::string path = std::string("/") + name;
        struct stat st {};
        if (lstat(path.c_str(), &st) != 0) continue;
        if (S_ISLNK(st.st_mode)) {
            append(a, {"--symlink", std::filesystem::read_symlink(path).string(), path});
        } else if (S_ISDIR(st.st_mode)) {
            append(a, {"--ro-bind", path, path});
        }
    }
}

std::vector<std::string> base_env(const SandboxCommand& c) {
    std::vector<std::string> env = c.env;
    for (const std::string kv :
         {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "TMPDIR=/tmp", "LANG=C.UTF-8"}) {
        const std::string key = kv.substr(0, kv.find('=') + 1);
        bool given = false;
        for (const std::string& e : c.env) given = given || e.rfind(key, 0) == 0;
        if (!given) env.push_back(kv);  // the command's own value wins
    }
    return env;
}

// The command line that runs `c` in the sandbox: [setpriv] bwrap ... prlimit ... argv.
std::vector<std::string> sandboxed_argv(const std::string& bwrap, const Stage& stage,
                                        const SandboxCommand& c, const Limits& limits) {
    std::vector<std::string> a;
    if (geteuid() == 0)  // the kernel counts no processes for uid 0: become nobody first
        a = {"/usr/bin/setpriv", "--reuid=" + std::to_string(kNobody),
             "--regid=" + std::to_string(kNobody), "--clear-groups", "--"};
    append(a, {bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
               "--new-session", "--ro-bind", "/usr", "/usr"});
    add_root_folders(a);
    append(a, {"--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev", "--size",
               std::to_string(std::size_t(limits.output_mib) << 20), "--tmpfs", "/tmp",
               c.writable_stage ? "--bind" : "--ro-bind", stage.dir(), "/grade"});
    for (const std::string& dir : c.extra_ro) append(a, {"--ro-bind", dir, dir});
    append(a, {"--chdir", stage.inside(c.chdir), "--clearenv"});
    for (const std::string& kv : base_env(c)) {
        const std::size_t eq = kv.find('=');
        append(a, {"--setenv", kv.substr(0, eq), kv.substr(eq + 1)});
    }
    // The process count is set inside the sandbox's own user namespace, so it
    // counts this sandbox's processes and threads, not every nobody's.
    const std::string n = std::to_string(limits.processes);
    append(a, {"--", "/usr/bin/prlimit", "--nproc=" + n + ":" + n, "--"});
    a.insert(a.end(), c.argv.begin(), c.argv.end());
    return a;
}

void set_limit(int resource, rlim_t soft, rlim_t hard) {
    const rlimit r{soft, hard};
    setrlimit(resource, &r);
}

// Owned by the sandbox's user, so that a root grader's nobody can read (and,
// for the compiler, write) the stage.
void give_to_nobody(const std::string& dir) {
    if (geteuid() != 0) return;
    std::error_code ec;
    [[maybe_unused]] int ignored = chown(dir.c_str(), kNobody, kNobody);
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec))
        ignored = lchown(e.path().c_str(), kNobody, kNobody);
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
    std::vector<char*> out;
    for (std::string& s : v) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

}  // namespace

std::string find_program(const std::string& program) {
    if (program.find('/') != std::string::npos)
        return access(program.c_str(), X_OK) == 0 ? program : "";
    std::stringstream path(env_or("PATH", "/usr/bin:/bin"));
    for (std::string dir; std::getline(path, dir, ':');) {
        const std::string candidate = dir + "/" + program;
        if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    return "";
}

std::string last_line(std::string text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    const std::size_t nl = text.rfind('\n');
    return nl == std::string::npos ? text : text.substr(nl + 1);
}

std::string limits_text(const Limits& l, bool sandboxed) {
    return "per check " + std::to_string(l.check_timeout_s) + " s, whole file " +
           std::to_string(l.total_timeout_s) + " s, CPU " + std::to_string(l.cpu_s) +
           " s a process, memory " + std::to_string(l.memory_mib) + " MiB, " +
           (sandboxed ? std::to_string(l.processes) + " processes" : "processes not limited") +
           ", output " + std::to_string(l.output_mib) + " MiB";
}

void check_limits(const Limits& l) {
    PLAB_CHECK(l.check_timeout_s >= 1 && l.check_timeout_s <= 3600,
               "--timeout " << l.check_timeout_s << " must be between 1 and 3600 seconds");
    PLAB_CHECK(l.total_timeout_s >= 1 && l.total_timeout_s <= 36000,
               "--total-timeout " << l.total_timeout_s << " must be between 1 and 36000 seconds");
    PLAB_CHECK(l.cpu_s >= 1 && l.cpu_s <= 36000,
               "--cpu-time " << l.cpu_s << " must be between 1 and 36000 seconds");
    PLAB_CHECK(l.memory_mib >= 256 && l.memory_mib <= 1 << 20,
               "--memory " << l.memory_mib
                           << " must be between 256 and 1048576 MiB (Python and numpy alone "
                              "need about 100)");
    PLAB_CHECK(l.processes >= 8 && l.processes <= 4096,
               "--processes " << l.processes
                              << " must be between 8 and 4096 (the harness itself runs a few)");
    PLAB_CHECK(l.output_mib >= 1 && l.output_mib <= 4096,
               "--output " << l.output_mib << " must be between 1 and 4096 MiB");
}

Stage::Stage(bool sandboxed) : sandboxed_(sandboxed) {
    std::string name = env_or("TMPDIR", "/tmp") + "/plab-grade-XXXXXX";
    PLAB_CHECK(mkdtemp(name.data()) != nullptr,
               "cannot create a temporary folder " << name << " (set TMPDIR to a writable one)");
    dir_ = name;
    // The sandbox's user must reach it: every folder above must be searchable.
    chmod(dir_.c_str(), 0755);
}

Stage::~Stage() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
}

void Stage::make_dir(const std::string& rel) const {
    std::filesystem::create_directories(host(rel));
}

void Stage::copy_in(const std::string& from, const std::string& rel) const {
    std::error_code ec;
    std::filesystem::copy_file(from, host(rel), std::filesystem::copy_options::overwrite_existing,
                               ec);
    PLAB_CHECK(!ec, "cannot copy " << from << " for grading: " << ec.message());
}

void Stage::write(const std::string& rel, const std::string& text) const {
    std::ofstream f(host(rel), std::ios::binary);
    f << text;
    PLAB_CHECK(f.good(), "cannot write " << host(rel) << " for grading (disk full?)");
}

Sandbox::Sandbox(bool sandboxed, const Limits& limits) : sandboxed_(sandboxed), limits_(limits) {
    check_limits(limits);
}

namespace {

// What the forked child needs, all made before the fork (nothing is allocated after it).
struct Child {
    int in, out, err;  // its stdin, stdout, stderr
    const Limits* limits;
    int file_mib;  // RLIMIT_FSIZE
    bool limit_address_space;
    const char* workdir;  // chdir there first (no sandbox), or nullptr
    char* const* argv;
    char* const* env;
};

// The child's side of the fork: its own process group (one kill reaches
// everything it starts), the pipes, the rlimits, then the command.
[[noreturn]] void exec_child(const Child& c) {
    setsid();
    dup2(c.in, 0);
    dup2(c.out, 1);
    dup2(c.err, 2);
    const rlim_t file = rlim_t(c.file_mib) << 20;
    set_limit(RLIMIT_CPU, c.limits->cpu_s, c.limits->cpu_s + 1);
    set_limit(RLIMIT_CORE, 0, 0);  // no core dump of a crash, of any size
    set_limit(RLIMIT_FSIZE, file, file);
    if (c.limit_address_space) {
        const rlim_t bytes = rlim_t(c.limits->memory_mib) << 20;
        set_limit(RLIMIT_AS, bytes, bytes);
    }
    if (c.workdir != nullptr && chdir(c.workdir) != 0) _exit(126);
    execve(c.argv[0], c.argv, c.env);
    const char* why = std::strerror(errno);
    for (const char* part : {"cannot run ", static_cast<const char*>(c.argv[0]), ": ", why})
        if (::write(2, part, std::strlen(part)) < 0) break;
    _exit(127);
}

// Reads the child's stdout and stderr until both close, the deadline passes
// (timed_out) or the output passes its limit (output_exceeded); then kills its
// process group. Returns true when it had to kill.
bool pump_output(SandboxResult& r, int out, int err, pid_t pid,
                 std::chrono::steady_clock::time_point deadline, std::size_t output_bytes) {
    std::size_t err_bytes = 0;
    pollfd fds[2] = {{out, POLLIN, 0}, {err, POLLIN, 0}};
    int open_fds = 2;
    char buffer[65536];
    while (open_fds > 0 && !r.output_exceeded) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                              deadline - std::chrono::steady_clock::now())
                              .count();
        if (left <= 0) {
            r.timed_out = true;
            break;
        }
        if (poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000))) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || fds[i].revents == 0) continue;
            const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                --open_fds;
            } else if (i == 0) {
                r.out.append(buffer, n);
                r.output_exceeded = r.out.size() > kStdoutCap;
            } else {
                err_bytes += n;
                if (r.err.size() < kStderrKept)
                    r.err.append(buffer, std::min<std::size_t>(n, kStderrKept - r.err.size()));
                r.output_exceeded = err_bytes > output_bytes;
            }
        }
    }
    for (const pollfd& f : fds)
        if (f.fd >= 0) close(f.fd);
    const bool kill_now = r.timed_out || r.output_exceeded;
    if (kill_now) kill(-pid, SIGKILL);
    return kill_now;
}

}  // namespace

SandboxResult Sandbox::run(const Stage& stage, const SandboxCommand& c) const {
    std::vector<std::string> argv, env;
    if (sandboxed_) {
        const std::string bwrap = bwrap_path();
        PLAB_CHECK(!bwrap.empty(), "bubblewrap is not installed (Debian: apt install bubblewrap)");
        argv = sandboxed_argv(bwrap, stage, c, limits_);
        env = {"PATH=/usr/bin:/bin"};
        give_to_nobody(stage.dir());
    } else {
        argv = c.argv;
        env = base_env(c);
    }
    std::vector<char*> argv_c = c_strings(argv), env_c = c_strings(env);
    const std::string workdir = stage.host(c.chdir);
    const std::string in_path = c.stdin_rel.empty() ? "/dev/null" : stage.host(c.stdin_rel);
    const int in = open(in_path.c_str(), O_RDONLY | O_CLOEXEC);
    PLAB_CHECK(in >= 0, "cannot open " << in_path << " for grading");
    int out[2], err[2];
    PLAB_CHECK(pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0,
               "cannot make pipes for grading (too many open files?)");
    const Child child{in,
                      out[1],
                      err[1],
                      &limits_,
                      c.file_mib > 0 ? c.file_mib : limits_.output_mib,
                      c.limit_address_space,
                      sandboxed_ ? nullptr : workdir.c_str(),
                      argv_c.data(),
                      env_c.data()};
    const auto start = std::chrono::steady_clock::now();
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = fork();
    PLAB_CHECK(pid >= 0, "cannot fork to grade (process limit?)");
    if (pid == 0) exec_child(child);
    close(in);
    close(out[1]);
    close(err[1]);
    SandboxResult r;
    const auto deadline = start + std::chrono::seconds(c.wall_s);
    bool killed =
        pump_output(r, out[0], err[0], pid, deadline, std::size_t(limits_.output_mib) << 20);
    // The pipes are closed; the process may still be finishing.
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (!killed && std::chrono::steady_clock::now() >= deadline) {
            r.timed_out = killed = true;
            kill(-pid, SIGKILL);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // Without a sandbox, whatever it left running in its group goes too (with
    // one, the sandbox's pid namespace ended with it).
    if (!sandboxed_) kill(-pid, SIGKILL);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
}

std::string Sandbox::cannot_start() {
    static const std::string why = [] {
        const std::string bwrap = bwrap_path();
        if (bwrap.empty() || access(bwrap.c_str(), X_OK) != 0)
            return std::string("bubblewrap is not installed (Debian: apt install bubblewrap)");
        Stage probe(true);
        probe.make_dir("submission");
        SandboxCommand c;
        c.argv = {"/usr/bin/true"};
        c.wall_s = 30;
        const SandboxResult r = Sandbox(true, Limits{}).run(probe, c);
        if (r.exit_code == 0) return std::string();
        return "the grading sandbox cannot start here (" + last_line(r.err) +
               "; it needs user namespaces: sysctl user.max_user_namespaces > 0)";
    }();
    return why;
}

}  // namespace plab::grade
