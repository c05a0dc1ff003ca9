// The prompts file of `plab generate --prompts FILE`: many requests for one engine.
//
// Two formats, and the file's first non-blank line decides which (one format
// per file, so a text prompt that happens to contain a brace is never half
// read as JSON):
//   * plain text: one prompt per line, taken as written (only the newline and
//     a Windows '\r' before it are removed); a prompt cannot hold a newline.
//   * JSON Lines, when the first non-blank line starts with '{': one object
//     per line, {"prompt": "text", "max_new_tokens": 8}; "prompt" is required
//     (a non-empty string), "max_new_tokens" optional (an integer >= 1; the
//     command's -n when absent). Any other key is refused, so a typo such as
//     "max_tokens" is not silently ignored. A prompt with newlines is written
//     with "\n" inside the JSON string.
// In both, a blank line (empty or only spaces and tabs) is skipped: it
// separates, it is not a request. A file with no prompt at all is an error.
// Every error names the file and the line (1-based, as an editor counts).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace plab::cli {

struct PromptLine {
    int line = 0;  // 1-based line of the file it came from
    std::string text;
    std::optional<int> max_new_tokens;  // from JSON Lines only
};

// Parses a prompts file's text (read with cli/common.h read_text_file, which
// refuses files over kMaxPromptFileBytes); `path` names it in messages.
// Throws plab::Error with one line naming the file, the line and the fix.
// No file access here, so the fuzz build links it alone.
std::vector<PromptLine> parse_prompts(const std::string& text, const std::string& path);

}  // namespace plab::cli
