// `plab eval` on the shipped model meets the targets of the trained-model issue:
// >= 90% on templated completions, a head with induction score >= 0.5, and a
// head that mostly (> 50%) attends to the previous token. Checked through the
// CLI's --json output, the way a course grader would.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "model_test_util.h"
#include "test_util.h"

using namespace plab::test;

TEST_CASE("plab eval --json: the shipped model meets the targets", "[model][eval][cli][shipped]") {
    const auto r = run_cli({"eval", "--json", "--stories", "60", "--max-completions", "200"});
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    INFO(j.dump(1));
    REQUIRE(j.at("stories").get<int>() == 60);
    REQUIRE(j.at("completions").at("total").get<int>() == 200);
    CHECK(j.at("next_token_accuracy").get<double>() > 0.5);
    CHECK(j.at("loss").get<double>() < 2.0);
    REQUIRE(j.at("completions").at("accuracy").get<double>() >= 0.90);
    REQUIRE(j.at("best_induction").at("score").get<double>() >= 0.5);
    REQUIRE(j.at("best_previous_token").at("score").get<double>() > 0.5);
    REQUIRE(j.at("heads").size() == 16);  // 4 layers x 4 heads, every one scored
}

TEST_CASE("plab eval: bad inputs give one clear line", "[model][eval][cli][errors]") {
    auto r = run_cli({"eval", "--heldout", "/nonexistent/heldout.txt"});
    REQUIRE(r.exit_code != 0);
    REQUIRE(r.err.find("cannot read held-out file") != std::string::npos);
    r = run_cli({"eval", "--model", repo_path("tests/golden/models/rand_gqa_h3_dh10"), "--json",
                 "--trials", "1"});
    // A model without held-out files still gets its heads scored (random weights: no targets).
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j.at("heads").size() == 2 * 3);
    REQUIRE(j.at("completions").at("total").get<int>() == 0);
}
