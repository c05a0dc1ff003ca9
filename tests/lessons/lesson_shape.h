// One shape for every lesson (issue 45): a lecturer hands out any of them and
// a student finds the same parts in the same places. lesson_runner --strict
// checks it:
//
//   # Lesson N — Title
//   <!-- checks: K -->
//   **You will learn**
//   - 2 to 4 objectives, one bullet each
//   **You need:** the lessons before it (or "nothing before this lesson")
//   **Time:** about M minutes
//   ...steps: before every console block of the lesson's body, a paragraph
//      "**Predict:** ...?" asks what the command will print, and the block
//      shows the checked result...
//   ## Takeaway        exactly 5 bullets
//   ## Exercises       numbered questions, then <details> with the answers
//   ## Sources
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lesson_format.h"

namespace plab::lessons {

// (line, what is missing or misplaced); empty when the lesson has the shape.
std::vector<std::pair<int, std::string>> shape_problems(const Lesson& lesson);

}  // namespace plab::lessons
