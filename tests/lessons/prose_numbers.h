// The numbers a reader sees in a lesson's text (not in its console blocks),
// and how each one is accounted for. A strict lesson (lesson_runner --strict)
// leaves none unaccounted: a number in the prose is
//   "shown"      — the same value appears in a console block (a command or its
//                  checked output), an expect template or a check of the same
//                  "## " section, or in a `plab ...`/`--flag` code span there;
//   "arithmetic" — part of a worked equation the runner recomputes, such as
//                  "2 · 16 · 512 = 16384" or "26/3 ≈ 8.667" (one that does not
//                  hold fails the lesson);
//   "checked"    — followed by "<!--= EXPR -->": EXPR, over the captured
//                  numbers, must equal it within half a unit of its last
//                  printed digit (a check like any other);
//   "quoted"     — covered by "<!--quoted: SOURCE -->" later in its
//                  paragraph: a figure from a paper, a datasheet or a model
//                  card, with where it comes from;
// or exempt: headings, the "**Time:**" estimate, "## Sources", lesson/exercise/step/section references,
// list numbers, dates and years, version-like a.b.c, numbers inside words or
// identifiers (fp32, sm_90, stories15M), code spans, links and HTML tags.
#pragma once

#include <string>
#include <vector>

#include "lesson_format.h"

namespace plab::lessons {

struct ProseNumber {
    int line = 0;
    std::string text;
    double value = 0;
    std::string how;  // "" while unaccounted; "shown", "arithmetic", "checked" or "quoted"
};

struct ProseScan {
    std::vector<ProseNumber> numbers;
    // One per "<!--= EXPR -->": "(EXPR) == number within half-unit", at its line.
    std::vector<Check> number_checks;
    // "LINE: why": an equation in the text that does not hold, a comment the
    // runner does not know, an annotation with no number before it.
    std::vector<std::pair<int, std::string>> errors;
};

ProseScan scan_prose(const Lesson& lesson);

}  // namespace plab::lessons
