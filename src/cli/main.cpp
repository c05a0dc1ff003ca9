// `plab`: the Prefill Lab command line. One subcommand per file (cmd_*.cpp),
// listed in one table (commands.h);
// how it introduces itself and answers a usage mistake: front_door.h.
//
// Exit codes: 0 done (and for `plab`, `plab --help`, `plab --version`);
// 1 bad input or a usage mistake, one line "plab: error: ..." on stderr;
// 3 an internal error (a bug), with its location.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/front_door.h"
#include "core/error.h"
#include "core/machine_override.h"

int main(int argc, char** argv) {
    CLI::App app{"how an LLM processes its prompt before the first new token"};
    app.require_subcommand(1);
    // One row per command, in the order `plab --help` lists them (cli/commands.h).
    for (const plab::cli::CommandEntry& c : plab::cli::command_table()) c.add(app);

    const std::vector<std::string> args(argv + 1, argv + argc);
    // `plab` alone introduces itself, as `plab --help` does; the version flag
    // is answered before parsing, so no command is required with it.
    if (args.empty() || (args.size() == 1 && (args[0] == "--help" || args[0] == "-h"))) {
        std::cout << plab::cli::overview(app);
        return 0;
    }
    if (args.size() == 1 && args[0] == "--version") {
        std::cout << plab::cli::version_text();
        return 0;
    }
    try {
        plab::check_machine_override();  // PLAB_CPU_CACHES, PLAB_CPU_THREADS: before any output
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);  // `plab COMMAND --help`: CLI11's page of the command's options
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::cerr << "plab: error: " << plab::cli::usage_error(app, e, args) << "\n";
        return 1;
    } catch (const plab::Error& e) {
        std::cerr << "plab: error: " << e.what() << "\n";
        return 1;
    } catch (const plab::InternalError& e) {
        std::cerr << "plab: " << e.what() << " (please report this bug)\n";
        return 3;
    } catch (const std::bad_alloc&) {
        std::cerr << "plab: error: out of memory\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "plab: error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
