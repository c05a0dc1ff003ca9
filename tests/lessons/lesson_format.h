// The format of an executable lesson (or README): its console blocks, the
// "<!-- expect" comments that hold their checks, and how a template line
// matches a printed line. lesson_runner.cpp has the whole story; this file is
// the reading and the matching, with no command run.
#pragma once

#include <cstddef>
#include <regex>
#include <string>
#include <vector>

namespace plab::lessons {

// "…": in a template, any text; alone on a shown line, output lines left out.
inline const std::string kEllipsis = "\xE2\x80\xA6";

// `s` without trailing spaces, tabs and carriage returns (how lines are compared).
std::string rstrip(std::string s);

// One command and its lines: `expected` is the template (markers allowed),
// `shown` what the reader sees (a real run, no markers).
struct Step {
    int line = 0;  // of the "$ " line: in the expect comment when there is one
    std::string command;
    std::vector<std::string> expected;
    std::vector<std::string> shown;
};

// A ```console block and, when its output needs markers, the
// "<!-- expect ... -->" comment right above it that holds the template.
// Line numbers are 1-based indices into Lesson::lines.
struct Block {
    int comment_open = 0, comment_close = 0;  // 0 when the block has no comment
    int fence_open = 0, fence_close = 0;
    std::size_t indent = 0;     // of the fence (a block inside a list item)
    std::vector<Step> steps;    // from the comment, or from the block itself
    std::vector<Step> visible;  // the block's own commands and lines
};

// A "<!-- check: ... -->" line: a relation between captured numbers.
struct Check {
    int line = 0;
    std::string relation;
};

struct Lesson {
    std::vector<std::string> lines;  // the file, for --update to rewrite
    std::vector<Block> blocks;
    std::vector<Check> checks;
};

// Reads a lesson. Malformed structure (a check over two lines, an expect
// comment not followed by a console block, a fence never closed) throws
// std::runtime_error naming file and line.
Lesson parse(const std::string& path);

// Why `b`'s visible block and its expect comment disagree on the commands
// ("" when they agree, or when there is no comment).
std::string commands_mismatch(const Block& b);

// Whether a line the reader sees holds checker markup: a "{{...}}" capture, a
// "[[a..b]]" range, "[[gpu-form]]", or a "…" inside a line ("…" alone on a
// line stands for output lines left out and is allowed).
bool has_markup(const std::string& shown_line);

// Whether a line the reader sees holds an absolute path ("/home/…/assets/model"):
// the path of the machine the lesson was run on, which a reader's run never
// prints. Programs print paths as the user gave them.
bool has_absolute_path(const std::string& shown_line);

// One number marker of a template line, in the order of the capture groups:
// a "[[a..b]]" range or a "{{name}}" / "{{name~}}" / "{{name=text}}" capture.
struct Slot {
    double lo = 0, hi = 0;  // range
    std::string name;       // capture (empty for a range)
    std::string literal;    // capture's required text (empty: any number)
    bool varying = false;   // "{{name~}}": may differ between the shown run and today's
};

// A template line as a regular expression, plus its number markers.
struct Pattern {
    std::regex re;
    std::vector<Slot> slots;
};

// Throws std::runtime_error on a malformed marker.
Pattern pattern_of(const std::string& expected);

// A number a "{{name}}" marker read from a printed line.
struct Captured {
    std::string name;
    std::string text;  // as printed
    double value = 0;
    bool varying = false;
};

// How a step's template lines were found in an output, in order.
struct StepMatch {
    std::string why;                 // "" when every template line was found
    std::vector<std::size_t> at;     // the output line each template line matched
    std::vector<Captured> captured;  // every capture, in the order of the lines
};

// Finds each template line in `output` in order (lines in between may be
// skipped); a template line that does not parse, or is not found, ends the
// match with `why` set (naming a ranged number that was out of range).
StepMatch match_step(const std::vector<std::string>& expected,
                     const std::vector<std::string>& output);

}  // namespace plab::lessons
