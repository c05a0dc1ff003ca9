// The table of commands (commands.h). Each command's add function lives in its
// own file and is declared only here: the table is the one list of them.
#include "cli/commands.h"

#include <iostream>

#include "cli/front_door.h"

namespace plab::cli {

void add_toy_command(CLI::App& app);
void add_flash_command(CLI::App& app);
void add_prefill_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_random_model_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_compare_command(CLI::App& app);
void add_mask_command(CLI::App& app);
void add_rounding_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_grade_command(CLI::App& app);
void add_grade_class_command(CLI::App& app);

namespace {

void add_version_command(CLI::App& app) {
    app.add_subcommand("version", "print plab's version and the model files it reads")
        ->callback([] { std::cout << version_text(); });
}

}  // namespace

std::span<const CommandEntry> command_table() {
    // clang-format off
    static const CommandEntry kCommands[] = {
        {"toy",          add_toy_command,          "lessons/01-toy-example.md"},
        {"flash",        add_flash_command,        "lessons/01-toy-example.md"},
        {"prefill",      add_prefill_command,      "lessons/02-prefill-and-the-kv-cache.md"},
        {"generate",     add_generate_command,     "lessons/05-ttft-is-not-prefill.md"},
        {"bench",        add_bench_command,        "lessons/06-compute-vs-memory.md"},
        {"info",         add_info_command,         "lessons/02-prefill-and-the-kv-cache.md"},
        {"eval",         add_eval_command,         ""},
        {"convert",      add_convert_command,      ""},
        {"random-model", add_random_model_command, ""},
        {"tokenize",     add_tokenize_command,     "lessons/05-ttft-is-not-prefill.md"},
        {"compare",      add_compare_command,      "lessons/04-bitwise-equivalence.md"},
        {"mask",         add_mask_command,         "lessons/13-masks.md"},
        {"rounding",     add_rounding_command,     "lessons/15-reduction-order.md"},
        {"serve",        add_serve_command,        "lessons/09-continuous-batching.md"},
        {"grade",        add_grade_command,        "lessons/assignments/README.md"},
        {"grade-class",  add_grade_class_command,  "lessons/assignments/README.md"},
        {"version",      add_version_command,      ""},
    };
    // clang-format on
    return kCommands;
}

}  // namespace plab::cli
