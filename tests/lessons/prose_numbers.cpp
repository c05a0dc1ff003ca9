// The numbers of a lesson's text and how each is accounted for (prose_numbers.h).
#include "prose_numbers.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "relation.h"

namespace plab::lessons {

namespace {

bool is_word_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// Overwrites [from, to) of `s` with spaces (positions stay where they were).
void blank(std::string& s, std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to && i < s.size(); ++i) s[i] = ' ';
}

void blank_all(std::string& s, const std::regex& re) {
    std::string copy = s;
    for (std::sregex_iterator it(copy.begin(), copy.end(), re), end; it != end; ++it)
        blank(s, std::size_t(it->position()), std::size_t(it->position() + it->length()));
}

// A number token: its place in the line, its text and value.
struct Token {
    std::size_t at = 0, end = 0;
    std::string text;
    double value = 0;
};

// The numbers of `s`: digits with optional ",ddd" groups, a fraction and an
// exponent, not glued to a letter, digit, '_' or '.' on either side (that is
// a word or identifier: fp32, sm_90, 15M, v1.2), nor after '#', '/', or a
// letter and '-' (GPT-2, issue #45, a path).
std::vector<Token> numbers_in(const std::string& s) {
    std::vector<Token> out;
    for (std::size_t i = 0; i < s.size();) {
        if (!std::isdigit(static_cast<unsigned char>(s[i]))) {
            ++i;
            continue;
        }
        const char before = i > 0 ? s[i - 1] : ' ';
        const bool glued_before =
            is_word_char(before) || before == '.' || before == '#' || before == '/' ||
            (before == '-' && i > 1 && std::isalpha(static_cast<unsigned char>(s[i - 2])));
        std::size_t j = i;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        // Thousands groups: ",ddd" not followed by another digit.
        while (j + 3 < s.size() + 0 && s[j] == ',' && std::isdigit((unsigned char)s[j + 1]) &&
               std::isdigit((unsigned char)s[j + 2]) && std::isdigit((unsigned char)s[j + 3]) &&
               (j + 4 >= s.size() || !std::isdigit((unsigned char)s[j + 4])))
            j += 4;
        if (j + 1 < s.size() && s[j] == '.' && std::isdigit((unsigned char)s[j + 1])) {
            j += 1;
            while (j < s.size() && std::isdigit((unsigned char)s[j])) ++j;
        }
        if (j + 1 < s.size() && (s[j] == 'e' || s[j] == 'E')) {
            std::size_t k = j + 1;
            if (k < s.size() && (s[k] == '-' || s[k] == '+')) ++k;
            if (k < s.size() && std::isdigit((unsigned char)s[k])) {
                j = k;
                while (j < s.size() && std::isdigit((unsigned char)s[j])) ++j;
            }
        }
        const bool glued_after =
            j < s.size() && (is_word_char(s[j]) || (s[j] == '.' && j + 1 < s.size() &&
                                                    std::isdigit((unsigned char)s[j + 1])));
        if (!glued_before && !glued_after) {
            Token t{i, j, s.substr(i, j - i), 0};
            std::string plain;
            for (char c : t.text)
                if (c != ',') plain += c;
            t.value = std::strtod(plain.c_str(), nullptr);
            out.push_back(t);
        }
        i = j;
        while (i < s.size() && (is_word_char(s[i]) || s[i] == '.')) ++i;  // rest of a word
    }
    return out;
}

// Digits after the point of a printed number: its last digit's place.
double half_unit(const std::string& text) {
    const std::size_t dot = text.find('.');
    const std::size_t e = text.find_first_of("eE");
    int decimals = 0;
    if (dot != std::string::npos)
        decimals = int((e == std::string::npos ? text.size() : e) - dot - 1);
    int exponent = 0;
    if (e != std::string::npos) exponent = std::atoi(text.c_str() + e + 1);
    return 0.5 * std::pow(10.0, exponent - decimals);
}

// UTF-8 operators and their ASCII stand-ins of the same byte length, so the
// positions of a line and of its normalised copy agree.
std::string normalise_operators(std::string s) {
    const std::pair<const char*, const char*> ops[] = {
        {"\xC2\xB7", "* "},       // ·
        {"\xC3\x97", "* "},       // ×
        {"\xC3\xB7", "/ "},       // ÷
        {"\xE2\x88\x92", "-  "},  // −
        {"\xE2\x89\x88", "~  "},  // ≈
    };
    for (const auto& [from, to] : ops) {
        for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at))
            s.replace(at, std::string(from).size(), to);
    }
    return s;
}

// The text of a line a reader sees as prose, with what is not prose blanked
// out: code spans, links' targets, URLs, HTML tags, references, list numbers,
// dates, years and version numbers. `code` gets the code spans' text.
std::string prose_of(const std::string& line, std::string& code) {
    std::string s = line;
    // Code spans: `...`.
    for (std::size_t a = s.find('`'); a != std::string::npos; a = s.find('`', a)) {
        const std::size_t b = s.find('`', a + 1);
        if (b == std::string::npos) break;
        code += s.substr(a + 1, b - a - 1) + " ";
        blank(s, a, b + 1);
        a = b + 1;
    }
    static const std::regex link_target("\\]\\([^)]*\\)"), url("https?://[^ )>]+"),
        tag("<[/A-Za-z][^>]*>"), date("\\b\\d{4}-\\d{2}-\\d{2}\\b"),
        version("\\b\\d+\\.\\d+\\.\\d+\\b"), year("\\b(19[5-9]\\d|20[0-3]\\d)\\b"),
        list_number("^\\s*\\d+\\.\\s"),
        reference(
            "\\b(?:[Ll]essons?|[Ee]xercises?|[Ss]teps?|[Ss]ections?|[Cc]hapters?|[Tt]ables?|"
            "[Ff]igures?|[Ff]ig\\.|[Ll]ines?|[Ii]ssues?|[Qq]uestions?|[Pp]arts?|[Pp]oints?|"
            "[Aa]nswers?|§)\\s*\\d+(?:\\.\\d+)*(?:\\s*(?:,|and|or|to|–|-)\\s*\\d+(?:\\.\\d+)*)*");
    for (const std::regex* re :
         {&link_target, &url, &tag, &date, &version, &year, &list_number, &reference})
        blank_all(s, *re);
    // "§3.2" starts with a two-byte character the reference pattern may not
    // see as a word boundary: blank a section sign and the number after it.
    for (std::size_t at = s.find("\xC2\xA7"); at != std::string::npos;
         at = s.find("\xC2\xA7", at)) {
        std::size_t j = at + 2;
        while (j < s.size() && (std::isdigit((unsigned char)s[j]) || s[j] == '.')) ++j;
        blank(s, at, j);
    }
    return s;
}

struct Annotation {
    std::size_t at = 0;  // position in the line
    bool checked = false;
    std::string body;  // EXPR or SOURCE
};

}  // namespace

ProseScan scan_prose(const Lesson& lesson) {
    ProseScan scan;
    const auto& lines = lesson.lines;
    const int count = int(lines.size());

    // 1. Which lines are prose, which section each belongs to, and the values
    //    a section shows (console blocks, expect templates, checks, commands).
    enum class Kind { prose, code, console, comment, skip };
    std::vector<Kind> kind(std::size_t(count) + 1, Kind::prose);
    std::vector<int> section(std::size_t(count) + 1, 0);
    std::map<int, std::set<double>> shown;  // by section
    std::set<int> exempt_sections;
    int sec = 0;
    for (int n = 1; n <= count; ++n) {
        const std::string& l = lines[std::size_t(n - 1)];
        const std::string t = l.substr(std::min(l.find_first_not_of(' '), l.size()));
        if (t.rfind("## ", 0) == 0) {
            ++sec;
            if (t == "## Sources") exempt_sections.insert(sec);
        }
        section[std::size_t(n)] = sec;
        if (t.rfind("```", 0) == 0) {
            const bool console = t == "```console";
            kind[std::size_t(n)] = Kind::skip;
            int m = n + 1;
            for (; m <= count; ++m) {
                const std::string& u = lines[std::size_t(m - 1)];
                section[std::size_t(m)] = sec;
                if (u.substr(std::min(u.find_first_not_of(' '), u.size())).rfind("```", 0) == 0)
                    break;
                // A text diagram is read as prose; a console block is shown output.
                kind[std::size_t(m)] = console ? Kind::console : Kind::prose;
            }
            if (m <= count) kind[std::size_t(m)] = Kind::skip;
            n = m;
            continue;
        }
        if (t.rfind("<!--", 0) == 0 && t.rfind("<!--=", 0) != 0 && t.rfind("<!--quoted:", 0) != 0) {
            // A whole-line comment: an expect template, a check, the count of
            // checks; anything else is a comment the runner does not know.
            const bool known = t == "<!-- expect" || t.rfind("<!-- check:", 0) == 0 ||
                               t.rfind("<!-- checks:", 0) == 0;
            if (!known) {
                scan.errors.push_back(
                    {n, "a comment the lesson runner does not know: \"" + t +
                            "\" (known: <!-- expect, <!-- check: ... -->, <!-- checks: N -->, and "
                            "inline <!--= EXPR --> and <!--quoted: SOURCE -->)"});
            }
            int m = n;
            while (m <= count && lines[std::size_t(m - 1)].find("-->") == std::string::npos) ++m;
            for (int k = n; k <= std::min(m, count); ++k) {
                kind[std::size_t(k)] = Kind::comment;
                section[std::size_t(k)] = sec;
            }
            n = m;
            continue;
        }
    }
    for (int n = 1; n <= count; ++n) {
        const Kind k = kind[std::size_t(n)];
        if (k != Kind::console && k != Kind::comment) continue;
        for (const Token& t : numbers_in(lines[std::size_t(n - 1)]))
            shown[section[std::size_t(n)]].insert(t.value);
    }

    // 2. Paragraph by paragraph: the numbers, the equations, the annotations.
    struct Pending {
        std::size_t index;  // into scan.numbers
        int line;
    };
    std::vector<Pending> paragraph;  // numbers of the current paragraph not yet covered
    for (int n = 1; n <= count; ++n) {
        const std::string& raw = lines[std::size_t(n - 1)];
        const bool prose = kind[std::size_t(n)] == Kind::prose;
        const std::string trimmed = raw.substr(std::min(raw.find_first_not_of(' '), raw.size()));
        if (!prose || trimmed.empty()) {
            paragraph.clear();
            continue;
        }
        if (trimmed[0] == '#' || exempt_sections.count(section[std::size_t(n)])) continue;
        // The shape's "**Time:** about N minutes." is an estimate, not a claim.
        if (trimmed.rfind("**Time:**", 0) == 0) continue;
        // Inline annotations, then everything that is not prose, blanked.
        std::string line = raw;
        std::vector<Annotation> notes;
        for (std::size_t a = line.find("<!--"); a != std::string::npos; a = line.find("<!--", a)) {
            const std::size_t b = line.find("-->", a);
            if (b == std::string::npos) {
                scan.errors.push_back({n, "an inline comment must close on its line"});
                break;
            }
            const std::string inside = line.substr(a + 4, b - a - 4);
            if (inside.rfind("=", 0) == 0) {
                notes.push_back({a, true, inside.substr(1)});
            } else if (inside.rfind("quoted:", 0) == 0 && inside.size() > 10) {
                notes.push_back({a, false, inside.substr(7)});
            } else {
                scan.errors.push_back(
                    {n, "an inline comment the lesson runner does not know: \"" +
                            line.substr(a, b + 3 - a) +
                            "\" (known: <!--= EXPR --> and <!--quoted: SOURCE -->)"});
            }
            blank(line, a, b + 3);
            a = b + 3;
        }
        std::string code;
        const std::string text = prose_of(line, code);
        const std::size_t first = scan.numbers.size();
        for (const Token& t : numbers_in(text)) {
            scan.numbers.push_back({n, t.text, t.value, ""});
            paragraph.push_back({scan.numbers.size() - 1, n});
        }
        // Numbers of command-like code spans count as shown in this section.
        if (code.find("plab") != std::string::npos || code.find("--") != std::string::npos)
            for (const Token& t : numbers_in(code)) shown[section[std::size_t(n)]].insert(t.value);

        // Equations: a run of numbers and operators with '=' or '≈' in it.
        const std::string ascii = normalise_operators(text);
        static const std::regex chain("[0-9(][0-9.,()+*/ ~=-]*[0-9)]");
        for (std::sregex_iterator it(ascii.begin(), ascii.end(), chain), end; it != end; ++it) {
            std::string c = it->str();
            if (c.find('=') == std::string::npos && c.find('~') == std::string::npos) continue;
            // Only a whole equation: not the tail of "max_seq_len · 512 = ..." or
            // of "bf16 = 2", nor the head of "... = 4 · H" (an operand in words).
            const std::size_t lo0 = std::size_t(it->position()), hi0 = lo0 + c.size();
            auto fragment = [&](std::size_t i, int step) {
                if (step < 0 ? i == 0 : i >= ascii.size()) return false;
                std::size_t k = step < 0 ? i - 1 : i;
                if (is_word_char(ascii[k])) return true;
                // A point is part of a number only next to a digit ("1.5"), else
                // it ends a sentence.
                if (ascii[k] == '.') {
                    const std::size_t beyond = step < 0 ? (k > 0 ? k - 1 : k) : k + 1;
                    if (beyond < ascii.size() && beyond != k &&
                        std::isdigit(static_cast<unsigned char>(ascii[beyond])))
                        return true;
                }
                while (ascii[k] == ' ' && (step < 0 ? k > 0 : k + 1 < ascii.size())) k += step;
                return std::string("*/+-(^").find(ascii[k]) != std::string::npos ||
                       (step > 0 && std::string(")").find(ascii[k]) != std::string::npos);
            };
            if (fragment(lo0, -1) || fragment(hi0, +1)) continue;
            // ...nor one wrapped across lines: an operator ends the line before
            // it, or starts the line after it.
            auto ends_with_operator = [](std::string t) {
                t = normalise_operators(rstrip(t));
                t = rstrip(t);
                return !t.empty() && std::string("*/+-=~(").find(t.back()) != std::string::npos;
            };
            auto starts_with_operator = [](const std::string& t) {
                const std::string u = normalise_operators(t);
                const std::size_t k = u.find_first_not_of(' ');
                return k != std::string::npos &&
                       std::string("*/+-=~").find(u[k]) != std::string::npos;
            };
            if (ascii.find_first_not_of(' ') == lo0 && n > 1 &&
                ends_with_operator(lines[std::size_t(n - 2)]))
                continue;
            if (ascii.find_last_not_of(' ') + 1 == hi0 && n < count &&
                starts_with_operator(lines[std::size_t(n)]))
                continue;
            static const std::regex thousands("(\\d),(\\d{3})(?!\\d)");
            c = std::regex_replace(c, thousands, "$1$2");
            std::vector<std::string> sides;
            std::vector<char> ops;
            std::size_t from = 0;
            for (std::size_t i = 0; i <= c.size(); ++i) {
                if (i == c.size() || c[i] == '=' || c[i] == '~') {
                    sides.push_back(c.substr(from, i - from));
                    if (i < c.size()) ops.push_back(c[i]);
                    from = i + 1;
                }
            }
            // A scale word after the last side ("≈ 1.7 M", "= 128 KiB") multiplies it.
            double scale = 1;
            {
                static const std::regex scale_word(
                    "^ "
                    "+(k|K|thousand|M|million|G|billion|KiB|MiB|GiB|kB|MB|GB|TB|kFLOP|MFLOP|GFLOP|"
                    "TFLOP)\\b");
                std::smatch m;
                const std::string after = ascii.substr(hi0);
                if (std::regex_search(after, m, scale_word)) {
                    const std::string w = m[1].str();
                    scale = w == "KiB"   ? 1024.0
                            : w == "MiB" ? 1048576.0
                            : w == "GiB" ? 1073741824.0
                            : (w == "k" || w == "K" || w == "thousand" || w == "kB" || w == "kFLOP")
                                ? 1e3
                            : (w == "M" || w == "million" || w == "MB" || w == "MFLOP") ? 1e6
                            : (w == "G" || w == "billion" || w == "GB" || w == "GFLOP") ? 1e9
                                                                                        : 1e12;
                }
            }
            std::vector<double> values;
            bool parsed = sides.size() >= 2;
            for (const std::string& side : sides) {
                if (!parsed) break;
                try {
                    values.push_back(evaluate_expression(side, {}));
                } catch (const std::exception&) {
                    parsed = false;
                }
            }
            if (!parsed) continue;  // not an equation after all (a list, a range)
            if (parsed && scale != 1) values.back() *= scale;
            auto literal_half = [&](std::size_t index) {
                std::string side = sides[index];
                side.erase(0, side.find_first_not_of(' '));
                side.erase(side.find_last_not_of(' ') + 1);
                const bool literal =
                    !side.empty() && side.find_first_not_of("0123456789.") == std::string::npos;
                return literal ? half_unit(side) * (index + 1 == sides.size() ? scale : 1.0) : 0.0;
            };
            for (std::size_t k = 0; k + 1 < values.size(); ++k) {
                const double a = values[k], b = values[k + 1];
                const double tol = std::max({literal_half(k), literal_half(k + 1),
                                             1e-9 * std::max(std::fabs(a), std::fabs(b))});
                if (std::fabs(a - b) > tol) {
                    std::ostringstream os;
                    os.precision(10);
                    os << "the equation \"" << it->str() << "\" in the text does not hold: " << a
                       << " against " << b;
                    scan.errors.push_back({n, os.str()});
                }
            }
            const std::size_t lo = std::size_t(it->position()), hi = lo + std::size_t(it->length());
            std::size_t idx = first;
            for (const Token& t : numbers_in(text)) {
                if (t.at >= lo && t.end <= hi) scan.numbers[idx].how = "arithmetic";
                ++idx;
            }
        }
        // Shown in the section's console blocks, templates, checks or commands.
        for (std::size_t i = first; i < scan.numbers.size(); ++i) {
            if (scan.numbers[i].how.empty() &&
                shown[section[std::size_t(n)]].count(scan.numbers[i].value))
                scan.numbers[i].how = "shown";
        }
        // Annotations, left to right: "<!--=" takes the nearest number before
        // it; "<!--quoted:" every number of the paragraph before it.
        const std::vector<Token> here = numbers_in(text);
        for (const Annotation& a : notes) {
            if (a.checked) {
                // The nearest number before it: on this line, else earlier in the paragraph.
                std::size_t pick = std::string::npos;
                for (std::size_t k = 0; k < here.size(); ++k)
                    if (here[k].end <= a.at) pick = first + k;
                if (pick == std::string::npos && !paragraph.empty() &&
                    paragraph.size() > here.size())
                    pick = paragraph[paragraph.size() - here.size() - 1].index;
                if (pick == std::string::npos) {
                    scan.errors.push_back({n, "<!--=" + a.body + "--> follows no number"});
                    continue;
                }
                ProseNumber& p = scan.numbers[pick];
                p.how = "checked";
                std::ostringstream rel;
                rel.precision(17);
                rel << "(" << a.body << ") == " << p.value << " within " << half_unit(p.text);
                scan.number_checks.push_back({n, rel.str()});
            } else {
                for (const Pending& q : paragraph) {
                    const bool before = q.line < n || [&] {
                        for (const Token& t : here)
                            if (first + std::size_t(&t - &here[0]) == q.index) return t.end <= a.at;
                        return false;
                    }();
                    if (before && scan.numbers[q.index].how.empty())
                        scan.numbers[q.index].how = "quoted";
                }
            }
        }
    }
    return scan;
}

}  // namespace plab::lessons
