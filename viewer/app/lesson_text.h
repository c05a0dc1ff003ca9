// A lesson's Markdown as a list of blocks the viewer's lesson pane can draw.
//
// What it teaches: nothing about prefill; it lets `plab-viewer --lesson N` show
// lessons/NN-*.md beside the panel that illustrates it, read at run time so
// the text on screen is the text the lesson runner checks. Left out on purpose:
// a full Markdown renderer. Headings, paragraphs, bullet and numbered items,
// fenced code, tables, pictures, rules and <details> sections are recognised;
// inline emphasis is dropped and links become "text (url)". A console block
// is shown as written: a real run with real numbers (the lesson runner refuses
// markers there). HTML comments (the runner's checks and the templates it
// matches output against) are not shown.
//
// The "Try:" convention (lessons/README.md): a line or list item
//     - Try: cut the prompt into chunks of 4 — `plab-viewer --lesson 3 --chunks 4`
// is a step the reader can run, and in lesson mode a button that opens the
// panel as that command would. It must end in one code span holding
// `plab-viewer --lesson N` (N = this lesson) and the viewer flags to apply.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace plab::viewer {

enum class BlockKind {
    kHeading,       // level 1..6
    kParagraph,     // lines joined with spaces
    kBullet,        // "- " or "* " item; level 0 = top, 1 = nested
    kNumbered,      // "1. " item; `marker` holds "1."
    kCode,          // fenced block; `marker` holds its language ("console", "")
    kTable,         // `cells`: rows of cells, the header row first
    kPicture,       // "![alt](path)" on a line of its own; text = alt, marker = path
    kRule,          // "---"
    kTry,           // a "Try:" step: text = what it shows, args = the viewer flags
    kDetailsBegin,  // "<details>"; text = its <summary>
    kDetailsEnd,    // "</details>"
};

struct LessonBlock {
    BlockKind kind = BlockKind::kParagraph;
    int line = 0;   // 1-based line of the file where the block starts
    int level = 0;  // heading level, or list nesting
    std::string text;
    std::string marker;
    std::vector<std::vector<std::string>> cells;  // kTable
    // kTry: the command's words after `plab-viewer` ("--lesson", "3", "--chunks", "4"),
    // and the command as written, for the button's tooltip.
    std::vector<std::string> args;
    std::string command;
};

struct LessonText {
    std::string path;   // the file it was read from
    std::string title;  // the first level-1 heading
    int n_lines = 0;
    std::vector<LessonBlock> blocks;
    int count(BlockKind kind) const;
};

// Parses a lesson. `where` names it in errors ("lessons/03-chunked-prefill.md").
// A "Try:" step without its `plab-viewer --lesson N ...` code span, or naming another
// lesson than `lesson` (0: any), throws plab::Error with the file and line.
LessonText parse_lesson(std::string_view markdown, const std::string& where, int lesson = 0);

// One line of Markdown as plain text: **bold** and *emphasis* marks dropped,
// [text](url) -> "text (url)".
std::string inline_text(std::string_view line);

// The lessons folder: $PLAB_LESSONS, else the source tree's lessons/ (baked in at
// configure time, like the default model). Throws plab::Error when it is missing.
std::string lessons_dir();
// The file of lesson `n` in `dir` (NN-*.md); throws plab::Error naming what was looked for.
std::string lesson_file(const std::string& dir, int n);
// Reads and parses lesson `n` from `dir`.
LessonText load_lesson(const std::string& dir, int n);

// "Try:" lines of a file counted the plain way (outside fences and comments,
// after a list marker), independent of parse_lesson: the self-check compares them.
int count_try_lines(std::string_view markdown);

}  // namespace plab::viewer
