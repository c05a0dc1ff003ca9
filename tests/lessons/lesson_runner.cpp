// Executable lessons: runs every command of a Markdown lesson and checks that
// the output it shows is what the program prints today.
//
// In a lesson, a fenced block tagged `console` holds commands ("$ plab ...")
// each followed by the output the reader should see. The runner executes the
// command (stderr merged into stdout, `plab` and `plab-viewer` taken from the
// build directory, in a scratch working directory) and requires the shown
// lines to appear in the real output in the same order. Inside a shown line,
// "…" stands for any text (timings, paths); other characters must match
// exactly. A command must exit 0 unless its shown output contains
// "plab: error:" — then it must fail. Usage: lesson_runner BIN_DIR FILE.md
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Step {
    int line = 0;
    std::string command;
    std::vector<std::string> expected;
};

std::string rstrip(std::string s) {
    while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) s.pop_back();
    return s;
}

std::vector<Step> parse(const std::string& path) {
    std::ifstream f(path);
    std::vector<Step> steps;
    std::string line;
    bool in_console = false;
    int n = 0;
    while (std::getline(f, line)) {
        ++n;
        if (!in_console) {
            in_console = rstrip(line) == "```console";
            continue;
        }
        if (rstrip(line) == "```") {
            in_console = false;
        } else if (line.rfind("$ ", 0) == 0) {
            steps.push_back({n, line.substr(2), {}});
        } else if (!steps.empty() && !rstrip(line).empty()) {
            steps.back().expected.push_back(rstrip(line));
        }
    }
    return steps;
}

// "…" matches any text; everything else literally.
std::regex pattern_of(const std::string& shown) {
    static const std::string ellipsis = "\xE2\x80\xA6";
    std::string re;
    for (std::size_t i = 0; i < shown.size();) {
        if (shown.compare(i, ellipsis.size(), ellipsis) == 0) {
            re += ".*";
            i += ellipsis.size();
            continue;
        }
        const char c = shown[i++];
        if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) re += '\\';
        re += c;
    }
    return std::regex(re);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::cerr << "usage: lesson_runner BIN_DIR LESSON.md\n";
        return 2;
    }
    const std::string bin_dir = std::filesystem::absolute(argv[1]).string();
    const std::string lesson = std::filesystem::absolute(argv[2]).string();
    const std::vector<Step> steps = parse(lesson);
    if (steps.empty()) {
        std::cerr << lesson << ": no ```console block with a \"$ \" command: nothing to check\n";
        return 1;
    }
    const auto scratch =
        std::filesystem::temp_directory_path() / ("plab_lesson_" + std::to_string(::getpid()));
    std::filesystem::create_directories(scratch);
    int failures = 0;
    for (const Step& s : steps) {
        const std::string out_path = (scratch / "out.txt").string();
        const std::string cmd = "cd '" + scratch.string() + "' && PATH='" + bin_dir +
                                "':\"$PATH\" " + s.command + " > '" + out_path +
                                "' 2>&1 < /dev/null";
        const int status = std::system(cmd.c_str());
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        std::ifstream f(out_path);
        std::vector<std::string> actual;
        for (std::string l; std::getline(f, l);) actual.push_back(rstrip(l));
        bool expects_error = false;
        for (const auto& e : s.expected)
            expects_error |= e.find("plab: error:") != std::string::npos;
        std::ostringstream why;
        if (expects_error ? code == 0 : code != 0) {
            why << "exit code " << code << (expects_error ? " (expected failure)" : "");
        }
        std::size_t next = 0;
        for (const auto& e : s.expected) {
            const std::regex re = pattern_of(e);
            while (next < actual.size() && !std::regex_match(actual[next], re)) ++next;
            if (next == actual.size()) {
                why << "shown line not printed (in this order): \"" << e << "\"";
                break;
            }
            ++next;
        }
        if (!why.str().empty()) {
            ++failures;
            std::cerr << lesson << ":" << s.line << ": $ " << s.command << "\n  " << why.str()
                      << "\n  actual output:\n";
            for (const auto& a : actual) std::cerr << "    " << a << "\n";
        }
    }
    std::filesystem::remove_all(scratch);
    std::cout << lesson << ": " << steps.size() - failures << " of " << steps.size()
              << " commands match the lesson\n";
    return failures == 0 ? 0 : 1;
}
