// Executable lessons: runs every command of a Markdown lesson and checks that
// the output it shows is what the program prints today.
//
// In a lesson, a fenced block tagged `console` holds commands ("$ plab ...")
// each followed by the output the reader should see. The runner executes the
// command (stderr merged into stdout, `plab` and `plab-viewer` taken from the
// build directory, in a scratch working directory) and requires the shown
// lines to appear in the real output in the same order. A command must exit 0
// unless its shown output contains "plab: error:" — then it must fail.
//
// Inside a shown line, everything matches literally except three markers:
//   "…"        any text (timings, paths, machine-dependent columns);
//   "[[gpu-form]]" the form a GPU backend ran in, "(emulated)" or
//              "(native)", with the column padding after it (the two words
//              differ in length, so a table's next column moves). A lesson
//              writes "gpu-ref [[gpu-form]] 10" and passes on a laptop and on
//              a GPU machine alike; nothing else about the row is loosened.
//   "[[a..b]]" one number whose value lies in [a, b], bounds included, e.g.
//              "[[1e-8..1e-5]]" pins a floating-point difference to an
//              exponent from -8 to -6 where its last digits vary by machine.
//              The number (decimal or e-notation, optional sign) is read
//              whole, and a "…" before the marker may not end in a digit,
//              '.', '+', '-' or 'e' (so "…" cannot swallow the number's
//              leading digits and leave a wrong value's tail in range).
// Deterministic numbers (counts, FLOPs, exact results) are written out
// literally: a marker is for what truly varies, never to hide what a lesson
// teaches. A malformed marker (bounds that do not parse, a > b) fails the lesson.
// tests/lessons/CMakeLists.txt proves the runner can fail: fixture lessons
// with a wrong literal or an out-of-range number must be rejected.
// Usage: lesson_runner BIN_DIR FILE.md
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
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

// A shown line as a regular expression, plus the bounds of its "[[a..b]]"
// markers in the order of their capture groups.
struct Pattern {
    std::regex re;
    std::vector<std::pair<double, double>> ranges;
};

// The number a "[[a..b]]" marker stands for: optional sign, digits with an
// optional point, optional exponent. Greedy, so a number is read whole ("25",
// not "2" followed by "5").
const char* const number_re = "([-+]?(?:[0-9]+\\.?[0-9]*|\\.[0-9]+)(?:[eE][-+]?[0-9]+)?)";

double parse_bound(const std::string& text, const std::string& marker) {
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !std::isfinite(v)) {
        throw std::runtime_error("bad marker \"" + marker + "\": '" + text +
                                 "' is not a number; expected [[a..b]] like [[1e-8..1e-5]]");
    }
    return v;
}

Pattern pattern_of(const std::string& shown) {
    static const std::string ellipsis = "\xE2\x80\xA6";
    static const std::string gpu_form = "[[gpu-form]]";
    Pattern p;
    std::string re;
    for (std::size_t i = 0; i < shown.size();) {
        if (shown.compare(i, ellipsis.size(), ellipsis) == 0) {
            i += ellipsis.size();
            // Before a number marker, "…" must not end inside the number (it
            // would otherwise swallow leading digits and let a wrong value pass
            // as its last digit): it is empty or ends in a non-number character.
            re += shown.compare(i, 2, "[[") == 0 && shown.compare(i, gpu_form.size(), gpu_form) != 0
                      ? "(?:.*[^-+.0-9eE])?"
                      : ".*";
            continue;
        }
        if (shown.compare(i, gpu_form.size(), gpu_form) == 0) {
            re += "\\((?:emulated|native)\\) *";  // the padding the shorter name leaves
            i += gpu_form.size();
            continue;
        }
        if (shown.compare(i, 2, "[[") == 0) {
            const std::size_t close = shown.find("]]", i);
            const std::string marker =
                shown.substr(i, close == std::string::npos ? std::string::npos : close + 2 - i);
            const std::size_t dots = shown.find("..", i + 2);
            if (close == std::string::npos || dots == std::string::npos || dots > close) {
                throw std::runtime_error("bad marker \"" + marker +
                                         "\": expected [[a..b]] like [[1e-8..1e-5]]");
            }
            const double lo = parse_bound(shown.substr(i + 2, dots - i - 2), marker);
            const double hi = parse_bound(shown.substr(dots + 2, close - dots - 2), marker);
            if (lo > hi) {
                throw std::runtime_error("bad marker \"" + marker +
                                         "\": lower bound above upper bound");
            }
            p.ranges.emplace_back(lo, hi);
            re += number_re;
            i = close + 2;
            continue;
        }
        const char c = shown[i++];
        if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) re += '\\';
        re += c;
    }
    p.re = std::regex(re);
    return p;
}

// Whether `line` matches the shown line's pattern with every marked number in
// range. The first out-of-range number seen is kept in `out_of_range`, so a
// failure names the number that moved.
bool matches(const std::string& line, const Pattern& p, std::string& out_of_range) {
    std::smatch m;
    if (!std::regex_match(line, m, p.re)) return false;
    for (std::size_t k = 0; k < p.ranges.size(); ++k) {
        const double v = std::strtod(m[k + 1].str().c_str(), nullptr);
        if (v < p.ranges[k].first || v > p.ranges[k].second) {
            if (out_of_range.empty()) {
                std::ostringstream os;
                os << m[k + 1].str() << " is outside [" << p.ranges[k].first << ", "
                   << p.ranges[k].second << "] in \"" << line << "\"";
                out_of_range = os.str();
            }
            return false;
        }
    }
    return true;
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
            Pattern p;
            try {
                p = pattern_of(e);
            } catch (const std::exception& ex) {
                why << (why.tellp() > 0 ? "\n  " : "") << ex.what();
                break;
            }
            std::string out_of_range;
            while (next < actual.size() && !matches(actual[next], p, out_of_range)) ++next;
            if (next == actual.size()) {
                why << (why.tellp() > 0 ? "\n  " : "")
                    << "shown line not printed (in this order): \"" << e << "\"";
                if (!out_of_range.empty()) why << "\n  number out of range: " << out_of_range;
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
