// `plab`: the Prefill Lab command line. One subcommand per file (cmd_*.cpp).
//
// Errors: bad input prints one line "plab: error: ..." and exits 1; an
// internal error (a bug) prints its location and exits 3; usage errors are
// CLI11's own messages (exit 105-109).
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/common.h"
#include "core/error.h"

int main(int argc, char** argv) {
    CLI::App app{"Prefill Lab: how an LLM processes its prompt before the first new token"};
    app.require_subcommand(1);
    plab::cli::add_toy_command(app);
    plab::cli::add_prefill_command(app);
    plab::cli::add_generate_command(app);
    plab::cli::add_bench_command(app);
    plab::cli::add_info_command(app);
    plab::cli::add_eval_command(app);
    plab::cli::add_convert_command(app);
    plab::cli::add_random_model_command(app);
    plab::cli::add_compare_command(app);
    plab::cli::add_mask_command(app);
    plab::cli::add_rounding_command(app);
    plab::cli::add_serve_command(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
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
