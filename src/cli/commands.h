// The table of `plab`'s commands: one row each, in the order `plab --help`
// lists them. main.cpp adds every row to the app; the docs check compares the
// table with src/cli/README.md's. Adding a command: its file cmd_NAME.cpp
// (options, compute, result, print), its row in commands.cpp, and its test
// (src/cli/README.md, "How to add a command").
#pragma once

#include <CLI/CLI.hpp>
#include <span>

namespace plab::cli {

struct CommandEntry {
    const char* name;            // as typed: `plab NAME`
    void (*add)(CLI::App& app);  // adds the subcommand NAME with its options
    const char* lesson;          // the lesson that teaches it ("" for none)
};

std::span<const CommandEntry> command_table();

}  // namespace plab::cli
