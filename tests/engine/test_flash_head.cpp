// FlashAttention by hand on a model head (src/toy/flash_head.h, `plab flash
// --model`): the CPU port of the gpu kernel's order against the emulated
// kernel's own recorded state (bitwise at the kernel's tile), and every walk
// against cpu-ref's whole softmax on the same q, k, v (an independent oracle:
// core/attention_math.h, one max, one sum in key order).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "model/weights.h"
#include "runtime/mask_grammar.h"
#include "test_util.h"
#include "toy/flash_head.h"
#include "toy/flash_walk.h"

namespace plab::test {
namespace {

// Past 256 keys (two key segments), GQA (4 query heads over 2 KV heads).
struct HeadCase {
    ModelConfig config = small_config(64, 2, 4, 2, 16, 96, 61, 320);
    Weights weights = make_random_weights(config, 63);
    std::vector<int32_t> tokens = random_tokens(300, 61, 17);
    FlashHeadRun run(const std::string& chunks, const std::string& mask, int tile, int layer = 1,
                     int head = 3, const std::string& backend = "gpu") const {
        FlashHeadOptions o;
        o.layer = layer;
        o.head = head;
        o.tile = tile;
        o.mask_spec = mask;
        o.backend = backend;
        MaskContext context;
        context.tokens = tokens;
        context.n_heads = config.n_heads;
        const BoundMask m = make_mask(mask, context);
        return run_flash_head(weights, tokens, parse_chunk_plan(chunks, 300), m, o);
    }
};

TEST_CASE("flash head at the kernel's tile: the port's every state equals the emulated kernel's",
          "[flash]") {
    const HeadCase hc;
    for (const char* mask : {"causal", "window:40"}) {
        INFO("mask " << mask);
        const FlashHeadRun r = hc.run("100,7,193", mask, 0);
        REQUIRE(r.key_tile == r.kernel_key_tile);
        REQUIRE(r.recorded);
        REQUIRE(r.kernel_states == static_cast<long long>(r.walk.states.size()));
        REQUIRE(r.kernel_states > 300);  // every row, more than one tile each
        CHECK(r.port_matches_kernel);
        // The same order gives the same bits: the port's output is the gpu backend's.
        CHECK(r.vs_gpu.max_ulps == 0);
        require_not_all_zero(r.output, "the head's output");
        // A tiled order is not cpu-ref's order: within the tolerance, stated in flash_head.h.
        CHECK(r.vs_reference.within());
        CHECK(r.gpu_vs_reference.within());
        CHECK(r.unreached > 0);  // causal: the first query tiles stop before the last key tiles
        if (std::string(mask) == "window:40") CHECK(r.skipped > 0);
    }
}

TEST_CASE("flash head at other tiles: another order, within the tolerance, not recorded",
          "[flash]") {
    const HeadCase hc;
    for (int tile : {1, 5, 16, 100, 512}) {
        INFO("tile " << tile);
        const FlashHeadRun r = hc.run("300", "causal", tile, 0, 0);
        CHECK_FALSE(r.recorded);
        CHECK(r.key_tile == tile);
        CHECK(r.vs_gpu.within());
        CHECK(r.vs_reference.within());
    }
    // One tile per pair and segment at tile 16: other sums than the kernel's 64.
    CHECK(hc.run("300", "causal", 16, 0, 0).vs_gpu.differing > 0);
}

TEST_CASE("flash head without the gpu backend (the web page): cpu-ref's inputs and the port alone",
          "[flash]") {
    const HeadCase hc;
    const FlashHeadRun r = hc.run("100,7,193", "causal", 0, 1, 3, "cpu-ref");
    CHECK(r.backend == "cpu-ref");
    CHECK_FALSE(r.recorded);  // no kernel ran: nothing read from a tap
    CHECK(r.key_tile == 64);  // no kernel to ask: the gpu kernel's tile as the port knows it
    // cpu-ref's own output is the whole softmax on these inputs, bit for bit...
    CHECK(r.gpu_vs_reference.max_ulps == 0);
    // ...and the walk in the gpu kernel's order is within the tolerance of it.
    CHECK(r.vs_gpu.within());
    CHECK(r.vs_reference.within());
}

TEST_CASE("flash head: chunked equals whole at the kernel's tile (fixed absolute tiles)",
          "[flash]") {
    const HeadCase hc;
    const FlashHeadRun whole = hc.run("full", "causal", 0);
    const FlashHeadRun chunked = hc.run("100,7,193", "causal", 0);
    require_bitwise_equal(chunked.output, whole.output, "the walk's output, chunked vs whole");
    require_bitwise_equal(chunked.gpu, whole.gpu, "the gpu backend's, chunked vs whole");
}

TEST_CASE("flash head as a walk: every tile a step and every state a row (the viewer's scene)",
          "[flash]") {
    const HeadCase hc;
    const FlashHeadRun r = hc.run("100,7,193", "window:40", 0);
    const FlashWalk w = flash_walk_of(r);
    REQUIRE(w.steps.size() == r.walk.tiles.size());
    std::size_t rows = 0;
    for (const FlashWalkStep& s : w.steps) {
        rows += s.rows.size();
        if (s.kind == TileClass::empty) CHECK(s.rows.empty());
        for (const FlashWalkRow& row : s.rows) {
            CHECK(row.query >= s.query_lo);
            CHECK(row.query <= s.query_hi);
        }
    }
    CHECK(rows == r.walk.states.size());
    CHECK(w.skipped == r.skipped + r.unreached);
    CHECK(w.chunk_starts == std::vector<int>{0, 100, 107});
    REQUIRE(w.output.size() == 300);
    CHECK(w.output[299] == r.output[299 * std::size_t(r.head_dim)]);
    CHECK(w.scores.size() == 300u * 300u);
}

TEST_CASE("flash head: segments and bad requests", "[flash]") {
    CHECK(flash_segment_keys(64) == 256);
    CHECK(flash_segment_keys(16) == 256);
    CHECK(flash_segment_keys(3) == 258);    // the next multiple of two tiles
    CHECK(flash_segment_keys(200) == 400);  // one pair
    const HeadCase hc;
    REQUIRE_THROWS_WITH(hc.run("full", "causal", 0, 2, 0),
                        Catch::Contains("--layer 2 is out of range: the model has layers 0..1"));
    REQUIRE_THROWS_WITH(hc.run("full", "causal", 0, 0, 4),
                        Catch::Contains("--head 4 is out of range: the model has heads 0..3"));
    REQUIRE_THROWS_WITH(hc.run("full", "causal", -1, 0, 0), Catch::Contains("must be at least 1"));
}

TEST_CASE("plab flash on a model head: the JSON keys and the one-line refusals", "[flash][cli]") {
    const CliResult js = run_cli({"flash", "--layer", "0", "--head", "1", "--json"});
    REQUIRE(js.exit_code == 0);
    const nlohmann::json j = nlohmann::json::parse(js.out);
    CHECK(j.at("recorded").get<bool>());
    CHECK(j.at("port_matches_kernel").get<bool>());
    CHECK(j.at("tile").get<int>() == j.at("kernel_tile").get<int>());
    CHECK(j.at("vs_gpu").at("bitwise_equal").get<bool>());
    CHECK(j.at("vs_cpu_ref").at("within_tolerance").get<bool>());
    REQUIRE_FALSE(j.at("tiles").empty());
    CHECK(j.at("tiles")[0].contains("class"));
    CHECK(j.at("states").size() == std::size_t(j.at("kernel_states").get<long long>()));
    for (const auto& bad : std::vector<std::pair<std::vector<std::string>, std::string>>{
             {{"flash", "--layer", "0", "--q", "1,2"}, "--q, --k and --v are the toy's vectors"},
             {{"flash", "--chunks", "4"}, "--chunks and a prompt are for a model head"},
             {{"flash", "--head", "0", "--tile", "0"}, "--tile 0 must be at least 1"},
             {{"flash", "--layer", "99"}, "--layer 99 is out of range"}}) {
        const CliResult r = run_cli(bad.first);
        CHECK(r.exit_code != 0);
        CHECK(r.err.find(bad.second) != std::string::npos);
    }
}

}  // namespace
}  // namespace plab::test
