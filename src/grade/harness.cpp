// `plab grade`: running the student's file in the grading sandbox — a C++
// file compiled there first (with AddressSanitizer and UBSan), then
// lessons/assignments/harness.py calling the student's functions, each check
// under its own time limit — and reading back one line of results per case.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "grade/grade.h"

namespace plab::grade {
namespace {

void replace_all(std::string& s, const std::string& from, const std::string& to) {
    for (std::size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size())
        s.replace(at, from.size(), to);
}

// The compiler's first error line ("x.cpp:4:12: error: ...", gcc's and clang's
// form), else its first line.
std::string first_error(const std::string& log) {
    std::istringstream in(log);
    std::string first;
    for (std::string line; std::getline(in, line);) {
        if (line.find(" error: ") != std::string::npos) return line;
        if (first.empty()) first = line;
    }
    return first.empty() ? "(the compiler said nothing)" : first;
}

// The installation a program outside /usr needs to see in the sandbox (a
// virtual environment's python: its folder above bin/), or "" when /usr has it.
std::string install_root(const std::string& program) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path p = program;
    if (p.is_relative() && p.string().find('/') == std::string::npos) return "";  // on $PATH
    const fs::path real = fs::weakly_canonical(p, ec);
    if (!ec && real.string().rfind("/usr/", 0) == 0 && p.string().rfind("/usr/", 0) == 0) return "";
    return fs::absolute(p).parent_path().parent_path().string();
}

struct Sanitizer {
    std::vector<std::string> flags;  // for the compiler
    std::string runtime;             // the ASan runtime Python must load first
    // The C++ runtime, loaded right after it: ASan intercepts __cxa_throw only
    // if libstdc++ is there when it starts, and Python does not link it, so a
    // C++ exception in the student's library (the emulator naming a race)
    // would otherwise stop ASan with a CHECK failure.
    std::string cxx_runtime;
};

// AddressSanitizer's runtime as `cxx` names it: gcc's libasan.so, or clang's
// shared runtime (which clang then links with -shared-libasan).
Sanitizer sanitizer_for(const std::string& cxx) {
    const std::string flags = "-fsanitize=address,undefined -fno-sanitize-recover=undefined";
    auto ask = [&](const std::string& name) {
        std::string command = "'" + cxx + "' -print-file-name=" + name + " 2>/dev/null";
        FILE* p = popen(command.c_str(), "r");
        std::string out;
        if (p == nullptr) return out;
        char b[4096];
        for (std::size_t n; (n = std::fread(b, 1, sizeof b, p)) > 0;) out.append(b, n);
        pclose(p);
        while (!out.empty() && out.back() == '\n') out.pop_back();
        return out.find('/') == std::string::npos || access(out.c_str(), R_OK) != 0 ? "" : out;
    };
    Sanitizer s;
    if (std::string gcc = ask("libasan.so"); !gcc.empty()) {
        s.runtime = gcc;
    } else if (std::string clang = ask("libclang_rt.asan-x86_64.so"); !clang.empty()) {
        s.runtime = clang;
        s.flags.push_back("-shared-libasan");
    }
    s.cxx_runtime = ask("libstdc++.so.6");
    PLAB_CHECK(!s.runtime.empty(),
               cxx << " has no AddressSanitizer runtime (Debian: g++ brings libasan); pass "
                      "--no-sanitize to grade without sanitizers");
    std::istringstream words(flags);
    for (std::string w; words >> w;) s.flags.push_back(w);
    s.flags.push_back("-fno-omit-frame-pointer");
    return s;
}

// The SIMT emulator's sources, which a .cu submission is compiled with:
// kernels/simt and the two core headers it includes, copied into the stage
// (the repository itself is not visible in the sandbox).
void stage_emulator(const Stage& stage) {
    const std::string root = std::string(PLAB_LESSONS_DIR) + "/../";
    stage.make_dir("include/simt");
    stage.make_dir("include/core");
    for (const char* f : {"simt.h", "simt_checked.h", "simt_record.h", "simt_emulator.cpp"})
        stage.copy_in(root + "kernels/simt/" + f, std::string("include/simt/") + f);
    for (const char* f : {"error.h", "random.h"})
        stage.copy_in(root + "src/core/" + f, std::string("include/core/") + f);
}

// Compiles the staged submission into build/student.so, in the sandbox: the
// compiler sees what the student's code would see, so an #include of
// solution.cpp finds nothing. Throws with the compiler's first error line.
void compile(const Sandbox& box, const Stage& stage, const RunOptions& run, const std::string& file,
             const std::string& name, const Sanitizer& san) {
    SandboxCommand c;
    // A CUDA file (.cu) is compiled as C++ against the SIMT emulator (staged
    // by stage_emulator): its kernels run on the CPU, no GPU needed.
    const bool cuda = std::filesystem::path(name).extension() == ".cu";
    c.argv = {run.cxx, "-O1", "-g", "-shared", "-fPIC", cuda ? "-std=c++20" : "-std=c++17"};
    c.argv.insert(c.argv.end(), san.flags.begin(), san.flags.end());
    if (cuda)
        for (const std::string& x :
             {std::string("-I"), stage.inside("include"), std::string("-x"), std::string("c++")})
            c.argv.push_back(x);
    for (const std::string& x :
         {std::string("-o"), stage.inside("build/student.so"), stage.inside("submission/" + name)})
        c.argv.push_back(x);
    if (cuda) c.argv.push_back(stage.inside("include/simt/simt_emulator.cpp"));
    if (std::string root = install_root(run.cxx); !root.empty()) c.extra_ro.push_back(root);
    c.writable_stage = true;
    c.chdir = "build";
    // The compiler's temporary files go beside its output, not into the
    // private /tmp, which is only --output MiB.
    c.env.push_back("TMPDIR=" + stage.inside("build"));
    c.file_mib = 512;  // its assembly and library: the emulator with ASan is tens of MiB
    c.wall_s = run.limits.total_timeout_s;
    const SandboxResult r = box.run(stage, c);
    if (r.exit_code == 0 && !r.timed_out) return;
    std::string said = r.err;
    // The messages name the file as the student gave it, not the stage's copy.
    replace_all(said, stage.inside("submission/"),
                std::filesystem::path(file).has_parent_path()
                    ? std::filesystem::path(file).parent_path().string() + "/"
                    : std::string());
    PLAB_CHECK(!r.timed_out, file << ": the compiler ran past " << run.limits.total_timeout_s
                                  << " s (--total-timeout S)");
    PLAB_CHECK(r.exit_code != 127, "no C++ compiler at '"
                                       << run.cxx
                                       << "'; install g++ (Debian: build-essential) or pass "
                                          "--cxx PATH");
    PLAB_CHECK(false, file << " does not compile (" << run.cxx << " -O1 -shared -fPIC "
                           << (cuda ? "-std=c++20, against the SIMT emulator" : "-std=c++17")
                           << (run.sanitize ? " -fsanitize=address,undefined" : "")
                           << "): " << first_error(said));
}

// The request harness.py reads: the cases' calls, each with its check, and
// the limits it names in its messages.
std::string request_text(const std::vector<Check>& checks, const Limits& l) {
    nlohmann::json request;
    request["cases"] = nlohmann::json::array();
    request["checks"] = nlohmann::json::array();
    for (std::size_t i = 0; i < checks.size(); ++i) {
        request["checks"].push_back(checks[i].name);
        for (const Case& k : checks[i].cases)
            request["cases"].push_back({{"calls", k.calls}, {"check", i}});
    }
    request["limits"] = {{"check_timeout_s", l.check_timeout_s},
                         {"memory_mib", l.memory_mib},
                         {"processes", l.processes},
                         {"cpu_s", l.cpu_s}};
    return request.dump();
}

// Every call of a case that has no result: the reason it has none.
nlohmann::json unrun_case(const nlohmann::json& calls, const std::string& why,
                          const std::string& limit) {
    nlohmann::json out = nlohmann::json::array();
    for (std::size_t i = 0; i < calls.size(); ++i)
        out.push_back({{"error", why}, {"limit", limit}});
    return out;
}

}  // namespace

bool is_cpp_file(const std::string& file) {
    const std::string kind = file_kind(file);
    return kind == ".cpp" || kind == ".cu";
}

std::string file_kind(const std::string& file) {
    const std::string ext = std::filesystem::path(file).extension().string();
    if (ext == ".cc" || ext == ".cxx") return ".cpp";
    return ext == ".py" || ext == ".cpp" || ext == ".cu" ? ext : "";
}

std::vector<std::string> file_kinds(const std::string& assignment) {
    std::vector<std::string> kinds;
    for (const char* kind : {".py", ".cpp", ".cu"})
        if (takes(assignment, kind)) kinds.push_back(kind);
    if (kinds.empty()) kinds.push_back(".py");
    return kinds;
}

bool takes(const std::string& assignment, const std::string& kind) {
    const std::string starter =
        std::string(PLAB_LESSONS_DIR) + "/assignments/" + assignment + "/starter" + kind;
    return access(starter.c_str(), R_OK) == 0;
}

std::string cpp_adapter(const std::string& assignment) {
    const std::string adapter =
        std::string(PLAB_LESSONS_DIR) + "/assignments/" + assignment + "/cpp_adapter.py";
    return access(adapter.c_str(), R_OK) == 0 ? adapter : "";
}

nlohmann::json run_submission(const RunOptions& run, const std::string& file,
                              const std::string& adapter, const std::vector<Check>& checks) {
    const std::string lessons = std::string(PLAB_LESSONS_DIR) + "/assignments/";
    PLAB_CHECK(access(run.python.c_str(), X_OK) == 0,
               "no Python at " << run.python
                               << "; install Debian's python3 and python3-numpy, or pass "
                                  "--python PATH (numpy must import there)");
    PLAB_CHECK(access((lessons + "harness.py").c_str(), R_OK) == 0,
               "the grader's harness " << lessons << "harness.py is missing");
    if (run.sandboxed) {
        const std::string why = Sandbox::cannot_start();
        PLAB_CHECK(why.empty(),
                   why << "; pass --no-sandbox to grade without isolation (only files you trust)");
    }
    const Sandbox box(run.sandboxed, run.limits);
    // The stage: what the sandbox sees of the machine besides /usr and /etc.
    const Stage stage(run.sandboxed);
    const std::string name = std::filesystem::path(file).filename().string();
    for (const char* dir : {"submission", "grader", "build"}) stage.make_dir(dir);
    stage.copy_in(file, "submission/" + name);
    stage.copy_in(lessons + "harness.py", "grader/harness.py");
    stage.copy_in(lessons + "cpp_call.py", "grader/cpp_call.py");
    stage.write("request.json", request_text(checks, run.limits));

    SandboxCommand c;
    c.env = {"PYTHONDONTWRITEBYTECODE=1", "PYTHONHASHSEED=0",
             // One thread each: a class graded side by side, and a process count
             // that counts the student's processes, not numpy's threads.
             "OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1"};
    c.argv = {run.python, stage.inside("grader/harness.py"), stage.inside("submission/" + name)};
    if (std::string root = install_root(run.python); !root.empty()) c.extra_ro.push_back(root);
    if (!adapter.empty()) {
        stage.copy_in(adapter, "grader/cpp_adapter.py");
        PLAB_CHECK(!find_program(run.cxx).empty(),
                   "no C++ compiler at '" << run.cxx
                                          << "'; install g++ (Debian: build-essential) or pass "
                                             "--cxx PATH");
        Sanitizer san;
        if (run.sanitize) san = sanitizer_for(run.cxx);
        if (std::filesystem::path(name).extension() == ".cu") stage_emulator(stage);
        compile(box, stage, run, file, name, san);
        for (const std::string& x :
             {std::string("--library"), stage.inside("build/student.so"), std::string("--adapter"),
              stage.inside("grader/cpp_adapter.py")})
            c.argv.push_back(x);
        if (run.sanitize) {
            // The runtime first in the process, as ASan requires; leaks are
            // Python's own, not the student's. Memory is limited by resident
            // size: ASan reserves terabytes of address space for its shadow.
            const std::string mib = std::to_string(run.limits.memory_mib);
            c.env.push_back("LD_PRELOAD=" + san.runtime +
                            (san.cxx_runtime.empty() ? "" : " " + san.cxx_runtime));
            c.env.push_back("ASAN_OPTIONS=detect_leaks=0:hard_rss_limit_mb=" + mib +
                            ":max_allocation_size_mb=" + mib +
                            ":allocator_may_return_null=0:handle_segv=1:print_legend=0");
            c.env.push_back("UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=0");
            c.limit_address_space = false;
        }
    }
    c.stdin_rel = "request.json";
    c.wall_s = run.limits.total_timeout_s;
    const SandboxResult r = box.run(stage, c);

    // One line per case; a case without one never ran.
    nlohmann::json results = nlohmann::json::array();
    std::size_t n_cases = 0;
    for (const Check& k : checks) n_cases += k.cases.size();
    for (std::size_t i = 0; i < n_cases; ++i) results.push_back(nullptr);
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
        const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object()) continue;
        PLAB_CHECK(!j.contains("import_error"),
                   file << ": " << j["import_error"].get<std::string>());
        if (j.contains("case") && j["case"].is_number_unsigned() && j["case"] < n_cases)
            results[j["case"].get<std::size_t>()] = j["results"];
    }
    std::string why, limit;
    if (r.output_exceeded) {
        why = "output limit " + std::to_string(run.limits.output_mib) +
              " MiB exceeded: your code printed more than that (--output MIB)";
        limit = "output";
    } else if (r.timed_out) {
        why = "the whole file ran past its " + std::to_string(run.limits.total_timeout_s) +
              " s limit (--total-timeout S)";
        limit = "total-timeout";
    } else {
        const std::string said = last_line(r.err);
        PLAB_CHECK(!r.out.empty() || r.exit_code == 0, "the harness gave no results for "
                                                           << file << " (exit " << r.exit_code
                                                           << "): " << said);
        why = "no result: the grader's harness ended early (exit " + std::to_string(r.exit_code) +
              "): " + said;
        limit = "crash";
    }
    std::size_t index = 0;
    for (const Check& k : checks)
        for (const Case& kase : k.cases) {
            if (results[index].is_null()) results[index] = unrun_case(kase.calls, why, limit);
            ++index;
        }
    return {{"results", results}};
}

}  // namespace plab::grade
