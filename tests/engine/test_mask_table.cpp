// The mask grammar's table (runtime/mask_grammar.h, mask_item_kinds): one row
// per item kind, read by the parser, its messages and `plab mask --help`. These
// cases hold the table and its users to each other.
#include <catch2/catch.hpp>
#include <string>

#include "core/error.h"
#include "runtime/mask_grammar.h"
#include "test_util.h"

namespace plab::test {
namespace {

std::string error_of(const std::string& spec) {
    try {
        parse_mask_spec(spec);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST_CASE(
    "the mask table: every row is in the help, in order, and in the refusal of an unknown kind",
    "[mask]") {
    const std::string help = mask_grammar_help();
    const std::string unknown = error_of("tiles:4");
    REQUIRE(!unknown.empty());
    std::size_t at = 0;
    for (const MaskItemKind& k : mask_item_kinds()) {
        INFO(k.name);
        // Its help lines start with its first form, after the rows before it.
        const std::string first_form =
            std::string(k.forms).substr(0, std::string(k.forms).find(", "));
        const std::size_t found = help.find("\n  " + first_form + " ", at);
        CHECK(found != std::string::npos);
        if (found != std::string::npos) at = found + 1;
        CHECK(std::string(k.help).rfind("  " + first_form, 0) == 0);
        CHECK(unknown.find(k.forms) != std::string::npos);
    }
}

TEST_CASE("the mask table: each row's kind is what the parser reads", "[mask]") {
    for (const MaskItemKind& k : mask_item_kinds()) {
        INFO(k.name);
        // The kind without its value: a row taking one asks for it by name.
        const std::string bare = error_of(k.name);
        const bool takes_value = std::string(k.forms).find(':') != std::string::npos;
        if (takes_value) {
            CHECK(bare.find("mask item '" + std::string(k.name) + "' needs a value") !=
                  std::string::npos);
        } else {
            CHECK(bare.empty());
        }
        // A modifier alone in an OR group is refused; a mask kind is not a modifier.
        if (k.modifier) {
            const std::string alone =
                std::string("causal|") + (takes_value ? std::string(k.name) + ":2" : k.name);
            CHECK(error_of(alone).find("has no mask, only modifiers") != std::string::npos);
        }
    }
}

TEST_CASE("plab mask --help prints the table's grammar", "[mask][cli]") {
    const CliResult r = run_cli({"mask", "--help"});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find(mask_grammar_help()) != std::string::npos);
}

}  // namespace
}  // namespace plab::test
