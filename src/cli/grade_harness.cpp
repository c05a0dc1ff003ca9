// `plab grade`: running the student's file through lessons/assignments/harness.py
// with a time limit (a C++ file compiled first into a temporary shared library),
// and the small helpers every assignment's cases share.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/grade.h"
#include "core/error.h"
#include "core/random.h"

namespace plab::cli::grade {

Tensor tensor(std::vector<int> shape, std::vector<double> data) {
    return Tensor{std::move(shape), std::move(data)};
}

Tensor tensor_f(std::vector<int> shape, const std::vector<float>& data) {
    return Tensor{std::move(shape), std::vector<double>(data.begin(), data.end())};
}

nlohmann::json to_arg(const Tensor& t, bool integer) {
    nlohmann::json values = nlohmann::json::array();
    for (double x : t.data) {
        if (integer)
            values.push_back(static_cast<long long>(x));
        else
            values.push_back(static_cast<float>(x));  // the engine's float32 inputs, exactly
    }
    return {{"array", values}, {"shape", t.shape}, {"dtype", integer ? "int64" : "float32"}};
}

std::vector<float> uniform(std::mt19937_64& rng, std::size_t n, float scale) {
    std::vector<float> v(n);
    for (float& x : v) x = random::uniform(rng, -scale, scale);
    return v;
}

int uniform_int(std::mt19937_64& rng, int lo, int hi) {
    return int(random::uniform_int(rng, lo, hi));
}

std::vector<int> random_plan(std::mt19937_64& rng, int t, int max_chunk) {
    std::vector<int> plan;
    for (int done = 0; done < t;) {
        const int c = std::min(uniform_int(rng, 1, max_chunk), t - done);
        plan.push_back(c);
        done += c;
    }
    return plan;
}

namespace {

std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

std::string read_all(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string last_line(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    const std::size_t nl = s.rfind('\n');
    return nl == std::string::npos ? s : s.substr(nl + 1);
}

// $TMPDIR/plab-grade-XXXXXX (/tmp without TMPDIR), for mkstemp and mkdtemp.
std::string temp_template() {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/plab-grade-XXXXXX";
}

// A temporary file that is removed when this object goes.
struct TempFile {
    std::string path;
    TempFile() {
        std::string name = temp_template();
        const int fd = mkstemp(name.data());
        PLAB_CHECK(fd >= 0, "cannot create a temporary file " << name << " (set TMPDIR?)");
        close(fd);
        path = name;
    }
    ~TempFile() { std::remove(path.c_str()); }
};

// Runs a shell command; its exit code (128 + signal when killed).
int run_command(const std::string& command) {
    std::fflush(stdout);
    const int status = std::system(command.c_str());
    if (status == -1) return 127;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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

}  // namespace

bool is_cpp_file(const std::string& file) {
    const std::string ext = std::filesystem::path(file).extension().string();
    return ext == ".cpp" || ext == ".cc" || ext == ".cxx";
}

std::string cpp_adapter(const std::string& assignment) {
    const std::string adapter =
        std::string(PLAB_LESSONS_DIR) + "/assignments/" + assignment + "/cpp_adapter.py";
    return access(adapter.c_str(), R_OK) == 0 ? adapter : "";
}

CppBuild::CppBuild(const std::string& cxx, const std::string& file, int timeout_s) {
    std::string name = temp_template();
    PLAB_CHECK(mkdtemp(name.data()) != nullptr,
               "cannot create a temporary directory " << name << " (set TMPDIR?)");
    dir_ = name;
    library_ = dir_ + "/student.so";
    const std::string log = dir_ + "/compiler.txt";
    // The flags of the assignments' READMEs: -O1 (fast enough, quick to build),
    // -fPIC -shared (a library ctypes loads), C++17 (what the starters use).
    const std::string command = "timeout -k 2 " + std::to_string(timeout_s) + " " +
                                shell_quote(cxx) + " -O1 -shared -fPIC -std=c++17 -o " +
                                shell_quote(library_) + " " + shell_quote(file) + " > " +
                                shell_quote(log) + " 2>&1";
    const int code = run_command(command);
    if (code == 0) return;
    const std::string said = read_all(log);
    std::filesystem::remove_all(dir_);  // the destructor does not run for a throwing constructor
    PLAB_CHECK(code != 127 && code != 126,
               "no C++ compiler at '" << cxx
                                      << "'; install g++ (Debian: build-essential) or pass "
                                         "--cxx PATH");
    PLAB_CHECK(code != 124 && code != 137,
               file << ": the compiler ran past " << timeout_s << " s (--timeout S)");
    PLAB_CHECK(false, file << " does not compile (" << cxx
                           << " -O1 -shared -fPIC -std=c++17): " << first_error(said));
}

CppBuild::~CppBuild() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
}

nlohmann::json run_harness(const std::string& python, const Submission& student,
                           const std::vector<Check>& checks, int timeout_s) {
    const std::string& student_file = student.file;
    const std::string harness = std::string(PLAB_LESSONS_DIR) + "/assignments/harness.py";
    PLAB_CHECK(access(python.c_str(), X_OK) == 0,
               "no Python at " << python
                               << "; install Debian's python3 and python3-numpy, or pass "
                                  "--python PATH (numpy must import there)");
    PLAB_CHECK(access(harness.c_str(), R_OK) == 0,
               "the grader's harness " << harness << " is missing");
    nlohmann::json request;
    request["cases"] = nlohmann::json::array();
    for (const Check& c : checks)
        for (const Case& k : c.cases) request["cases"].push_back({{"calls", k.calls}});
    TempFile in, err;
    {
        std::ofstream f(in.path);
        f << request.dump();
    }
    // timeout(1): TERM after the limit, KILL 2 s later; exit 124 (or 137) when it fired.
    const std::string command =
        "timeout -k 2 " + std::to_string(timeout_s) + " " + shell_quote(python) + " " +
        shell_quote(harness) + " " + shell_quote(student_file) +
        (student.library.empty() ? std::string()
                                 : " --library " + shell_quote(student.library) + " --adapter " +
                                       shell_quote(student.adapter)) +
        " < " + shell_quote(in.path) + " 2> " + shell_quote(err.path);
    std::fflush(stdout);
    FILE* pipe = popen(command.c_str(), "r");
    PLAB_CHECK(pipe != nullptr, "cannot start " << python);
    std::string out;
    char buffer[65536];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
        out.append(buffer, n);
    const int status = pclose(pipe);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code == 124 || code == 137) return {{"timeout", timeout_s}};
    nlohmann::json reply = nlohmann::json::parse(out, nullptr, false);
    PLAB_CHECK(!reply.is_discarded() && reply.is_object(),
               "the harness gave no results for " << student_file << " (exit " << code
                                                  << "): " << last_line(read_all(err.path)));
    PLAB_CHECK(!reply.contains("import_error"),
               student_file << ": " << reply["import_error"].get<std::string>());
    return reply;
}

}  // namespace plab::cli::grade
