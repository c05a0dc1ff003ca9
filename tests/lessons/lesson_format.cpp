// Reading an executable lesson and matching its template lines (lesson_format.h).
#include "lesson_format.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace plab::lessons {

namespace {

std::size_t indent_of(const std::string& line) {
    return std::min(line.find_first_not_of(' '), line.size());
}

// The lines of a block's body (from `first` up to the closing line, 1-based),
// indentation up to `indent` removed, cut into steps at each "$ " line.
std::vector<Step> steps_of(const std::vector<std::string>& lines, int first, int last,
                           std::size_t indent) {
    std::vector<Step> steps;
    for (int n = first; n < last; ++n) {
        std::string line = lines[std::size_t(n - 1)];
        line.erase(0, std::min(indent_of(line), indent));
        line = rstrip(line);
        if (line.rfind("$ ", 0) == 0) {
            steps.push_back({n, line.substr(2), {}, {}});
        } else if (!steps.empty() && !line.empty()) {
            steps.back().expected.push_back(line);
        }
    }
    return steps;
}

}  // namespace

std::string rstrip(std::string s) {
    while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) s.pop_back();
    return s;
}

Lesson parse(const std::string& path) {
    static const std::string open = "<!-- check:", close = "-->";
    std::ifstream f(path);
    if (!f) throw std::runtime_error(path + ": cannot be read");
    Lesson lesson;
    for (std::string line; std::getline(f, line);) lesson.lines.push_back(line);
    const auto& lines = lesson.lines;
    const int count = int(lines.size());
    auto where = [&](int n) { return path + ":" + std::to_string(n) + ": "; };
    // The line that closes a fence or comment opened at `from`, or throws.
    auto find_close = [&](int from, const std::string& closing, const char* what) {
        for (int n = from + 1; n <= count; ++n) {
            const std::string t = rstrip(lines[std::size_t(n - 1)]);
            if (t.substr(indent_of(t)) == closing) return n;
        }
        throw std::runtime_error(where(from) + what + " is never closed");
    };
    int pending_comment = 0, pending_comment_close = 0;  // an expect comment awaiting its block
    for (int n = 1; n <= count; ++n) {
        const std::string t = rstrip(lines[std::size_t(n - 1)]);
        const std::size_t lead = indent_of(t);
        const std::string body = t.substr(lead);
        if (body == "<!-- expect") {
            pending_comment = n;
            pending_comment_close = find_close(n, "-->", "an <!-- expect comment");
            n = pending_comment_close;
            continue;
        }
        if (body == "```console") {
            Block b;
            b.fence_open = n;
            b.fence_close = find_close(n, "```", "a ```console block");
            b.indent = lead;
            b.visible = steps_of(lines, n + 1, b.fence_close, lead);
            for (Step& s : b.visible) s.shown = s.expected;
            if (pending_comment != 0) {
                b.comment_open = pending_comment;
                b.comment_close = pending_comment_close;
                b.steps = steps_of(lines, b.comment_open + 1, b.comment_close, lead);
                for (std::size_t k = 0; k < b.steps.size() && k < b.visible.size(); ++k)
                    b.steps[k].shown = b.visible[k].shown;
            } else {
                b.steps = b.visible;
            }
            pending_comment = 0;
            lesson.blocks.push_back(std::move(b));
            n = lesson.blocks.back().fence_close;
            continue;
        }
        if (pending_comment != 0 && !body.empty()) {
            throw std::runtime_error(where(pending_comment) +
                                     "an <!-- expect comment must be followed by its ```console "
                                     "block (only blank lines between)");
        }
        // A check or template spelled almost right would be skipped as a plain
        // comment, and the lesson would pass without it: refuse it instead.
        static const std::regex near_miss("<!--\\s*(check|expect)\\b", std::regex::icase);
        if (std::regex_search(t, near_miss) && t.find(open) == std::string::npos &&
            body != "<!-- expect") {
            throw std::runtime_error(where(n) + "a malformed check or expect comment: \"" + t +
                                     "\"; write <!-- check: a >= b --> on one line, or "
                                     "<!-- expect alone on its line");
        }
        const std::size_t at = t.find(open);
        if (at != std::string::npos) {
            if (t.size() < at + open.size() + close.size() ||
                t.compare(t.size() - close.size(), close.size(), close) != 0) {
                throw std::runtime_error(where(n) + "a check is one line: <!-- check: a >= b -->");
            }
            std::string relation =
                rstrip(t.substr(at + open.size(), t.size() - close.size() - at - open.size()));
            relation.erase(0, relation.find_first_not_of(' '));
            lesson.checks.push_back({n, relation});
        }
    }
    if (pending_comment != 0) {
        throw std::runtime_error(where(pending_comment) +
                                 "an <!-- expect comment must be followed by its ```console block");
    }
    return lesson;
}

std::string commands_mismatch(const Block& b) {
    if (b.comment_open == 0) return "";
    std::ostringstream os;
    const std::size_t n = std::max(b.steps.size(), b.visible.size());
    for (std::size_t k = 0; k < n; ++k) {
        const std::string in_comment = k < b.steps.size() ? "$ " + b.steps[k].command : "nothing";
        const std::string shown = k < b.visible.size() ? "$ " + b.visible[k].command : "nothing";
        if (in_comment != shown) {
            os << "command " << k + 1 << " of the shown block is \"" << shown
               << "\" but its <!-- expect comment has \"" << in_comment << "\"";
            return os.str();
        }
    }
    return "";
}

bool has_markup(const std::string& line) {
    static const std::regex marker(
        "\\{\\{[A-Za-z_][A-Za-z_0-9]*(~|=[^}]+)?\\}\\}|\\[\\[gpu-form\\]\\]|\\[\\[[-+0-9.eE]+\\.\\."
        "[-+0-9.eE]+\\]\\]");
    if (std::regex_search(line, marker)) return true;
    const std::string t = line.substr(indent_of(line));
    return t != kEllipsis && line.find(kEllipsis) != std::string::npos;
}

bool has_absolute_path(const std::string& line) {
    // A '/' that starts a word and leads into a folder: "/work/x", "=/tmp/y".
    // Not "tokens/s" or "1/2" (no word start), nor a lone "/" in prose.
    static const std::regex path("(^|[\\s=:,(\\[\"'])/[A-Za-z0-9_.+-]+/");
    return std::regex_search(line, path);
}

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
    static const std::string gpu_form = "[[gpu-form]]";
    Pattern p;
    std::string re;
    for (std::size_t i = 0; i < shown.size();) {
        const bool at_range =
            shown.compare(i, 2, "[[") == 0 && shown.compare(i, gpu_form.size(), gpu_form) != 0;
        if (shown.compare(i, kEllipsis.size(), kEllipsis) == 0) {
            i += kEllipsis.size();
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
            static const std::regex capture_re("\\{\\{([A-Za-z_][A-Za-z_0-9]*)(~|=([^}]+))?\\}\\}");
            std::smatch m;
            if (close == std::string::npos || !std::regex_match(marker, m, capture_re)) {
                throw std::runtime_error("bad marker \"" + marker +
                                         "\": expected {{name}}, {{name~}} or {{name=1904384}}");
            }
            p.slots.push_back({0, 0, m[1].str(), m[3].str(), m[2].str() == "~"});
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

StepMatch match_step(const std::vector<std::string>& expected,
                     const std::vector<std::string>& output) {
    StepMatch r;
    std::size_t next = 0;
    for (const std::string& e : expected) {
        Pattern p;
        try {
            p = pattern_of(e);
        } catch (const std::exception& ex) {
            r.why = ex.what();
            return r;
        }
        std::string out_of_range;
        std::smatch m;
        for (; next < output.size(); ++next) {
            if (!std::regex_match(output[next], m, p.re)) continue;
            bool fits = true;
            std::vector<Captured> got;
            for (std::size_t k = 0; k < p.slots.size() && fits; ++k) {
                const Slot& s = p.slots[k];
                const std::string text = m[k + 1].str();
                const double v = std::strtod(text.c_str(), nullptr);
                if (!s.name.empty()) {
                    fits = s.literal.empty() || text == s.literal;
                    got.push_back({s.name, text, v, s.varying});
                } else if (v < s.lo || v > s.hi) {
                    fits = false;
                    if (out_of_range.empty()) {
                        std::ostringstream os;
                        os << text << " is outside [" << s.lo << ", " << s.hi << "] in \""
                           << output[next] << "\"";
                        out_of_range = os.str();
                    }
                }
            }
            if (fits) {
                r.captured.insert(r.captured.end(), got.begin(), got.end());
                break;
            }
        }
        if (next == output.size()) {
            r.why = "shown line not printed (in this order): \"" + e + "\"";
            if (!out_of_range.empty()) r.why += "\n  number out of range: " + out_of_range;
            return r;
        }
        r.at.push_back(next++);
    }
    return r;
}

}  // namespace plab::lessons
