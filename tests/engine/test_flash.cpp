// FlashAttention by hand on the toy (src/toy/flash_toy.h, `plab flash`): the
// online softmax over key tiles against the whole softmax of the reference
// backend (an independent oracle: core/attention_math.h's one max, one sum).
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/registry.h"
#include "test_util.h"
#include "toy/flash_toy.h"
#include "toy/rounding.h"

namespace plab::test {
namespace {

ToyInput toy_with_keys(std::vector<float> keys) {
    ToyInput in;
    in.values.clear();
    for (std::size_t i = 0; i < keys.size(); ++i) in.values.push_back(float(2 * i + 1));
    in.queries.assign(keys.size(), 1.0f);
    in.keys = std::move(keys);
    return in;
}

TEST_CASE("flash on the toy: 2, 3, 14/3, 6 tile by tile, bitwise equal to the whole softmax",
          "[flash]") {
    auto ref = make_backend("cpu-ref");
    const FlashToyRun run = run_flash_toy(ToyInput{}, 2, *ref);
    REQUIRE(run.queries.size() == 4);
    const float want[] = {2.0f, 3.0f, 14.0f / 3.0f, 6.0f};
    for (int p = 0; p < 4; ++p) {
        const FlashQuery& q = run.queries[std::size_t(p)];
        CHECK(q.output == want[p]);
        CHECK(q.ulps == 0);
        // Tiles of 2 aligned to position 0: query p takes tiles 0..p/2.
        CHECK(q.tiles.size() == std::size_t(p / 2 + 1));
        // Equal scores: the max never moves, so every later rescale is exactly 1.
        for (std::size_t i = 1; i < q.tiles.size(); ++i) CHECK(q.tiles[i].rescale == 1.0f);
        CHECK(q.tiles.front().rescale == 0.0f);  // m_old = -inf: nothing to re-measure
        CHECK(std::isinf(q.tiles.front().m_old));
        CHECK(q.tiles.back().l == float(p + 1));  // exp(0) per key
    }
    CHECK(run.all_bitwise);
    CHECK(run.rescales == 0);
}

TEST_CASE("flash: a tile that raises the max rescales l and acc by exp(m_old - m)", "[flash]") {
    auto ref = make_backend("cpu-ref");
    const FlashToyRun run = run_flash_toy(toy_with_keys({1, 2, 3, 4}), 2, *ref);
    const FlashQuery& q = run.queries[3];
    REQUIRE(q.tiles.size() == 2);
    const FlashTile& t0 = q.tiles[0];
    const FlashTile& t1 = q.tiles[1];
    CHECK(t0.m == 2.0f);
    CHECK(t1.m_old == 2.0f);
    CHECK(t1.m == 4.0f);
    CHECK(t1.rescale == Approx(std::exp(-2.0)).epsilon(1e-6));
    // l after the tile = l before * rescale + exp(3 - 4) + exp(4 - 4), in float.
    CHECK(t1.l == Approx(t0.l * std::exp(-2.0) + std::exp(-1.0) + 1.0).epsilon(1e-6));
    // The final output is the softmax-weighted mean whatever the tiling (within a few
    // ulps: the exponentials are taken against other maxima, in another order).
    double num = 0, den = 0;
    for (int j = 0; j < 4; ++j) {
        const double e = std::exp(j + 1.0 - 4.0);
        num += e * (2 * j + 1);
        den += e;
    }
    CHECK(q.output == Approx(num / den).epsilon(1e-6));
    CHECK(run.rescales == 2);  // queries 2 and 3: their second tile raised the max
}

TEST_CASE("flash: one tile holding every key is the reference's order, so the same bits",
          "[flash]") {
    // Seeded keys and values, never zeros; any tile width gives the softmax within a
    // few ulps, and a tile as wide as the prompt gives cpu-ref's bits exactly.
    auto ref = make_backend("cpu-ref");
    ToyInput in;
    in.queries.clear();
    in.keys.clear();
    in.values.clear();
    const std::vector<float> r = random_floats(24, 7, -3.0f, 3.0f);
    for (int i = 0; i < 8; ++i) {
        in.queries.push_back(r[std::size_t(i)]);
        in.keys.push_back(r[std::size_t(8 + i)]);
        in.values.push_back(r[std::size_t(16 + i)]);
    }
    CHECK(run_flash_toy(in, 8, *ref).all_bitwise);
    CHECK(run_flash_toy(in, 64, *ref).all_bitwise);
    for (int width = 1; width <= 8; ++width) {
        INFO("tile " << width);
        const FlashToyRun run = run_flash_toy(in, width, *ref);
        for (const FlashQuery& q : run.queries) {
            // The reported distance is the real one.
            CHECK(q.ulps == ulps_between(q.output, q.full));
            // Reordered float sums of 8 positive terms: a few ulps at most (lesson 15).
            CHECK(q.ulps <= 16);
        }
    }
}

TEST_CASE("flash under a mask: empty tiles skipped, the answer the masked softmax's", "[flash]") {
    // dilated:2,2 lets query p see p and p-2: the tile of key p-1 lies inside its
    // key range but is hidden, so a kernel never loads it.
    auto ref = make_backend("cpu-ref");
    ToyInput in;
    in.queries.assign(6, 1.0f);
    in.keys = {0.5f, 1.5f, -1.0f, 2.0f, 0.25f, 1.0f};
    in.values = {1, 2, 3, 4, 5, 6};
    const FlashToyRun run = run_flash_toy(in, 1, *ref, "dilated:2,2");
    CHECK(run.mask == "dilated:2,2");
    CHECK(run.skipped == 4);  // queries 2..5: the tile of key p-1
    for (const FlashQuery& q : run.queries) {
        INFO("query " << q.position);
        CHECK(q.key_lo == (q.position >= 2 ? q.position - 2 : q.position));
        CHECK(q.key_hi == q.position);
        CHECK(q.ulps <= 4);
        for (const FlashTile& t : q.tiles) {
            if (t.kind == TileClass::empty) {
                CHECK(t.keys.empty());
                CHECK(t.key_lo == q.position - 1);
            }
        }
    }
    // Every mask kind of the grammar the toy can bind: the tiled walk stays within a
    // few ulps of the whole softmax under that mask, at every tile width.
    for (const char* spec : {"window:3", "window:2+sink:1", "chunked:4", "prefix:3", "docs:2,4",
                             "causal+alibi", "causal+softcap:2", "chunked:2|prefix:3"}) {
        for (int width : {1, 2, 4}) {
            INFO(spec << ", tile " << width);
            for (const FlashQuery& q : run_flash_toy(in, width, *ref, spec).queries)
                CHECK(q.ulps <= 16);
        }
    }
}

TEST_CASE("flash: a tile width below 1 is refused in one line", "[flash]") {
    auto ref = make_backend("cpu-ref");
    CHECK_THROWS_WITH(run_flash_toy(ToyInput{}, 0, *ref),
                      "--tile 0 must be at least 1 (keys per tile; e.g. --tile 2)");
}

TEST_CASE("plab flash prints each tile and the JSON carries every step", "[flash][cli]") {
    const CliResult text = run_cli({"flash"});
    REQUIRE(text.exit_code == 0);
    CHECK(text.out.find("output acc / l = 4.66666651; whole softmax 4.66666651 (14/3 = mean of "
                        "v0..v2); bitwise equal: yes") != std::string::npos);
    CHECK(text.out.find("4 of 4 outputs bitwise equal to the whole softmax") != std::string::npos);
    const CliResult js = run_cli({"flash", "--k", "1,2,3,4", "--tile", "1", "--json"});
    REQUIRE(js.exit_code == 0);
    const nlohmann::json j = nlohmann::json::parse(js.out);
    CHECK(j["tile"] == 1);
    REQUIRE(j["queries"].size() == 4);
    const nlohmann::json& steps = j["queries"][3]["steps"];
    REQUIRE(steps.size() == 4);
    CHECK(steps[0]["m_old"].is_null());
    for (const auto& s : steps)
        for (const char* key : {"m", "l", "rescale", "acc", "scores", "keys", "seen", "class"})
            CHECK(s.contains(key));
    CHECK(j["rescales"] == 6);
    const CliResult bad = run_cli({"flash", "--k", "1,2", "--v", "1,2,3"});
    CHECK(bad.exit_code == 1);
    CHECK(bad.err.rfind("plab: error: ", 0) == 0);
    CHECK(bad.err.find('\n') == bad.err.size() - 1);  // one line
    const CliResult masked =
        run_cli({"flash", "--mask", "dilated:2,2", "--tile", "1", "--v", "1,2,3,4,5,6", "--json"});
    REQUIRE(masked.exit_code == 0);
    const nlohmann::json mj = nlohmann::json::parse(masked.out);
    CHECK(mj["skipped"] == 4);
    CHECK(mj["queries"][5]["steps"][1]["class"] == "empty");
    const CliResult bad_mask = run_cli({"flash", "--mask", "tiles:4"});
    CHECK(bad_mask.exit_code == 1);
    CHECK(bad_mask.err.find("unknown mask kind 'tiles'") != std::string::npos);
}

}  // namespace
}  // namespace plab::test
