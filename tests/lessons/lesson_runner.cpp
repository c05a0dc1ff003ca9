// Executable lessons: runs every command of a Markdown lesson (or README) and
// checks that the output it shows is what the program prints today.
//
// What the reader sees. A fenced block tagged `console` holds commands
// ("$ plab ...") each followed by its output as one real run printed it: real
// numbers, never a checker's marker. A block indented inside a list item (an
// exercise's answer) counts the same. "…" alone on a line stands for output
// lines left out. The runner executes each command (stderr merged into stdout,
// `plab` and `plab-viewer` from the build directory, in a scratch working
// directory); it must exit 0 unless its output contains "plab: error:" — then
// it must fail.
//
// Where the checks live. A block whose lines are all deterministic is its own
// check: each shown line must appear in the real output, in order. A block
// with numbers that vary (timings, machine figures) or that a check names has
// its template in an HTML comment right above it, invisible when rendered:
//
//     <!-- expect
//     $ plab prefill --model tiny --chunks 4
//     Prefill: {{prefill_ms~}} ms, {{flop=1904384}} FLOP ({{pairs}} causal …
//     -->
//     ```console
//     $ plab prefill --model tiny --chunks 4
//     Prefill: 0.21 ms, 1904384 FLOP (55 causal attention pairs per head and layer)
//     ```
//
// The template is matched twice: against today's output, and against the
// shown block (so the reader's numbers obey the same rules). Inside a
// template line everything matches literally except these markers:
//   "…"        any text;
//   "[[gpu-form]]" the form a GPU backend ran in, "(emulated)" or
//              "(native)", with the column padding after it;
//   "[[a..b]]" one number whose value lies in [a, b], bounds included; the
//              number is read whole, and a "…" before the marker may not end
//              in a digit, '.', '+', '-' or 'e';
//   "{{name}}" one number captured under `name`, that the shown block must
//              print exactly as today's run does (a deterministic number
//              shown, and named so that checks can use it);
//   "{{name=1904384}}" the same, pinned to that text;
//   "{{name~}}" a number that varies run to run (a timing, a measured peak):
//              the shown block keeps the run it came from, and the checks
//              below hold it to its relations.
// Markup in a shown block fails the lesson: the reader never sees a marker.
// A malformed marker (bounds that do not parse, a > b) fails the lesson.
//
// Relations. A line
//     <!-- check: ttft_ms >= prefill_ms -->
// anywhere outside a console block is evaluated after every command above it
// has run, once with the numbers today's run printed and once with the numbers
// the shown blocks print (a name captured twice: the latest value above the
// check). Syntax, one relation per line:
//     EXPR OP EXPR [within EXPR | within EXPR%]
// EXPR: numbers, captured names, + - * / and parentheses; OP: == != < <= > >=.
// "within" loosens == for printed values that were rounded: an absolute
// difference, or a percentage of |right side|. Write it as the rounding it
// allows ("within 0.05 + 0.05 / bw * bound": half a unit of each printed
// last digit, carried through the formula), so the slack is derived, not guessed.
// A check that does not hold, or names a value no command above captured,
// fails the lesson with the values it saw. An exercise's answer is proven the
// same way: its command runs, and a check ties the printed number to the
// answer's formula.
//
// Strict lessons. `lesson_runner --strict` (every lessons/NN-*.md) adds the
// rules a lecturer relies on, checked before anything runs: one shape
// (lesson_shape.h: objectives, prerequisites, time, a "**Predict:**" question
// before every command, a 5-bullet takeaway, exercises with answers,
// sources); every number of the text accounted for (prose_numbers.h: shown
// in a console block of its section, a worked equation the runner
// recomputes, a number checked with "<!--= EXPR -->", or one quoted with
// "<!--quoted: SOURCE -->"); no comment the runner does not know; every
// captured name used by a check; and "<!-- checks: N -->" under the title
// equal to the lesson's checks (relations and "<!--=" numbers), so a check
// dropped or added by mistake shows.
//
// Refreshing what the reader sees: `lesson_runner --update BIN_DIR FILE.md`
// runs every command and rewrites each shown block under an expect comment
// from today's output (a block with markers but no comment gets one, holding
// its old lines as the template). Then run it without --update.
//
// tests/lessons/CMakeLists.txt proves the runner can fail: fixture lessons
// with a wrong literal, an out-of-range number, a relation that does not hold,
// markup left in a shown block or a shown number that today's run no longer
// prints must be rejected, and so must scratch copies of real lessons with one
// number or relation changed.
// Usage: lesson_runner [--update] [--strict] BIN_DIR FILE.md
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "lesson_format.h"
#include "lesson_shape.h"
#include "prose_numbers.h"
#include "relation.h"

namespace {

using namespace plab::lessons;
namespace fs = std::filesystem;

struct Output {
    int code = 0;
    std::vector<std::string> lines;  // stdout and stderr together, right-trimmed
};

// Runs `command` as written, in a group: pipes, `&&` chains and loops behave
// as in a terminal (every command finds the built plab, only the group's
// stdin is /dev/null, its output is captured whole).
Output run(const std::string& command, const fs::path& scratch, const std::string& bin_dir) {
    const std::string out_path = (scratch / "out.txt").string();
    const std::string cmd = "cd '" + scratch.string() + "' && export PATH='" + bin_dir +
                            "':\"$PATH\" && { " + command + "\n} > '" + out_path +
                            "' 2>&1 < /dev/null";
    const int status = std::system(cmd.c_str());
    Output o;
    o.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::ifstream f(out_path);
    for (std::string l; std::getline(f, l);) o.lines.push_back(rstrip(l));
    return o;
}

// What the reader sees of one run of a step: the command, then for each
// template line the output line it matched; "…" for a template line that is
// "…" alone and for output lines the template skipped.
std::vector<std::string> shown_lines(const Step& s, const StepMatch& m,
                                     const std::vector<std::string>& output) {
    std::vector<std::string> v{"$ " + s.command};
    auto elide = [&] {
        if (v.back() != kEllipsis) v.push_back(kEllipsis);
    };
    std::size_t next = 0;
    for (std::size_t k = 0; k < s.expected.size(); ++k) {
        if (s.expected[k] == kEllipsis) {
            elide();
        } else {
            if (m.at[k] > next) elide();
            v.push_back(output[m.at[k]]);
        }
        next = m.at[k] + 1;
    }
    return v;
}

// `lesson`'s lines with each block in `fresh` (by index) rewritten: its shown
// lines replaced, and an expect comment holding its old lines put above a
// block that had markers but no comment.
std::vector<std::string> updated(const Lesson& lesson,
                                 const std::map<std::size_t, std::vector<std::string>>& fresh) {
    std::vector<std::string> lines = lesson.lines;
    for (auto it = fresh.rbegin(); it != fresh.rend(); ++it) {
        const Block& b = lesson.blocks[it->first];
        const std::string pad(b.indent, ' ');
        std::vector<std::string> body;
        for (const std::string& l : it->second) body.push_back(pad + l);
        const auto first = lines.begin() + b.fence_open;  // the line after the fence
        const auto last = lines.begin() + (b.fence_close - 1);
        std::vector<std::string> old(first, last);
        lines.erase(first, last);
        lines.insert(lines.begin() + b.fence_open, body.begin(), body.end());
        if (b.comment_open == 0) {
            std::vector<std::string> comment{pad + "<!-- expect"};
            comment.insert(comment.end(), old.begin(), old.end());
            comment.push_back(pad + "-->");
            lines.insert(lines.begin() + (b.fence_open - 1), comment.begin(), comment.end());
        }
    }
    return lines;
}

void add(Captures& into, const std::vector<Captured>& got) {
    for (const Captured& c : got) into[c.name] = c.value;
}

// The rules of a strict lesson (--strict), checked before anything runs:
// one shape (lesson_shape.h), every number of its text accounted for (prose_numbers.h), every comment
// known, every captured name used by a check, and the count of checks the
// lesson declares ("<!-- checks: N -->") equal to the checks it has — so a
// check dropped or added by mistake shows. The text's "<!--= EXPR -->" number
// checks join the lesson's checks. Returns how many rules were broken.
int strict_rules(Lesson& lesson, const std::string& path) {
    int broken = 0;
    auto fail = [&](int line, const std::string& why) {
        ++broken;
        std::cerr << path << ":" << line << ": " << why << "\n";
    };
    for (const auto& [line, why] : shape_problems(lesson)) fail(line, "lesson shape: " + why);
    const ProseScan scan = scan_prose(lesson);
    for (const auto& [line, why] : scan.errors) fail(line, why);
    const bool list_all = std::getenv("PLAB_LESSON_LIST_NUMBERS") != nullptr;
    for (const ProseNumber& p : scan.numbers) {
        if (list_all) std::cerr << path << ":" << p.line << ": " << p.text << " " << p.how << "\n";
        if (!p.how.empty()) continue;
        fail(p.line, "the number " + p.text +
                         " in the text is not checked: show it in a console block of this "
                         "section, follow it with <!--= EXPR --> over captured numbers, or say "
                         "where it comes from with <!--quoted: SOURCE -->");
    }
    lesson.checks.insert(lesson.checks.end(), scan.number_checks.begin(), scan.number_checks.end());
    std::stable_sort(lesson.checks.begin(), lesson.checks.end(),
                     [](const Check& a, const Check& b) { return a.line < b.line; });
    // The declared count.
    static const std::regex declared("^\\s*<!-- checks: ([0-9]+) -->\\s*$");
    int declared_at = 0;
    std::size_t declared_count = 0;
    for (std::size_t n = 0; n < lesson.lines.size(); ++n) {
        std::smatch m;
        if (!std::regex_match(lesson.lines[n], m, declared)) continue;
        if (declared_at != 0) fail(int(n + 1), "a second <!-- checks: N --> line");
        declared_at = int(n + 1);
        declared_count = std::stoul(m[1].str());
    }
    if (declared_at == 0) {
        fail(1, "a strict lesson declares how many checks it has: add <!-- checks: " +
                    std::to_string(lesson.checks.size()) + " --> under its title");
    } else if (declared_count != lesson.checks.size()) {
        fail(declared_at, "the lesson declares " + std::to_string(declared_count) +
                              " checks but has " + std::to_string(lesson.checks.size()) +
                              " (<!-- check: --> lines and <!--= --> numbers)");
    }
    // Every captured name used.
    std::set<std::string> used;
    for (const Check& c : lesson.checks)
        for (const std::string& name : names_in(c.relation)) used.insert(name);
    std::set<std::string> reported;
    for (const Block& b : lesson.blocks) {
        if (b.comment_open == 0) continue;
        for (const Step& s : b.steps) {
            for (const std::string& e : s.expected) {
                static const std::regex capture("\\{\\{([A-Za-z_][A-Za-z_0-9]*)(~|=[^}]+)?\\}\\}");
                for (std::sregex_iterator it(e.begin(), e.end(), capture), end; it != end; ++it) {
                    const std::string name = (*it)[1].str();
                    if (used.count(name) || !reported.insert(name).second) continue;
                    fail(b.comment_open, "{{" + name +
                                             "}} is captured but no check uses it: check it, "
                                             "or write the number (or …) in the template");
                }
            }
        }
    }
    return broken;
}

}  // namespace

int main(int argc, char** argv) {
    bool update = false, strict = false;
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--update") {
            update = true;
        } else if (a == "--strict") {
            strict = true;
        } else {
            args.push_back(a);
        }
    }
    if (args.size() != 2) {
        std::cerr << "usage: lesson_runner [--update] [--strict] BIN_DIR LESSON.md\n";
        return 2;
    }
    const std::string bin_dir = fs::absolute(args[0]).string();
    const std::string path = fs::absolute(args[1]).string();
    Lesson lesson;
    try {
        lesson = parse(path);
    } catch (const std::exception& ex) {
        std::cerr << ex.what() << "\n";
        return 1;
    }
    int strict_failures = 0;
    if (strict) {
        strict_failures = strict_rules(lesson, path);
        if (update) strict_failures = 0;  // --update refreshes output; the rules are for the run
    }
    std::size_t step_count = 0;
    for (const Block& b : lesson.blocks) step_count += b.steps.size();
    if (step_count == 0) {
        std::cerr << path << ": no ```console block with a \"$ \" command: nothing to check\n";
        return 1;
    }
    const fs::path scratch =
        fs::temp_directory_path() / ("plab_lesson_" + std::to_string(::getpid()));
    fs::create_directories(scratch);
    int failures = 0, check_failures = 0;
    auto fail = [&](int line, const std::string& why) {
        ++failures;
        std::cerr << path << ":" << line << ": " << why << "\n";
    };
    // Today's numbers, and the numbers the shown blocks print.
    Captures today, shown;
    std::size_t next_check = 0;
    // Evaluates the checks written above `line` (all of them at the end) on
    // both sets of numbers.
    auto run_checks_before = [&](int line) {
        for (; next_check < lesson.checks.size() && lesson.checks[next_check].line < line;
             ++next_check) {
            const Check& c = lesson.checks[next_check];
            for (const auto& [numbers, whose] :
                 {std::pair{&today, ""}, std::pair{&shown, " (in the numbers the lesson shows)"}}) {
                if (update && numbers == &shown) continue;
                std::string why;
                try {
                    why = check_relation(c.relation, *numbers);
                } catch (const std::exception& ex) {
                    why = ex.what();
                }
                if (!why.empty()) {
                    ++check_failures;
                    std::cerr << path << ":" << c.line << ": " << why << whose << "\n";
                    break;  // one report a check
                }
            }
        }
    };
    std::map<std::size_t, std::vector<std::string>> fresh;  // --update: new shown lines a block
    for (std::size_t bi = 0; bi < lesson.blocks.size(); ++bi) {
        const Block& b = lesson.blocks[bi];
        const bool templated = b.comment_open != 0;
        bool needs_comment = false;
        for (const Step& s : b.visible) {
            for (const std::string& l : s.shown) {
                if (has_absolute_path(l))
                    fail(b.fence_open, "an absolute path in a line the reader sees: \"" + l +
                                           "\" (it is this machine's; print paths as the user "
                                           "gave them, or relative)");
                if (!has_markup(l)) continue;
                needs_comment = true;
                if (!update) {
                    fail(b.fence_open, "checker markup in a line the reader sees: \"" + l +
                                           "\" (the template goes in an <!-- expect comment "
                                           "above the block; lesson_runner --update writes it)");
                }
            }
        }
        if (const std::string why = commands_mismatch(b); !why.empty() && !update)
            fail(b.fence_open, why + " (lesson_runner --update rewrites the shown block)");
        std::vector<std::string> rewritten;
        for (std::size_t k = 0; k < b.steps.size(); ++k) {
            const Step& s = b.steps[k];
            run_checks_before(s.line);
            const Output out = run(s.command, scratch, bin_dir);
            bool expects_error = false;
            for (const auto& e : s.expected)
                expects_error |= e.find("plab: error:") != std::string::npos;
            std::ostringstream why;
            if (expects_error ? out.code == 0 : out.code != 0)
                why << "exit code " << out.code << (expects_error ? " (expected failure)" : "");
            const StepMatch m = match_step(s.expected, out.lines);
            if (!m.why.empty()) why << (why.tellp() > 0 ? "\n  " : "") << m.why;
            if (!why.str().empty()) {
                std::ostringstream os;
                os << "$ " << s.command << "\n  " << why.str() << "\n  actual output:\n";
                for (const auto& a : out.lines) os << "    " << a << "\n";
                std::string report = os.str();
                report.pop_back();
                fail(s.line, report);
            } else {
                add(today, m.captured);
            }
            if (update) {
                const std::vector<std::string> v =
                    m.why.empty() ? shown_lines(s, m, out.lines) : out.lines;
                if (!m.why.empty()) rewritten.push_back("$ " + s.command);
                rewritten.insert(rewritten.end(), v.begin(), v.end());
                continue;
            }
            if (!templated || k >= b.visible.size()) continue;
            // The shown run: the same template over what the reader sees.
            const StepMatch ms = match_step(s.expected, s.shown);
            if (!ms.why.empty()) {
                fail(b.visible[k].line, "the shown output of \"$ " + s.command +
                                            "\" does not fit its <!-- expect comment: " + ms.why);
                continue;
            }
            add(shown, ms.captured);
            // A deterministic number must be shown as today's run prints it.
            if (m.why.empty()) {
                for (std::size_t c = 0; c < ms.captured.size() && c < m.captured.size(); ++c) {
                    const Captured& was = ms.captured[c];
                    const Captured& now = m.captured[c];
                    if (was.varying || was.text == now.text) continue;
                    fail(b.visible[k].line,
                         "the lesson shows " + was.name + " = " + was.text + " but \"$ " +
                             s.command + "\" prints " + now.text +
                             " (refresh the shown block "
                             "with lesson_runner --update, or mark a number that varies run to "
                             "run {{" +
                             was.name + "~}})");
                }
            }
        }
        if (update && (templated || needs_comment)) fresh[bi] = rewritten;
    }
    run_checks_before(std::numeric_limits<int>::max());
    fs::remove_all(scratch);
    if (update) {
        std::ofstream f(path);
        for (const std::string& l : updated(lesson, fresh)) f << l << "\n";
        std::cout << path << ": " << fresh.size() << " shown blocks rewritten from today's run\n";
    }
    std::cout << path << ": " << step_count - failures << " of " << step_count
              << " commands match the lesson, " << lesson.checks.size() - check_failures << " of "
              << lesson.checks.size() << " relation checks hold"
              << (strict ? strict_failures == 0 ? "; every number of the text accounted for"
                                                : "; strict rules broken"
                         : "")
              << "\n";
    return failures == 0 && check_failures == 0 && strict_failures == 0 ? 0 : 1;
}
