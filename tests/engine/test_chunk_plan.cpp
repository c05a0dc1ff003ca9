#include <catch2/catch.hpp>

#include "core/error.h"
#include "runtime/chunk_plan.h"

using namespace plab;

TEST_CASE("chunk plans parse", "[chunk_plan]") {
    REQUIRE(parse_chunk_plan("full", 7).lengths == std::vector<int>{7});
    REQUIRE(parse_chunk_plan("3", 7).lengths == std::vector<int>{3, 3, 1});
    REQUIRE(parse_chunk_plan("3,1,3", 7).lengths == std::vector<int>{3, 1, 3});
    REQUIRE(parse_chunk_plan("7", 7).lengths == std::vector<int>{7});
    REQUIRE(parse_chunk_plan("3,1,3", 7).to_string() == "3,1,3");
}

TEST_CASE("bad chunk plans say what is wrong and what is valid", "[chunk_plan]") {
    REQUIRE_THROWS_WITH(parse_chunk_plan("0", 5), Catch::Contains("must be at least 1"));
    REQUIRE_THROWS_WITH(parse_chunk_plan("2,-1,4", 5), Catch::Contains("must be at least 1"));
    REQUIRE_THROWS_WITH(parse_chunk_plan("2,2", 5), Catch::Contains("sums to 4"));
    REQUIRE_THROWS_WITH(parse_chunk_plan("2,2", 5), Catch::Contains("summing to the prompt's 5"));
    REQUIRE_THROWS_WITH(parse_chunk_plan("a,b", 5), Catch::Contains("not a whole number"));
    REQUIRE_THROWS_WITH(parse_chunk_plan("", 5), Catch::Contains("empty chunk plan"));
    REQUIRE_THROWS_WITH(parse_chunk_plan("2,,3", 5), Catch::Contains("not a whole number"));
    REQUIRE_THROWS_WITH(parse_chunk_plan("9,1", 5), Catch::Contains("longer than the prompt"));
    REQUIRE(parse_chunk_plan("9", 5).lengths == std::vector<int>{5});  // a size, not a length
    REQUIRE_THROWS_AS(parse_chunk_plan("full", 0), Error);
}

TEST_CASE("all compositions of T", "[chunk_plan]") {
    const auto plans = all_chunk_plans(10);
    REQUIRE(plans.size() == 512);
    for (const auto& p : plans) REQUIRE(p.n_tokens() == 10);
    // All distinct.
    std::vector<std::string> names;
    for (const auto& p : plans) names.push_back(p.to_string());
    std::sort(names.begin(), names.end());
    REQUIRE(std::unique(names.begin(), names.end()) == names.end());
}

TEST_CASE("chunk plan: starts lists each chunk's first position, then the end", "[chunk_plan]") {
    CHECK(plab::parse_chunk_plan("3,1,4", 8).starts() == std::vector<int>{0, 3, 4, 8});
    CHECK(plab::parse_chunk_plan("full", 5).starts() == std::vector<int>{0, 5});
    CHECK(plab::fixed_chunk_plan(7, 3).starts() == std::vector<int>{0, 3, 6, 7});
}
