// `--mask` on the commands and `plab mask`: real runs, the JSON key `mask`, and
// bad specs answered with one clear line and exit 1.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace plab;
using test::run_cli;
namespace fs = std::filesystem;

namespace {

using test::require_one_line_cli_error;

std::string small_model() {
    static const test::CliRandomModel model("plab_mask_cli_model", 5);
    return model.dir;
}

const std::string kTokens = "256,1,2,3,4,5,6,7,8,9";  // 10 tokens of the byte tokenizer

}  // namespace

TEST_CASE("plab mask draws the mask / its tile map and the pairs saved against causal",
          "[mask][cli]") {
    const auto r = run_cli({"mask", "window:3", "--length", "8", "--tile", "4", "--json"});
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["mask"] == "window:3");
    // Counted by hand: rows see 1, 2, then 3 keys each: 1 + 2 + 3*6 = 21 of 8*9/2 = 36.
    REQUIRE(j["visible_pairs"] == 21);
    REQUIRE(j["causal_pairs"] == 36);
    REQUIRE(j["saved_vs_causal"].get<double>() == Approx(15.0 / 36.0));
    REQUIRE(j["rows"].size() == 8);
    for (int q = 0; q < 8; ++q) {
        const std::string row = j["rows"][q];
        for (int k = 0; k < 8; ++k) REQUIRE((row[k] == 'x') == (k <= q && q - k < 3));
    }
    // Tiles of 4: (0,0) partial (a triangle), (0,1) empty, (1,0) partial (q4 sees k2,k3;
    // q7 sees none of 0..3), (1,1) partial.
    REQUIRE(j["tile_map"][0] == "P.");
    REQUIRE(j["tile_map"][1] == "PP");
    const auto text = run_cli({"mask", "chunked:4", "--length", "8", "--tile", "4"});
    REQUIRE(text.exit_code == 0);
    REQUIRE(text.out.find("Tiles: 2 empty, 2 partial, 0 full of 4") != std::string::npos);
    const auto help = run_cli({"mask", "--help"});
    REQUIRE(help.exit_code == 0);
    for (const char* word : {"window:W", "sink:S", "dilated:W,D", "chunked:L", "prefix:P",
                             "docs:N1,N2", "docs:bos", "file:PATH", "alibi", "softcap:C", "'|'"})
        REQUIRE(help.out.find(word) != std::string::npos);
}

TEST_CASE("plab --mask on prefill / compare / generate / toy / bench and eval and JSON names it",
          "[mask][cli]") {
    const std::string model = small_model();
    auto j =
        nlohmann::json::parse(run_cli({"prefill", "--model", model, "--mask", "window:4+sink:1",
                                       "--chunks", "3,3,4", "--tokens", kTokens, "--json"})
                                  .out);
    REQUIRE(j["mask"] == "window:4+sink:1");
    REQUIRE(j["equivalence"]["logits_bitwise"] == true);
    // Pairs and FLOPs under the mask, not causal's (counted by hand: rows see
    // 1, 2, 3, 4 keys, then the sink and 4 in the window: 10 + 6*5 = 40 of 55).
    REQUIRE(j["attention_pairs"] == 40);
    REQUIRE(j["causal_attention_pairs"] == 55);
    const auto causal = nlohmann::json::parse(
        run_cli({"prefill", "--model", model, "--tokens", kTokens, "--json"}).out);
    REQUIRE(causal["attention_pairs"] == 55);
    // The FLOPs differ by exactly the attention of the 15 hidden pairs: 4*Dh*H*L each.
    const auto info = nlohmann::json::parse(run_cli({"info", "--model", model, "--json"}).out);
    const auto& cfg = info["config"];
    const double per_pair = 4.0 * cfg["head_dim"].get<double>() *
                            cfg["num_attention_heads"].get<double>() *
                            cfg["num_hidden_layers"].get<double>();
    REQUIRE(causal["flops"].get<double>() - j["flops"].get<double>() == 15 * per_pair);
    // The full plan is compared against one token at a time, as far as the prefix allows.
    j = nlohmann::json::parse(
        run_cli({"prefill", "--model", model, "--mask", "prefix:4", "--tokens", kTokens, "--json"})
            .out);
    REQUIRE(j["mask"] == "prefix:4");
    REQUIRE(j["compared_plan"] == "4,1,1,1,1,1,1");
    REQUIRE(j["equivalence"]["logits_bitwise"] == true);
    j = nlohmann::json::parse(
        run_cli({"compare", "--model", model, "--mask", "docs:3,7", "--backends", "cpu-ref,gpu-ref",
                 "--plans", "full,3", "--tokens", kTokens, "--json"})
            .out);
    REQUIRE(j["mask"] == "docs:3,7");
    REQUIRE(j["reference_backends_bitwise"] == true);
    j = nlohmann::json::parse(
        run_cli({"generate", "--model", model, "--backend", "cpu-ref", "--mask", "chunked:4", "-n",
                 "3", "--no-stop", "--tokens", kTokens, "--json"})
            .out);
    REQUIRE(j["mask"] == "chunked:4");
    REQUIRE(j["new_tokens"].size() == 3);
    const auto toy = run_cli({"toy", "--mask", "window:2"});
    REQUIRE(toy.exit_code == 0);
    // Position 2 sees v1, v2 = 4, 8: the mean 6, found by the toy's own exact-fraction check.
    REQUIRE(toy.out.find("6 = mean of v1..v2") != std::string::npos);
    REQUIRE(toy.out.find("All 8 chunk plans are bitwise equal") != std::string::npos);
    const auto toy_prefix = run_cli({"toy", "--mask", "prefix:3", "--json"});
    REQUIRE(toy_prefix.exit_code == 0);
    j = nlohmann::json::parse(toy_prefix.out);
    REQUIRE(j["plans_refused_by_mask"] == 6);  // of 8 plans, those with a cut at 1 or 2
    REQUIRE(j["all_bitwise_equal"] == true);
    j = nlohmann::json::parse(
        run_cli({"bench", "--model", model, "--backends", "cpu-ref", "--lengths", "12", "--repeats",
                 "1", "--decode-steps", "2", "--mask", "window:4", "--peak-size", "256", "--json"})
            .out);
    REQUIRE(j["mask"] == "window:4");
}

TEST_CASE("plab --mask: bad specs and refused plans give one line and exit 1", "[mask][cli]") {
    const std::string model = small_model();
    auto prefill = [&](const std::string& mask, const std::string& chunks = "full") {
        return run_cli(
            {"prefill", "--model", model, "--mask", mask, "--chunks", chunks, "--tokens", kTokens});
    };
    require_one_line_cli_error(prefill("window:0"), "the window W must be at least 1, got 0");
    require_one_line_cli_error(prefill("window:-2"), "must be at least 1, got -2");
    require_one_line_cli_error(prefill("zigzag:3"), "unknown mask kind 'zigzag'");
    require_one_line_cli_error(prefill("prefix:11"), "longer than the prompt of 10");
    require_one_line_cli_error(prefill("docs:4,4"), "sum to 8 but the prompt has 10 tokens");
    require_one_line_cli_error(prefill("file:/nonexistent/m.txt"), "cannot read mask file");
    require_one_line_cli_error(prefill("%%%"), "unknown mask kind");
    require_one_line_cli_error(prefill("prefix:6", "3,7"),
                               "splits the bidirectional prefix (positions 0..5) at position 3");
    require_one_line_cli_error(run_cli({"toy", "--mask", "prefix:3", "--chunks", "1,3"}),
                               "e.g. plan 3,1");
    require_one_line_cli_error(run_cli({"mask", "window:0", "--length", "8"}), "at least 1");
    require_one_line_cli_error(run_cli({"mask", "docs:3,3", "--length", "8"}), "must sum to 8");
    require_one_line_cli_error(run_cli({"generate", "--model", model, "--backend", "cpu-ref",
                                        "--mask", "softcap:0", "--tokens", kTokens}),
                               "the cap must be a positive number");
}

TEST_CASE(
    "plab eval --mask on the shipped model: the induction score falls with a window "
    "shorter than the copy distance and stays with a longer one",
    "[mask][cli][eval]") {
    // [BOS] s s with 24 random tokens: the query at 1+24+i looks for key 2+i, 23 positions back.
    auto eval = [](const std::string& mask) {
        const auto r =
            run_cli({"eval", "--backend", "cpu", "--stories", "0", "--max-completions", "0",
                     "--trials", "3", "--induction-len", "24", "--mask", mask, "--json"});
        INFO("stderr: " << r.err);
        REQUIRE(r.exit_code == 0);
        const auto j = nlohmann::json::parse(r.out);
        REQUIRE(j["mask"] == mask);
        return j["best_induction"]["score"].get<double>();
    };
    const double causal = eval("causal");
    const double longer = eval("window:30");   // sees the earlier occurrence (23 back)
    const double shorter = eval("window:20");  // cannot: the target key is masked
    WARN("best induction score: causal " << causal << ", window:30 " << longer << ", window:20 "
                                         << shorter);
    REQUIRE(causal >= 0.5);  // the shipped model has an induction head (tests/model/test_eval.cpp)
    // A masked key gets probability exactly 0, so no head can attend to the target.
    REQUIRE(shorter == 0.0);
    // The window keeps the target in view; losing the first keys (BOS among them)
    // costs a little: within 0.1 of causal.
    REQUIRE(longer >= causal - 0.1);
    // The text report names no "best" head when every head scores 0.
    const auto text =
        run_cli({"eval", "--backend", "cpu", "--stories", "0", "--max-completions", "0", "--trials",
                 "3", "--induction-len", "24", "--mask", "window:20"});
    REQUIRE(text.out.find("No induction head (every head scores 0.000)") != std::string::npos);
    REQUIRE(text.out.find("Best induction head") == std::string::npos);
}
