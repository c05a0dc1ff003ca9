// How `plab` introduces itself and answers a usage mistake: the command list
// shown by `plab` alone and `plab --help`, `plab --version`, and the one-line
// `plab: error: ...` for everything the argument parser (CLI11) rejects, with
// the nearest known command or option named ("did you mean --chunks?").
//
// Why a file of its own: the commands (cmd_*.cpp) declare their options; this
// file only reads those declarations, so a new option is suggested, listed and
// checked without being written down twice.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace plab::cli {

// `plab` / `plab --help`: what the tool is, every command with its one-line
// summary, and where to start (lesson 1).
std::string overview(const CLI::App& app);

// `plab --version` / `plab version`: "plab <version>" on the first line, then
// the model files and tokenizers this build reads and whether it has native
// CUDA kernels.
std::string version_text();

// The one line (without "plab: error: " and the newline) that answers a parse
// error, for the command line `args` (argv without the program name).
std::string usage_error(const CLI::App& app, const CLI::ParseError& e,
                        const std::vector<std::string>& args);

// The candidate closest to `word` (edit distance, a prefix counts as close), or
// "" when none is close enough to be a likely typo.
std::string closest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace plab::cli
