// `plab serve --speculate K --draft SOURCE` (serving/serve.h with
// EngineOptions::speculative): a workload replayed with and without
// speculative decoding. The tokens stay bitwise (the reference backend, greedy
// as serving replays are); the steps and the times change; every verify span
// fits in its step's token budget; the disaggregated decode engine speculates
// too.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "model/model_io.h"
#include "serving/serve.h"
#include "test_util.h"

namespace plab::test {
namespace {

const Model& shipped() {
    static const Model m = load_model(std::string(PLAB_TESTS_DIR) + "/../assets/model");
    return m;
}

Workload overlapping_workload() {
    WorkloadGenerator g;
    g.rate = 20000;  // arrivals faster than the steps: requests share steps
    g.requests = 6;
    g.seed = 4;
    g.prompt_min = 4;
    g.prompt_max = 40;
    g.new_min = 12;
    g.new_max = 30;
    return generate_workload(g);
}

ServeOptions options(int budget) {
    ServeOptions o;
    o.engine.backend = "cpu-ref";
    o.engine.block_size = 4;
    o.engine.max_step_tokens = budget;
    return o;
}

}  // namespace

TEST_CASE("serve --speculate: the same tokens in fewer steps, verify spans inside the budget",
          "[serve][speculative]") {
    const Workload w = overlapping_workload();
    const int budget = 16;
    const ServeReport plain = serve(shipped(), w, options(budget));
    CHECK(plain.summary.speculative.k == 0);
    for (const char* draft : {"ngram:1", "ngram:3"}) {
        INFO("draft " << draft);
        ServeOptions o = options(budget);
        o.engine.speculative.k = 4;
        o.engine.speculative.draft = parse_draft_source(draft);
        const ServeReport spec = serve(shipped(), w, o);
        REQUIRE(spec.requests.size() == plain.requests.size());
        bool times_differ = false;
        for (std::size_t i = 0; i < spec.requests.size(); ++i) {
            INFO("request " << i);
            CHECK(spec.requests[i].new_tokens == plain.requests[i].new_tokens);
            times_differ |= spec.requests[i].token_s != plain.requests[i].token_s;
            const SpeculativeStats& s = spec.requests[i].speculation;
            CHECK(s.k == 4);
            CHECK(s.tokens_after_first == w.requests[i].max_new_tokens - 1);
        }
        const SpeculativeStats& total = spec.summary.speculative;
        CHECK(total.accepted > 0);
        CHECK(total.draft == draft);
        // Each accepted guess is a token made without a target forward of its
        // own: a request decodes in (new tokens - 1) - accepted steps.
        std::vector<int> decode_spans(spec.requests.size(), 0);
        for (const StepRecord& st : spec.steps)
            for (std::size_t k = 0; k < st.requests.size(); ++k)
                decode_spans[static_cast<std::size_t>(st.requests[k])] += st.decode[k] ? 1 : 0;
        for (std::size_t i = 0; i < spec.requests.size(); ++i) {
            const SpeculativeStats& s = spec.requests[i].speculation;
            CHECK(decode_spans[i] == w.requests[i].max_new_tokens - 1 - s.accepted);
            CHECK(s.verify_steps == decode_spans[i]);
        }
        CHECK(spec.steps.size() <= plain.steps.size());
        CHECK(times_differ);
        int verify_spans = 0;
        for (const StepRecord& st : spec.steps) {
            int tokens = 0;
            for (std::size_t k = 0; k < st.tokens.size(); ++k) {
                tokens += st.tokens[k];
                if (st.guesses[k] > 0) {
                    ++verify_spans;
                    CHECK(st.tokens[k] == st.guesses[k] + 1);  // the fed token and its guesses
                    CHECK(st.accepted[k] <= st.guesses[k]);
                }
            }
            CHECK(tokens <= budget);
            CHECK(tokens == st.prefill_tokens + st.decode_tokens);
        }
        CHECK(verify_spans > 0);
    }
}

TEST_CASE("serve --speculate --disaggregate: the decode engine verifies, the tokens stay",
          "[serve][speculative]") {
    const Workload w = overlapping_workload();
    ServeOptions o = options(16);
    o.disaggregate = true;
    o.link_gb_per_s = 2;
    const ServeReport plain = serve(shipped(), w, o);
    o.engine.speculative.k = 3;
    o.engine.speculative.draft = parse_draft_source("ngram:1");
    const ServeReport spec = serve(shipped(), w, o);
    for (std::size_t i = 0; i < spec.requests.size(); ++i)
        CHECK(spec.requests[i].new_tokens == plain.requests[i].new_tokens);
    CHECK(spec.summary.speculative.accepted > 0);
}

TEST_CASE("plab serve --speculate: JSON and text report the guesses beside the same outputs",
          "[serve][speculative][cli]") {
    const std::vector<std::string> base{"serve", "--requests", "4",       "--rate",
                                        "2000",  "--seed",     "2",       "--new-tokens",
                                        "10,20", "--backend",  "cpu-ref", "--json"};
    const CliResult plain = run_cli(base);
    REQUIRE(plain.exit_code == 0);
    std::vector<std::string> args = base;
    for (const char* a : {"--speculate", "4", "--draft", "assets/draft"}) args.push_back(a);
    const CliResult spec = run_cli(args);
    REQUIRE(spec.exit_code == 0);
    const auto p = nlohmann::json::parse(plain.out), s = nlohmann::json::parse(spec.out);
    CHECK(p["summary"]["speculative"].is_null());
    REQUIRE(s["requests"].size() == 4);
    long long accepted = 0;
    for (std::size_t i = 0; i < 4; ++i) {
        CHECK(s["requests"][i]["new_tokens"] == p["requests"][i]["new_tokens"]);
        accepted += s["requests"][i]["speculative"]["accepted"].get<long long>();
    }
    const auto& total = s["summary"]["speculative"];
    CHECK(total["k"] == 4);
    CHECK(total["draft"] == "assets/draft");
    CHECK(total["accepted"] == accepted);
    CHECK(total["draft_forwards"].get<long long>() > 0);
    long long step_accepted = 0;
    for (const auto& st : s["steps"]) step_accepted += st["accepted"].get<long long>();
    CHECK(step_accepted == accepted);

    std::vector<std::string> text;  // without --json
    for (const std::string& a : args)
        if (a != "--json") text.push_back(a);
    const CliResult t = run_cli(text);
    REQUIRE(t.exit_code == 0);
    CHECK(t.out.find("speculative decoding, up to 4 guesses a verify step, draft assets/draft: ") !=
          std::string::npos);
    require_one_line_cli_error(run_cli({"serve", "--requests", "2", "--speculate", "3"}),
                               "--draft needs a source: ngram[:N] or a draft model file");
    require_one_line_cli_error(run_cli({"serve", "--requests", "2", "--draft", "ngram"}),
                               "--draft ngram names the guesses of --speculate K; give both");
}

}  // namespace plab::test
