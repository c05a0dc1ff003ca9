// Executable lessons: runs every command of a Markdown lesson and checks that
// the output it shows is what the program prints today.
//
// In a lesson, a fenced block tagged `console` holds commands ("$ plab ...")
// each followed by the output the reader should see (a block indented inside
// a list item, as in an exercise's answer, counts the same). The runner executes the
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
//   "{{name}}" one number (read whole, like a range marker), captured under
//              `name` for the checks below; "{{name=1904384}}" also requires
//              the printed text to be exactly 1904384.
// Deterministic numbers (counts, FLOPs, exact results) are written out
// literally: a marker is for what truly varies, never to hide what a lesson
// teaches. A malformed marker (bounds that do not parse, a > b) fails the lesson.
//
// Relations. A "…" or a range hides a number's value; a check states what the
// number must be *related* to, so a wrong number cannot hide behind it. A line
//     <!-- check: ttft_ms >= prefill_ms -->
// anywhere outside a console block (invisible when the Markdown is rendered)
// is evaluated after every command above it has run, with the values those
// commands' "{{name}}" markers captured (a name captured twice: the latest
// value above the check). Syntax, one relation per line:
//     EXPR OP EXPR [within EXPR | within EXPR%]
// EXPR: numbers, captured names, + - * / and parentheses; OP: == != < <= > >=.
// "within" loosens == for printed values that were rounded: an absolute
// difference, or a percentage of |right side|. Write it as the rounding it
// allows ("within 0.05 + 0.05 / bw * bound": half a unit of each printed
// last digit, carried through the formula), so the slack is derived, not guessed. A check
// that does not hold, or names a value no command above captured, fails the
// lesson with the values it saw. An exercise's answer is proven the same way:
// its command runs, and a check ties the printed number to the answer's formula.
// tests/lessons/CMakeLists.txt proves the runner can fail: fixture lessons
// with a wrong literal, an out-of-range number or a relation that does not
// hold must be rejected, and so must scratch copies of real lessons with one
// number or relation changed.
// Usage: lesson_runner BIN_DIR FILE.md
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
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

// A "<!-- check: ... -->" line: a relation between captured numbers.
struct Check {
    int line = 0;
    std::string relation;
};

struct Lesson {
    std::vector<Step> steps;
    std::vector<Check> checks;
};

std::string rstrip(std::string s) {
    while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) s.pop_back();
    return s;
}

Lesson parse(const std::string& path) {
    static const std::string open = "<!-- check:", close = "-->";
    std::ifstream f(path);
    Lesson lesson;
    std::string line;
    bool in_console = false;
    std::size_t indent = 0;  // of the open fence: a block inside a list item is indented
    int n = 0;
    while (std::getline(f, line)) {
        ++n;
        const std::size_t lead = std::min(line.find_first_not_of(' '), line.size());
        if (!in_console) {
            in_console = rstrip(line).substr(lead) == "```console";
            indent = lead;
            const std::string t = rstrip(line);
            const std::size_t at = t.find(open);
            if (at != std::string::npos) {
                if (t.size() < at + open.size() + close.size() ||
                    t.compare(t.size() - close.size(), close.size(), close) != 0) {
                    throw std::runtime_error(path + ":" + std::to_string(n) +
                                             ": a check is one line: <!-- check: a >= b -->");
                }
                std::string relation =
                    rstrip(t.substr(at + open.size(), t.size() - close.size() - at - open.size()));
                relation.erase(0, relation.find_first_not_of(' '));
                lesson.checks.push_back({n, relation});
            }
            continue;
        }
        line.erase(0, std::min(lead, indent));
        if (rstrip(line) == "```") {
            in_console = false;
        } else if (line.rfind("$ ", 0) == 0) {
            lesson.steps.push_back({n, line.substr(2), {}});
        } else if (!lesson.steps.empty() && !rstrip(line).empty()) {
            lesson.steps.back().expected.push_back(rstrip(line));
        }
    }
    return lesson;
}

// One number marker of a shown line, in the order of the capture groups:
// a "[[a..b]]" range or a "{{name}}" / "{{name=text}}" capture.
struct Slot {
    double lo = 0, hi = 0;  // range
    std::string name;       // capture (empty for a range)
    std::string literal;    // capture's required text (empty: any number)
};

// A shown line as a regular expression, plus its number markers.
struct Pattern {
    std::regex re;
    std::vector<Slot> slots;
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
        const bool at_range =
            shown.compare(i, 2, "[[") == 0 && shown.compare(i, gpu_form.size(), gpu_form) != 0;
        if (shown.compare(i, ellipsis.size(), ellipsis) == 0) {
            i += ellipsis.size();
            // Before a number marker, "…" must not end inside the number (it
            // would otherwise swallow leading digits and let a wrong value pass
            // as its last digit): it is empty or ends in a non-number character.
            const bool before_number = (shown.compare(i, 2, "[[") == 0 &&
                                        shown.compare(i, gpu_form.size(), gpu_form) != 0) ||
                                       shown.compare(i, 2, "{{") == 0;
            re += before_number ? "(?:.*[^-+.0-9eE])?" : ".*";
            continue;
        }
        if (shown.compare(i, gpu_form.size(), gpu_form) == 0) {
            re += "\\((?:emulated|native)\\) *";  // the padding the shorter name leaves
            i += gpu_form.size();
            continue;
        }
        if (shown.compare(i, 2, "{{") == 0) {
            const std::size_t close = shown.find("}}", i);
            const std::string marker =
                shown.substr(i, close == std::string::npos ? std::string::npos : close + 2 - i);
            static const std::regex capture_re("\\{\\{([A-Za-z_][A-Za-z_0-9]*)(?:=([^}]+))?\\}\\}");
            std::smatch m;
            if (close == std::string::npos || !std::regex_match(marker, m, capture_re)) {
                throw std::runtime_error("bad marker \"" + marker +
                                         "\": expected {{name}} or {{name=1904384}}");
            }
            p.slots.push_back({0, 0, m[1].str(), m[2].str()});
            re += number_re;
            i = close + 2;
            continue;
        }
        if (at_range) {
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
            p.slots.push_back({lo, hi, "", ""});
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

using Captures = std::map<std::string, double>;

// Whether `line` matches the shown line's pattern with every ranged number in
// range and every literal capture printed as written; on a match, the named
// numbers go into `captures`. The first out-of-range number seen is kept in
// `out_of_range`, so a failure names the number that moved.
bool matches(const std::string& line, const Pattern& p, std::string& out_of_range,
             Captures& captures) {
    std::smatch m;
    if (!std::regex_match(line, m, p.re)) return false;
    for (std::size_t k = 0; k < p.slots.size(); ++k) {
        const Slot& s = p.slots[k];
        const std::string text = m[k + 1].str();
        const double v = std::strtod(text.c_str(), nullptr);
        if (!s.name.empty()) {
            if (!s.literal.empty() && text != s.literal) return false;
            continue;
        }
        if (v < s.lo || v > s.hi) {
            if (out_of_range.empty()) {
                std::ostringstream os;
                os << text << " is outside [" << s.lo << ", " << s.hi << "] in \"" << line << "\"";
                out_of_range = os.str();
            }
            return false;
        }
    }
    for (std::size_t k = 0; k < p.slots.size(); ++k) {
        if (!p.slots[k].name.empty()) {
            captures[p.slots[k].name] = std::strtod(m[k + 1].str().c_str(), nullptr);
        }
    }
    return true;
}

// ---- relation checks -------------------------------------------------------
// A small recursive-descent evaluator: expr := term (('+'|'-') term)*,
// term := factor (('*'|'/') factor)*, factor := number | name | '-' factor |
// '(' expr ')'. Names are looked up in the captures; `used` records each name
// and value, so a failed check prints what it compared.
class Expr {
public:
    Expr(const std::string& text, const Captures& captures, std::string& used)
        : s_(text), captures_(captures), used_(used) {}

    double parse_all(std::size_t end) {
        end_ = end;
        const double v = expr();
        skip();
        if (i_ != end_) fail("unexpected '" + s_.substr(i_, end_ - i_) + "'");
        return v;
    }

private:
    [[noreturn]] void fail(const std::string& why) const {
        throw std::runtime_error("bad check expression \"" + s_.substr(0, end_) + "\": " + why);
    }
    void skip() {
        while (i_ < end_ && s_[i_] == ' ') ++i_;
    }
    double expr() {
        double v = term();
        for (skip(); i_ < end_ && (s_[i_] == '+' || s_[i_] == '-'); skip()) {
            const char op = s_[i_++];
            const double r = term();
            v = op == '+' ? v + r : v - r;
        }
        return v;
    }
    double term() {
        double v = factor();
        for (skip(); i_ < end_ && (s_[i_] == '*' || s_[i_] == '/'); skip()) {
            const char op = s_[i_++];
            const double r = factor();
            v = op == '*' ? v * r : v / r;
        }
        return v;
    }
    double factor() {
        skip();
        if (i_ >= end_) fail("a number, a name or '(' expected at the end");
        const char c = s_[i_];
        if (c == '-') {
            ++i_;
            return -factor();
        }
        if (c == '(') {
            ++i_;
            const double v = expr();
            skip();
            if (i_ >= end_ || s_[i_] != ')') fail("')' expected");
            ++i_;
            return v;
        }
        if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
            char* stop = nullptr;
            const double v = std::strtod(s_.c_str() + i_, &stop);
            i_ = std::size_t(stop - s_.c_str());
            return v;
        }
        if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
            const std::size_t start = i_;
            while (i_ < end_ && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_'))
                ++i_;
            const std::string name = s_.substr(start, i_ - start);
            const auto it = captures_.find(name);
            if (it == captures_.end()) {
                std::string known;
                for (const auto& [k, v] : captures_) known += (known.empty() ? "" : ", ") + k;
                throw std::runtime_error("check names '" + name +
                                         "', which no command above captured (captured: " +
                                         (known.empty() ? "nothing" : known) + ")");
            }
            std::ostringstream os;
            os.precision(10);
            os << name << " = " << it->second;
            if (used_.find(os.str()) == std::string::npos)
                used_ += (used_.empty() ? "" : ", ") + os.str();
            return it->second;
        }
        fail(std::string("unexpected '") + c + "'");
    }

    const std::string& s_;
    const Captures& captures_;
    std::string& used_;
    std::size_t i_ = 0, end_ = 0;
};

double evaluate(const std::string& text, const Captures& captures, std::string& used) {
    Expr e(text, captures, used);
    return e.parse_all(text.size());
}

// Evaluates "EXPR OP EXPR [within EXPR | within EXPR%]"; returns "" when it holds,
// else why not (with the values it used).
std::string check_relation(const std::string& relation, const Captures& captures) {
    static const std::regex form(
        "\\s*(.+?)\\s*(==|!=|<=|>=|<|>)\\s*(.+?)(?:\\s+within\\s+(.+?)\\s*(%?))?\\s*");
    std::smatch m;
    if (!std::regex_match(relation, m, form)) {
        throw std::runtime_error("bad check \"" + relation +
                                 "\": expected EXPR OP EXPR [within EXPR | within EXPR%], "
                                 "OP one of == != < <= > >=");
    }
    std::string used;
    const double l = evaluate(m[1].str(), captures, used);
    const double r = evaluate(m[3].str(), captures, used);
    const std::string op = m[2].str();
    double tol = 0;
    if (m[4].matched) {
        if (op != "==")
            throw std::runtime_error("bad check \"" + relation + "\": within goes with ==");
        tol = evaluate(m[4].str(), captures, used);
        if (m[5].str() == "%") tol = tol / 100 * std::fabs(r);
    }
    const bool holds = op == "=="   ? std::fabs(l - r) <= tol
                       : op == "!=" ? l != r
                       : op == "<"  ? l < r
                       : op == "<=" ? l <= r
                       : op == ">"  ? l > r
                                    : l >= r;
    if (holds) return "";
    std::ostringstream os;
    os.precision(10);
    os << "check failed: " << relation << "\n    left " << l << ", right " << r;
    if (tol > 0) os << ", allowed difference " << tol;
    if (!used.empty()) os << "\n    with " << used;
    return os.str();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::cerr << "usage: lesson_runner BIN_DIR LESSON.md\n";
        return 2;
    }
    const std::string bin_dir = std::filesystem::absolute(argv[1]).string();
    const std::string path = std::filesystem::absolute(argv[2]).string();
    Lesson lesson;
    try {
        lesson = parse(path);
    } catch (const std::exception& ex) {
        std::cerr << ex.what() << "\n";
        return 1;
    }
    const std::vector<Step>& steps = lesson.steps;
    if (steps.empty()) {
        std::cerr << path << ": no ```console block with a \"$ \" command: nothing to check\n";
        return 1;
    }
    const auto scratch =
        std::filesystem::temp_directory_path() / ("plab_lesson_" + std::to_string(::getpid()));
    std::filesystem::create_directories(scratch);
    int failures = 0, check_failures = 0;
    Captures captures;
    std::size_t next_check = 0;
    // Evaluates the checks written above `line` (all of them at the end), with
    // what the commands above them captured.
    auto run_checks_before = [&](int line) {
        for (; next_check < lesson.checks.size() && lesson.checks[next_check].line < line;
             ++next_check) {
            const Check& c = lesson.checks[next_check];
            std::string why;
            try {
                why = check_relation(c.relation, captures);
            } catch (const std::exception& ex) {
                why = ex.what();
            }
            if (!why.empty()) {
                ++check_failures;
                std::cerr << path << ":" << c.line << ": " << why << "\n";
            }
        }
    };
    for (const Step& s : steps) {
        run_checks_before(s.line);
        const std::string out_path = (scratch / "out.txt").string();
        // The command runs as written, in a group: pipes, `&&` chains and
        // loops behave as in a terminal (every command finds the built plab,
        // only the group's stdin is /dev/null, its output is captured whole).
        const std::string cmd = "cd '" + scratch.string() + "' && export PATH='" + bin_dir +
                                "':\"$PATH\" && { " + s.command + "\n} > '" + out_path +
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
            while (next < actual.size() && !matches(actual[next], p, out_of_range, captures))
                ++next;
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
            std::cerr << path << ":" << s.line << ": $ " << s.command << "\n  " << why.str()
                      << "\n  actual output:\n";
            for (const auto& a : actual) std::cerr << "    " << a << "\n";
        }
    }
    run_checks_before(std::numeric_limits<int>::max());
    std::filesystem::remove_all(scratch);
    std::cout << path << ": " << steps.size() - failures << " of " << steps.size()
              << " commands match the lesson, " << lesson.checks.size() - check_failures << " of "
              << lesson.checks.size() << " relation checks hold\n";
    return failures == 0 && check_failures == 0 ? 0 : 1;
}
