// Lesson Markdown -> blocks (see lesson_text.h). Line-based, one pass: a fence,
// an HTML comment, a <details> tag, a table, a list item or a blank line ends
// the block being collected.
#include "app/lesson_text.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace plab::viewer {
namespace {

namespace fs = std::filesystem;

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
        s.remove_suffix(1);
    return s;
}

int indent_of(std::string_view s) {
    int n = 0;
    while (n < static_cast<int>(s.size()) && s[n] == ' ') ++n;
    return n;
}

bool starts_with(std::string_view s, std::string_view prefix) {
    return s.substr(0, prefix.size()) == prefix;
}

std::vector<std::string_view> split_lines(std::string_view text) {
    std::vector<std::string_view> lines;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(start, end - start);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        lines.push_back(line);
        start = end + 1;
    }
    return lines;
}

// A list item's marker ("- ", "* ", "12. ") after the indentation: its length, or 0.
int list_marker(std::string_view t, bool& numbered) {
    numbered = false;
    if (t.size() >= 2 && (t[0] == '-' || t[0] == '*') && t[1] == ' ') return 2;
    size_t d = 0;
    while (d < t.size() && d < 3 && std::isdigit(static_cast<unsigned char>(t[d]))) ++d;
    if (d > 0 && d + 1 < t.size() && t[d] == '.' && t[d + 1] == ' ') {
        numbered = true;
        return static_cast<int>(d) + 2;
    }
    return 0;
}

bool is_rule(std::string_view t) {
    return t.size() >= 3 && std::all_of(t.begin(), t.end(), [](char c) { return c == '-'; });
}

// "| a | b |" -> {"a", "b"} (inline text of each cell).
std::vector<std::string> table_cells(std::string_view t) {
    if (starts_with(t, "|")) t.remove_prefix(1);
    if (!t.empty() && t.back() == '|') t.remove_suffix(1);
    std::vector<std::string> cells;
    size_t start = 0;
    bool in_code = false;
    for (size_t i = 0; i <= t.size(); ++i) {
        if (i < t.size() && t[i] == '`') in_code = !in_code;
        if (i == t.size() || (t[i] == '|' && !in_code)) {
            cells.push_back(inline_text(trim(t.substr(start, i - start))));
            start = i + 1;
        }
    }
    return cells;
}

bool is_table_separator(std::string_view t) {
    return starts_with(t, "|") && t.find_first_not_of("|-: ") == std::string_view::npos;
}

// One line of the file as the block readers see it.
struct Line {
    std::string_view text;  // trimmed
    int n = 0;              // 1-based line number
    int indent = 0;         // leading spaces
};

struct Parser {
    std::string where;
    int lesson = 0;
    LessonText out;
    std::vector<std::string_view> lines;
    std::size_t i = 0;  // the line being read; a block of several lines leaves it on its last
    // The block being collected (paragraph or list item), if any.
    bool open = false;
    LessonBlock cur;
    std::string raw;       // its text before inline_text: a Try step's code span is read from it
    int list_indent = -1;  // the content indent of the last list item (-1: none since)
    bool blank_after_item = false;  // a blank line followed the open list item

    void flush() {
        if (!open) return;
        open = false;
        const std::string_view t = trim(raw);
        if (starts_with(t, "Try:")) {
            make_try(t);
        } else {
            cur.text = inline_text(t);
        }
        out.blocks.push_back(cur);
    }

    void start(BlockKind kind, int line, int level, std::string_view text,
               std::string marker = "") {
        flush();
        open = true;
        cur = LessonBlock{};
        cur.kind = kind;
        cur.line = line;
        cur.level = level;
        cur.marker = std::move(marker);
        raw = std::string(text);
    }

    // "Try: what it shows — `plab-viewer --lesson 3 --chunks 4`"
    void make_try(std::string_view t) {
        const std::string at = where + ":" + std::to_string(cur.line);
        const size_t close = t.rfind('`');
        const size_t open_tick = close == 0 || close == std::string_view::npos
                                     ? std::string_view::npos
                                     : t.rfind('`', close - 1);
        PLAB_CHECK(open_tick != std::string_view::npos,
                   at << ": a \"Try:\" step must end in a code span with the viewer command, "
                         "e.g. Try: chunks of 4 — `plab-viewer --lesson 3 --chunks 4`");
        cur.command = std::string(t.substr(open_tick + 1, close - open_tick - 1));
        std::istringstream words(cur.command);
        std::string w;
        std::vector<std::string> all;
        while (words >> w) all.push_back(w);
        PLAB_CHECK(all.size() >= 3 && all[0] == "plab-viewer" && all[1] == "--lesson",
                   at << ": the \"Try:\" command `" << cur.command
                      << "` must start with plab-viewer --lesson N");
        PLAB_CHECK(lesson == 0 || all[2] == std::to_string(lesson),
                   at << ": the \"Try:\" command `" << cur.command << "` opens lesson " << all[2]
                      << ", but this is lesson " << lesson);
        cur.args.assign(all.begin() + 1, all.end());
        std::string_view what = trim(t.substr(4, open_tick - 4));
        // The dash or colon that leads into the command is the reader's, not the button's.
        for (std::string_view tail : {"—", "-", ":", ","})
            if (what.size() >= tail.size() && what.substr(what.size() - tail.size()) == tail)
                what = trim(what.substr(0, what.size() - tail.size()));
        PLAB_CHECK(!what.empty(), at << ": the \"Try:\" step says nothing before its command; "
                                        "write what the reader will see");
        cur.kind = BlockKind::kTry;
        cur.text = inline_text(what);
    }

    // ---- the block readers: each takes the line (and the rest of its block) or returns false

    // A blank line ends a paragraph; a list item may go on after it.
    void read_blank() {
        if (open && cur.kind == BlockKind::kParagraph) flush();
        blank_after_item = open;
    }

    // Fenced code, possibly indented inside a list item.
    bool read_fence(const Line& l) {
        if (!starts_with(l.text, "```")) return false;
        flush();
        LessonBlock code;
        code.kind = BlockKind::kCode;
        code.line = l.n;
        code.level = l.indent >= 2 ? 1 : 0;
        code.marker = std::string(trim(l.text.substr(3)));
        for (size_t first = i + 1; ++i < lines.size() && !starts_with(trim(lines[i]), "```");) {
            std::string_view s = lines[i];
            s.remove_prefix(std::min<size_t>(indent_of(s), l.indent));
            if (i > first) code.text += '\n';
            code.text += s;  // a real run, as the lesson shows it
        }
        PLAB_CHECK(i < lines.size(), where << ":" << l.n << ": a ``` fence is never closed");
        out.blocks.push_back(code);
        return true;
    }

    // A comment (the runner's checks and templates): not shown.
    bool read_comment(const Line& l) {
        if (!starts_with(l.text, "<!--")) return false;
        flush();
        while (i < lines.size() && lines[i].find("-->") == std::string_view::npos) ++i;
        PLAB_CHECK(i < lines.size(), where << ":" << l.n << ": an HTML comment is never closed");
        return true;
    }

    // <details> ... </details>: a section the reader opens (answers); its <summary> names it.
    bool read_details(const Line& l) {
        if (l.text == "<details>" || l.text == "</details>") {
            flush();
            list_indent = -1;
            LessonBlock d;
            d.kind = l.text == "<details>" ? BlockKind::kDetailsBegin : BlockKind::kDetailsEnd;
            d.line = l.n;
            d.text = "Details";
            out.blocks.push_back(d);
            return true;
        }
        if (!starts_with(l.text, "<summary>")) return false;
        flush();
        std::string_view s = l.text.substr(9);
        if (const size_t end = s.find("</summary>"); end != std::string_view::npos)
            s = s.substr(0, end);
        if (!out.blocks.empty() && out.blocks.back().kind == BlockKind::kDetailsBegin)
            out.blocks.back().text = inline_text(trim(s));
        return true;
    }

    // "## Heading": one to six '#' and a space; the first level-1 heading is the title.
    bool read_heading(const Line& l) {
        if (!starts_with(l.text, "#")) return false;
        const size_t level = l.text.find_first_not_of('#');
        if (level == std::string_view::npos || level > 6 || l.text[level] != ' ') return false;
        flush();
        list_indent = -1;
        LessonBlock h;
        h.kind = BlockKind::kHeading;
        h.line = l.n;
        h.level = static_cast<int>(level);
        h.text = inline_text(trim(l.text.substr(level)));
        if (h.level == 1 && out.title.empty()) out.title = h.text;
        out.blocks.push_back(h);
        return true;
    }

    // A table: the lines that start with '|', its separator row left out.
    bool read_table(const Line& l) {
        if (!starts_with(l.text, "|")) return false;
        flush();
        list_indent = -1;
        LessonBlock table;
        table.kind = BlockKind::kTable;
        table.line = l.n;
        for (; i < lines.size() && starts_with(trim(lines[i]), "|"); ++i)
            if (!is_table_separator(trim(lines[i])))
                table.cells.push_back(table_cells(trim(lines[i])));
        --i;
        out.blocks.push_back(table);
        return true;
    }

    // "---": a rule across the pane.
    bool read_rule(const Line& l) {
        if (!is_rule(l.text)) return false;
        flush();
        list_indent = -1;
        LessonBlock rule;
        rule.kind = BlockKind::kRule;
        rule.line = l.n;
        out.blocks.push_back(rule);
        return true;
    }

    // "![alt](path)" on a line of its own.
    bool read_picture(const Line& l) {
        if (!starts_with(l.text, "![") || l.text.back() != ')') return false;
        const size_t close = l.text.find("](");
        if (close == std::string_view::npos) return false;
        flush();
        LessonBlock pic;
        pic.kind = BlockKind::kPicture;
        pic.line = l.n;
        pic.text = inline_text(l.text.substr(2, close - 2));
        pic.marker = std::string(l.text.substr(close + 2, l.text.size() - close - 3));
        out.blocks.push_back(pic);
        return true;
    }

    // "- ", "* " or "12. ": a bullet or numbered item (nested when indented).
    bool read_list_item(const Line& l) {
        bool numbered = false;
        const int m = list_marker(l.text, numbered);
        if (m <= 0) return false;
        start(numbered ? BlockKind::kNumbered : BlockKind::kBullet, l.n, l.indent >= 2 ? 1 : 0,
              l.text.substr(m), numbered ? std::string(l.text.substr(0, m - 1)) : "");
        list_indent = l.indent + m;
        blank_after_item = false;
        return true;
    }

    // A line of text. A "Try:" line always starts a step of its own (never continues the
    // block above). Right after an item's line it continues the item (even unindented,
    // Markdown's lazy continuation); after a blank line, indented to the item, it is the
    // item's next paragraph; otherwise it continues the open paragraph or starts one.
    void read_text(const Line& l) {
        if (starts_with(l.text, "Try:")) {
            list_indent = -1;
            start(BlockKind::kParagraph, l.n, 0, l.text);
            return;
        }
        const bool item_open = open && cur.kind != BlockKind::kParagraph;
        const bool paragraph_open = open && cur.kind == BlockKind::kParagraph;
        if ((item_open && !blank_after_item) || paragraph_open) {
            raw += ' ';
            raw += l.text;
            return;
        }
        if (list_indent >= 0 && l.indent >= 2) {
            blank_after_item = false;
            start(BlockKind::kParagraph, l.n, 1, l.text);
            return;
        }
        list_indent = -1;
        start(BlockKind::kParagraph, l.n, 0, l.text);
    }
};

}  // namespace

int LessonText::count(BlockKind kind) const {
    return static_cast<int>(std::count_if(blocks.begin(), blocks.end(),
                                          [&](const LessonBlock& b) { return b.kind == kind; }));
}

std::string inline_text(std::string_view line) {
    std::string out;
    size_t i = 0;
    while (i < line.size()) {
        const char c = line[i];
        if (line.substr(i, 4) == "<!--") {
            // An inline comment (the lesson runner's "<!--= EXPR -->" number
            // check or "<!--quoted: SOURCE -->"): invisible, as when rendered.
            const size_t close = line.find("-->", i + 4);
            i = close == std::string_view::npos ? line.size() : close + 3;
            continue;
        }
        if (c == '`') {  // a code span: kept as written, backticks included
            const size_t close = line.find('`', i + 1);
            const size_t end = close == std::string_view::npos ? line.size() : close + 1;
            out += line.substr(i, end - i);
            i = end;
        } else if (c == '*') {
            // Emphasis: a run of '*' with text on one side only opens or closes it
            // ("**Cost.** Then", "*x*"), and so does one between a word and a
            // punctuation mark ("(**a**)", "*b*,") or a "**" inside a word: dropped.
            // One between two words or two spaces is arithmetic ("T*T", "2 * 3"): kept.
            size_t run = i;
            while (run < line.size() && line[run] == '*') ++run;
            auto word = [](char ch) {
                return std::isalnum(static_cast<unsigned char>(ch)) ||
                       static_cast<unsigned char>(ch) >= 0x80;
            };
            auto text = [](char ch) { return !std::isspace(static_cast<unsigned char>(ch)); };
            const bool before = i > 0 && text(line[i - 1]);
            const bool after = run < line.size() && text(line[run]);
            const bool word_before = before && word(line[i - 1]);
            const bool word_after = after && word(line[run]);
            const bool emphasis =
                before != after || (before && (word_before != word_after || run - i == 2));
            if (!emphasis) out += line.substr(i, run - i);
            i = run;
        } else if (c == '[' || (c == '!' && i + 1 < line.size() && line[i + 1] == '[')) {
            // [text](url) -> "text (url)"; ![alt](path) -> "picture: alt (path)".
            const size_t open = c == '!' ? i + 1 : i;
            const size_t close = line.find(']', open);
            if (close != std::string_view::npos && close + 1 < line.size() &&
                line[close + 1] == '(') {
                const size_t paren = line.find(')', close + 2);
                if (paren != std::string_view::npos) {
                    if (c == '!') out += "picture: ";
                    out += inline_text(line.substr(open + 1, close - open - 1));
                    out += " (";
                    out += line.substr(close + 2, paren - close - 2);
                    out += ")";
                    i = paren + 1;
                    continue;
                }
            }
            out += c;
            ++i;
        } else {
            out += c;
            ++i;
        }
    }
    return out;
}

LessonText parse_lesson(std::string_view markdown, const std::string& where, int lesson) {
    Parser p;
    p.where = where;
    p.lesson = lesson;
    p.out.path = where;
    p.lines = split_lines(markdown);
    p.out.n_lines = static_cast<int>(p.lines.size());
    for (p.i = 0; p.i < p.lines.size(); ++p.i) {
        const std::string_view line = p.lines[p.i];
        const Line l{trim(line), static_cast<int>(p.i) + 1, indent_of(line)};
        if (l.text.empty()) {
            p.read_blank();
            continue;
        }
        // The first reader that knows the line's kind takes it (and the rest of its block).
        if (p.read_fence(l) || p.read_comment(l) || p.read_details(l) || p.read_heading(l) ||
            p.read_table(l) || p.read_rule(l) || p.read_picture(l) || p.read_list_item(l))
            continue;
        p.read_text(l);
    }
    p.flush();
    return p.out;
}

int count_try_lines(std::string_view markdown) {
    int count = 0;
    bool in_fence = false, in_comment = false;
    for (std::string_view line : split_lines(markdown)) {
        std::string_view t = trim(line);
        if (in_comment) {
            in_comment = t.find("-->") == std::string_view::npos;
            continue;
        }
        if (starts_with(t, "```")) {
            in_fence = !in_fence;
            continue;
        }
        if (in_fence) continue;
        if (starts_with(t, "<!--")) {
            in_comment = t.find("-->") == std::string_view::npos;
            continue;
        }
        if (starts_with(t, "- ") || starts_with(t, "* ")) t = trim(t.substr(2));
        count += starts_with(t, "Try:") ? 1 : 0;
    }
    return count;
}

std::string lessons_dir() {
    const char* env = std::getenv("PLAB_LESSONS");
    const std::string dir = env != nullptr && *env != '\0' ? env : PLAB_LESSONS_DIR;
    PLAB_CHECK(fs::is_directory(dir), "lessons folder '"
                                          << dir
                                          << "' not found (set PLAB_LESSONS to the repository's "
                                             "lessons/ folder)");
    return dir;
}

std::string lesson_file(const std::string& dir, int n) {
    char prefix[8];
    std::snprintf(prefix, sizeof prefix, "%02d-", n);
    std::vector<std::string> found;
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        if (starts_with(name, prefix) && e.path().extension() == ".md")
            found.push_back(e.path().string());
    }
    PLAB_CHECK(found.size() == 1, "lesson " << n << ": expected one file " << dir << "/" << prefix
                                            << "*.md, found " << found.size());
    return found[0];
}

LessonText load_lesson(const std::string& dir, int n) {
    const std::string path = lesson_file(dir, n);
    std::ifstream in(path, std::ios::binary);
    PLAB_CHECK(in, "cannot read lesson file '" << path << "'");
    std::ostringstream text;
    text << in.rdbuf();
    return parse_lesson(text.str(), path, n);
}

}  // namespace plab::viewer
