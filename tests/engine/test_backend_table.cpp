// The backend table (runtime/registry.h): one row per backend, read by
// make_backend, backend_names and the docs. These cases hold the table and its
// users to each other, so a row that lies (a reference that is not one, a name
// the factory does not answer to) fails here, not in a lesson.
#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/error.h"
#include "runtime/registry.h"

namespace plab::test {
namespace {

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream os;
    os << in.rdbuf();
    return os.str();
}

TEST_CASE("the backend table: every row makes the backend it names", "[registry]") {
    std::set<std::string> names;
    for (const BackendEntry& row : backend_table()) {
        INFO(row.name);
        CHECK(names.insert(row.name).second);  // names are unique
        CHECK(std::string(row.summary).size() > 10);
        const auto backend = make_backend(row.name);
        // The name as printed: "gpu-ref (emulated)" on a machine without a GPU.
        CHECK(backend->name().rfind(row.name, 0) == 0);
        CHECK(backend->is_reference() == row.reference);
    }
    // The reference the others are compared with comes first.
    REQUIRE(!backend_table().empty());
    CHECK(std::string(backend_table()[0].name) == "cpu-ref");
}

TEST_CASE("backend_names lists the table in its order", "[registry]") {
    std::vector<std::string> rows;
    for (const BackendEntry& row : backend_table()) rows.push_back(row.name);
    CHECK(backend_names() == rows);  // the native build has every row
}

TEST_CASE("an unknown backend is refused with the table's names", "[registry]") {
    try {
        make_backend("tpu");
        FAIL("make_backend(\"tpu\") returned");
    } catch (const Error& e) {
        std::string want = "unknown backend 'tpu'; valid backends: ";
        for (std::size_t i = 0; i < backend_table().size(); ++i)
            want += (i > 0 ? ", " : "") + std::string(backend_table()[i].name);
        CHECK(std::string(e.what()) == want);
    }
}

TEST_CASE("src/README.md's backend table has one row per backend, in order", "[registry]") {
    // The table a reader adding a backend starts from (src/README.md, "backends").
    const std::string text = read_text(PLAB_TESTS_DIR "/../src/README.md");
    const std::size_t section = text.find("\n## backends\n");
    REQUIRE(section != std::string::npos);
    const std::string body = text.substr(section, text.find("\n## ", section + 1) - section);
    std::vector<std::string> rows;  // "| `cpu-ref` | CPU | ..." lines: the backend rows
    std::istringstream lines(body);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("| `", 0) != 0) continue;
        const std::string name = line.substr(3, line.find('`', 3) - 3);
        if (line.find(" | ", 3) != line.find('`', 3) + 1)
            continue;  // a file row ("`a.h`, `a.cpp`")
        if (name.find('.') == std::string::npos) rows.push_back(name);
    }
    std::vector<std::string> want;
    for (const BackendEntry& row : backend_table()) want.push_back(row.name);
    CHECK(rows == want);
}

}  // namespace
}  // namespace plab::test
