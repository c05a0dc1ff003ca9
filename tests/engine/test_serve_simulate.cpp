// `plab serve --hardware CARD --shape SHAPE --simulate` (serving/simulate.h):
// the scheduler, pool, prefix cache and preemption with no forward pass.
//
// What it shows: on a workload the small model can run, the simulation makes
// the very schedule of the engine's replay on the same roofline clock — the
// same steps, the same prefix hits and preemptions, the same token times —
// because scheduling depends on lengths alone; at the sizes the model cannot
// run (32K-token prompts) every request finishes, every block comes back and
// no step passes its budget; requests naming a shared prefix hit it; and
// every report line says "simulated".
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "model/model_io.h"
#include "serving/presets.h"
#include "serving/serve.h"
#include "test_util.h"

namespace plab::test {
namespace {

const Model& shipped() {
    static const Model m = load_model(std::string(PLAB_TESTS_DIR) + "/../assets/model");
    return m;
}

std::shared_ptr<const RooflineCost> roofline(const char* card, const char* shape) {
    auto cost = std::make_shared<RooflineCost>();
    cost->hardware = hardware_preset(card);
    cost->shape_name = shape;
    cost->shape = shape_preset(shape).config;
    return cost;
}

// Requests that overlap, two of them sharing a 48-token prefix with a third.
Workload small_workload() {
    WorkloadGenerator g;
    g.rate = 400;
    g.requests = 12;
    g.seed = 5;
    g.prompt_min = 20;
    g.prompt_max = 200;
    g.new_min = 4;
    g.new_max = 40;
    Workload w = generate_workload(g);
    for (std::size_t i : {2u, 6u, 9u}) {
        w.requests[i].prefix = "system";
        w.requests[i].prefix_tokens = 48;
        w.requests[i].prompt_tokens = std::max(w.requests[i].prompt_tokens, 60);
    }
    return w;
}

}  // namespace

TEST_CASE("serve --simulate makes the engine's schedule: steps, hits, preemptions, token times",
          "[serve][simulate]") {
    const Workload w = small_workload();
    for (int kv_blocks : {0, 24}) {  // the card's pool, and one so small that requests preempt
        INFO("kv blocks " << kv_blocks);
        ServeOptions o;
        o.engine.backend = "cpu-ref";
        o.engine.max_step_tokens = 64;
        o.engine.kv_blocks = kv_blocks > 0 ? kv_blocks : 400;
        o.roofline = roofline("h100-sxm", "llama3-8b");
        const ServeReport real = serve(shipped(), w, o);
        o.simulate = true;
        const ServeReport sim = serve(shipped(), w, o);
        CHECK(real.compute == "real");
        CHECK(sim.compute == "simulated");
        REQUIRE(sim.requests.size() == real.requests.size());
        REQUIRE(sim.steps.size() == real.steps.size());
        for (std::size_t k = 0; k < sim.steps.size(); ++k) {
            INFO("step " << k);
            CHECK(sim.steps[k].requests == real.steps[k].requests);
            CHECK(sim.steps[k].tokens == real.steps[k].tokens);
            CHECK(sim.steps[k].preempted == real.steps[k].preempted);
            CHECK(sim.steps[k].blocks_in_use == real.steps[k].blocks_in_use);
            CHECK(sim.steps[k].start_us == real.steps[k].start_us);
        }
        int hits = 0;
        for (std::size_t i = 0; i < sim.requests.size(); ++i) {
            INFO("request " << i);
            const ServedRequest &a = sim.requests[i], &b = real.requests[i];
            CHECK(a.prompt_tokens == b.prompt_tokens);
            CHECK(a.cached_tokens == b.cached_tokens);
            CHECK(a.preemptions == b.preemptions);
            CHECK(a.computed_tokens == b.computed_tokens);
            CHECK(a.token_s == b.token_s);
            CHECK(a.new_token_count == static_cast<int>(b.new_tokens.size()));
            CHECK(a.new_tokens.empty());  // placeholders, not reported as ids
            hits += a.cached_tokens > 0 ? 1 : 0;
        }
        CHECK(hits >= 1);  // the shared prefix was found
        CHECK(sim.summary.preemptions == real.summary.preemptions);
        if (kv_blocks > 0) CHECK(sim.summary.preemptions > 0);
        CHECK(sim.summary.ttft_ms.p99 == real.summary.ttft_ms.p99);
    }
}

TEST_CASE("serve --simulate at 32K-token contexts: every request ends, every block comes back",
          "[serve][simulate]") {
    WorkloadGenerator g;
    g.rate = 2;
    g.requests = 120;
    g.seed = 8;
    g.prompt_min = 2048;
    g.prompt_max = 32000;
    g.new_min = 16;
    g.new_max = 256;
    const Workload w = generate_workload(g);
    ServeOptions o;
    o.simulate = true;
    o.engine.max_step_tokens = 2048;
    o.roofline = roofline("h100-sxm", "qwen2.5-7b");
    o.engine.kv_blocks = kv_blocks_on_card(*o.roofline, 0.9, o.engine.block_size, w);
    const ServeReport r = serve(shipped(), w, o);
    REQUIRE(r.requests.size() == w.requests.size());
    for (std::size_t i = 0; i < r.requests.size(); ++i)
        CHECK(r.requests[i].new_token_count == w.requests[i].max_new_tokens);
    for (const StepRecord& s : r.steps) CHECK(s.prefill_tokens + s.decode_tokens <= 2048);
    CHECK(r.steps.back().blocks_in_use == 0);
    // A 32K prompt in chunks of 2048 takes many steps: its TTFT is far above a step's.
    CHECK(r.summary.ttft_ms.p99 > 20 * r.summary.itl_ms.p50);
}

TEST_CASE("serve --simulate: a request naming a shared prefix finds it cached",
          "[serve][simulate]") {
    const Workload w = parse_workload(
        "{\"arrival_s\": 0, \"prompt_tokens\": 5000, \"prefix\": \"doc\", \"prefix_tokens\": "
        "4000, \"max_new_tokens\": 8}\n"
        "{\"arrival_s\": 5, \"prompt_tokens\": 4500, \"prefix\": \"doc\", \"prefix_tokens\": "
        "4000, \"max_new_tokens\": 8}\n"
        "{\"arrival_s\": 10, \"prompt_tokens\": 4500, \"prefix\": \"other\", \"prefix_tokens\": "
        "4000, \"max_new_tokens\": 8}\n",
        "prefixes.jsonl");
    ServeOptions o;
    o.simulate = true;
    o.roofline = roofline("a100-80gb", "llama3-8b");
    o.engine.kv_blocks = 2000;
    const ServeReport r = serve(shipped(), w, o);
    CHECK(r.requests[0].cached_tokens == 0);
    CHECK(r.requests[1].cached_tokens == 4000);  // 250 whole blocks of 16
    CHECK(r.requests[2].cached_tokens == 0);     // another prefix of the same length
    CHECK(r.requests[1].latency.ttft_ms < r.requests[2].latency.ttft_ms);
    require_error(
        [] {
            parse_workload(
                "{\"arrival_s\": 0, \"prompt\": \"hi\", \"prefix\": \"a\", "
                "\"prefix_tokens\": 1}",
                "w");
        },
        "a shared prefix is a count of synthetic ids: give \"prompt_tokens\"");
    require_error(
        [] { parse_workload("{\"arrival_s\": 0, \"prompt_tokens\": 9, \"prefix\": \"a\"}", "w"); },
        "a shared prefix needs both \"prefix\" (its name) and \"prefix_tokens\"");
    require_error(
        [] {
            parse_workload(
                "{\"arrival_s\": 0, \"prompt_tokens\": 9, \"prefix\": \"a\", "
                "\"prefix_tokens\": 10}",
                "w");
        },
        "prefix_tokens 10 must be a whole number between 1 and the prompt's 9 tokens");
}

TEST_CASE("plab serve --simulate: every report line says simulated and bad uses get one line",
          "[serve][simulate][cli]") {
    const std::vector<std::string> base{
        "serve",      "--hardware", "h100-sxm",     "--shape",     "llama3.1-8b",  "--simulate",
        "--requests", "300",        "--prompt-len", "4096,100000", "--new-tokens", "8,64",
        "--rate",     "1"};
    std::vector<std::string> json = base;
    json.push_back("--json");
    const CliResult r = run_cli(json);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j.at("compute") == "simulated");
    CHECK(j.at("summary").at("compute") == "simulated");
    REQUIRE(j.at("requests").size() == 300);
    int longest = 0;
    for (const auto& q : j["requests"]) {
        CHECK(q.at("compute") == "simulated");
        CHECK(q.at("new_tokens").is_null());
        longest = std::max(longest, q.at("prompt_tokens").get<int>());
    }
    CHECK(longest > 65536);  // beyond any context but the 128K preset's
    const CliResult text = run_cli(base);
    REQUIRE(text.exit_code == 0);
    CHECK(text.out.find("compute: simulated - no forward pass") != std::string::npos);
    CHECK(text.out.find("chunked [sim]") != std::string::npos);
    CHECK(text.out.find("... 280 more requests (--json lists every one)") != std::string::npos);

    require_one_line_cli_error(run_cli({"serve", "--simulate", "--requests", "2"}),
                               "--simulate charges each step on the roofline clock");
    require_one_line_cli_error(
        run_cli({"serve", "--hardware", "h100-sxm", "--shape", "llama3-8b", "--simulate",
                 "--requests", "2", "--prompt-len", "9000,9000"}),
        "a prompt of 9000 tokens is longer than llama3-8b's context of 8192 positions");
    require_one_line_cli_error(run_cli({"serve", "--hardware", "h100-sxm", "--shape", "llama3-8b",
                                        "--simulate", "--requests", "2", "--clock", "real"}),
                               "use --clock virtual");
    require_one_line_cli_error(
        run_cli({"serve", "--hardware", "h100-sxm", "--shape", "llama3-8b", "--simulate",
                 "--requests", "2", "--disaggregate", "--link-gbps", "50"}),
        "drop --disaggregate");
    require_one_line_cli_error(
        run_cli({"serve", "--hardware", "h100-sxm", "--shape", "llama3-8b", "--simulate",
                 "--requests", "2", "--speculate", "2", "--draft", "ngram"}),
        "drop --speculate");
}

}  // namespace plab::test
