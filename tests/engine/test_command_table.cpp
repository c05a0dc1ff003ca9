// The table of `plab`'s commands (src/cli/commands.h): `plab --help` lists its
// rows in order, and the command reference (src/cli/README.md) has a row for
// each. A command added to one and not the other fails here.
#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace plab::test {
namespace {

// The command names of `plab --help`, in its order ("  toy           the [2,4...").
std::vector<std::string> overview_commands() {
    const CliResult r = run_cli({"--help"});
    REQUIRE(r.exit_code == 0);
    std::vector<std::string> names;
    std::istringstream lines(r.out.substr(r.out.find("Commands:\n")));
    std::string line;
    std::getline(lines, line);
    while (std::getline(lines, line) && line.rfind("  ", 0) == 0)
        names.push_back(line.substr(2, line.find(' ', 2) - 2));
    return names;
}

TEST_CASE("plab --help and the command reference list the same commands", "[cli]") {
    const std::vector<std::string> listed = overview_commands();
    REQUIRE(listed.size() >= 10);
    CHECK(listed.front() == "toy");  // lesson 1's command first
    std::ifstream in(PLAB_TESTS_DIR "/../src/cli/README.md");
    std::ostringstream os;
    os << in.rdbuf();
    const std::string text = os.str();
    // The reference's first table: rows start with "| `plab NAME`" (several per row
    // for the model-file commands); `plab --version` is the version command.
    const std::string table = text.substr(0, text.find("\n## "));
    std::set<std::string> documented;
    const std::regex name(R"(`plab (--version|[a-z-]+)`)");
    std::istringstream lines(table);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("| `plab", 0) != 0) continue;
        const std::string first_cell = line.substr(0, line.find(" | ", 2));
        for (std::sregex_iterator it(first_cell.begin(), first_cell.end(), name), end; it != end;
             ++it)
            documented.insert((*it)[1] == "--version" ? "version" : std::string((*it)[1]));
    }
    CHECK(documented == std::set<std::string>(listed.begin(), listed.end()));
}

}  // namespace
}  // namespace plab::test
