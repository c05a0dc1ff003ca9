// The serving lab at real magnitudes (issue 46): the roofline clock, the
// hardware and shape presets, the KV pool a card holds, and plab serve's
// --hardware/--shape/--dtype, --list-*, --validate-cost. Expected values are
// computed here from the presets' own figures or quoted from their sources.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "runtime/engine.h"
#include "serving/presets.h"
#include "serving/roofline.h"
#include "test_util.h"

namespace plab::test {
namespace {

std::string roofline_model_dir() {
    static const CliRandomModel model("plab_roofline_model", 4);
    return model.dir;
}

RooflineCost cost_of(const std::string& hw, const std::string& shape, Dtype d) {
    RooflineCost c;
    c.hardware = hardware_preset(hw);
    c.shape_name = shape;
    c.shape = shape_preset(shape).config;
    c.dtype = d;
    return c;
}

// One decode step of `batch` sequences, each after `ctx` cached positions.
RooflineStep decode_step(const RooflineCost& c, int batch, int ctx) {
    return c.step(std::vector<SpanShape>(std::size_t(batch), SpanShape{1, ctx, true}));
}

}  // namespace

TEST_CASE("shape presets have their model cards' parameter counts", "[serve][roofline]") {
    // Quoted from each model's card / safetensors index (total parameters).
    CHECK(shape_preset("llama3-8b").config.n_params() == 8030261248ULL);
    CHECK(shape_preset("llama2-13b").config.n_params() == 13015864320ULL);
    CHECK(shape_preset("mistral-7b").config.n_params() == 7241732096ULL);
    // Qwen2.5-7B: 7,615,616,512 with its q/k/v biases (28 x 4608), left out here.
    CHECK(shape_preset("qwen2.5-7b").config.n_params() == 7615616512ULL - 28 * 4608);
    CHECK(shape_preset("stories15m").config.n_params() < 16000000);
    require_error([] { shape_preset("gpt5"); }, "--shape gpt5 is not a preset");
}

TEST_CASE("batch-1 decode of Llama 3 8B on an H100 is memory-bound, near weights / bandwidth",
          "[serve][roofline]") {
    const RooflineCost c = cost_of("h100-sxm", "llama3-8b", Dtype::bf16);
    const double bound_us =
        weights_bytes(c.shape, c.dtype) / (c.hardware.bandwidth_gb_per_s * 1e9) * 1e6;
    const RooflineStep s = decode_step(c, 1, 512);
    INFO("step " << s.us << " us, weights / bandwidth " << bound_us << " us");
    CHECK(s.bound == "memory");
    // Between 1.0x and 1.6x the bound: the preset's 80 % bandwidth efficiency
    // (1.25x) plus the step overhead and the K/V read.
    CHECK(s.us >= bound_us);
    CHECK(s.us <= 1.6 * bound_us);
    CHECK(bound_us == Approx(4480).epsilon(0.01));  // 15.01 GB / 3.35 TB/s
}

TEST_CASE("decode turns compute-bound only at a batch above 100 in bf16, prefill at once",
          "[serve][roofline]") {
    for (const char* hw : {"h100-sxm", "a100-80gb", "h200"}) {
        const RooflineCost c = cost_of(hw, "llama3-8b", Dtype::bf16);
        int b = 1;
        while (decode_step(c, b, 0).ops.front().compute_us <
               decode_step(c, b, 0).ops.front().memory_us)
            ++b;
        INFO(hw << ": the linear layers turn compute-bound at batch " << b);
        CHECK(b > 100);
        // ...at about the ridge point, peak x efficiency / (bandwidth x efficiency) / (2 FLOP / 2 bytes).
        const double ridge = c.peak_flops() * c.hardware.compute_efficiency /
                             (c.bandwidth_bytes() * c.hardware.bandwidth_efficiency);
        // A little above it: the activations read and written grow with the batch too.
        CHECK(b >= ridge);
        CHECK(b == Approx(ridge).epsilon(0.2));
        const RooflineStep prefill = c.step({SpanShape{2048, 0, true}});
        CHECK(prefill.bound == "compute");
    }
}

TEST_CASE("a card without the precision, or too small for the weights, is refused in one line",
          "[serve][roofline]") {
    require_error([] { hardware_preset("t4").peak_tflops(Dtype::bf16); },
                  "t4 has no bf16 unit (Turing tensor cores do fp16 and int8, not bf16; give "
                  "--dtype fp16)");
    require_error([] { hardware_preset("b200"); }, "--hardware b200 is not a preset");
    const RooflineCost big = cost_of("t4", "llama2-13b", Dtype::fp16);
    Workload w;
    w.requests.push_back({0.0, "", 100, 10, 1, "", 0});
    require_error([&] { kv_blocks_on_card(big, 0.9, 16, w); },
                  "does not fit in 90 % of t4's 16 GB");
}

TEST_CASE("the KV pool is the card's memory less the weights, in blocks of the shape's K/V",
          "[serve][roofline]") {
    const RooflineCost c = cost_of("l4", "llama3-8b", Dtype::bf16);
    Workload huge;  // more than any card holds
    for (int i = 0; i < 1000; ++i) huge.requests.push_back({0.0, "", 4000, 4000, i + 1, "", 0});
    const double room = 24e9 * 0.9 - weights_bytes(c.shape, c.dtype);
    const double per_block =
        16 * 2.0 * 32 * 8 * 128 * 2;  // 2 (K,V) x L x Hkv x Dh x bf16, 16 positions
    CHECK(kv_blocks_on_card(c, 0.9, 16, huge) == int(room / per_block));
    // A small workload gets only what it can fill.
    Workload small;
    small.requests.push_back({0.0, "", 100, 28, 1, "", 0});
    CHECK(kv_blocks_on_card(c, 0.9, 16, small) == 1 + 8 + 1);  // 128 positions: 8 blocks, + 1 spare
}

TEST_CASE("plab serve --hardware: the clock line, the JSON cost_model and each step's bound",
          "[serve][roofline][cli]") {
    const std::string model = roofline_model_dir();
    const auto r =
        run_cli({"serve", "--model", model, "--requests", "6", "--rate", "50", "--prompt-len",
                 "16,64", "--new-tokens", "4,8", "--hardware", "h100-sxm", "--shape", "llama3-8b"});
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("clock: llama3-8b bf16 on h100-sxm, roofline; tokens: " + model) !=
          std::string::npos);
    const auto j =
        nlohmann::json::parse(run_cli({"serve", "--model", model, "--requests", "6", "--rate", "50",
                                       "--prompt-len", "16,64", "--new-tokens", "4,8", "--hardware",
                                       "h100-sxm", "--shape", "llama3-8b", "--json"})
                                  .out);
    CHECK(j["clock"] == "virtual");
    CHECK(j["cost_model"]["kind"] == "roofline");
    CHECK(j["cost_model"]["hardware"] == "h100-sxm");
    CHECK(j["cost_model"]["shape"] == "llama3-8b");
    CHECK(j["cost_model"]["dtype"] == "bf16");
    CHECK(j["cost_model"]["peak_tflops"].get<double>() == Approx(989.4));
    CHECK(j["cost_model"]["bandwidth_gb_per_s"].get<double>() == Approx(3350));
    int memory = 0, compute = 0;
    for (const auto& s : j["steps"]) (s["bound"] == "memory" ? memory : compute) += 1;
    CHECK(memory > 0);  // decode steps
    CHECK(memory + compute == j["summary"]["steps"].get<int>());
    // Disaggregated: the handover is charged as the preset shape's K/V
    // (16 positions x 2·L·Hkv·Dh x 2 bytes a block), not the small model's.
    const auto d = nlohmann::json::parse(
        run_cli({"serve", "--model", model, "--long-prompt", "100", "--disaggregate", "--link-gbps",
                 "50", "--hardware", "h100-sxm", "--shape", "llama3-8b", "--json"})
            .out);
    const long long blocks = d["summary"]["kv_transfer_blocks"].get<long long>();
    CHECK(blocks > 0);
    CHECK(d["summary"]["kv_transfer_bytes"].get<long long>() == blocks * 16 * 2 * 32 * 8 * 128 * 2);
    // Without --hardware: the coefficients, said so.
    const auto k = nlohmann::json::parse(
        run_cli({"serve", "--model", model, "--requests", "3", "--json"}).out);
    CHECK(k["cost_model"]["kind"] == "coefficients");
    CHECK(k["steps"][0]["bound"].is_null());
    require_one_line_cli_error(
        run_cli({"serve", "--model", model, "--shape", "llama3-8b"}),
        "--shape, --dtype and --gpu-memory-utilization charge the clock as a model on a card: "
        "give --hardware too");
    require_one_line_cli_error(
        run_cli({"serve", "--model", model, "--hardware", "h100-sxm", "--step-cost", "1,1,1"}),
        "give one clock model");
    require_one_line_cli_error(run_cli({"serve", "--model", model, "--hardware", "t4"}),
                               "t4 has no bf16 unit");
}

TEST_CASE("a card's memory decides preemption: the same workload preempts only on a full card",
          "[serve][roofline][cli]") {
    const std::string model = roofline_model_dir();
    auto preemptions = [&](const std::string& util) {
        const auto j = nlohmann::json::parse(
            run_cli({"serve", "--model", model, "--requests", "16", "--rate", "1000",
                     "--prompt-len", "64,120", "--new-tokens", "16,32", "--hardware", "l4",
                     "--shape", "llama3-8b", "--gpu-memory-utilization", util, "--json"})
                .out);
        return j["summary"]["preemptions"].get<long long>();
    };
    CHECK(preemptions("0.9") == 0);
    // 0.63 x 24 GB leaves 0.11 GB beside the 15.01 GB of weights: 52 blocks of
    // 16 positions (2 MiB each in bf16), fewer than the 16 requests grow into.
    CHECK(preemptions("0.63") > 0);
}

TEST_CASE("plab serve --list-hardware and --list-shapes print every preset with its source",
          "[serve][roofline][cli]") {
    const auto h = run_cli({"serve", "--list-hardware"});
    REQUIRE(h.exit_code == 0);
    for (const HardwarePreset& p : hardware_presets()) {
        CHECK(h.out.find(p.name) != std::string::npos);
        CHECK(h.out.find(p.source) != std::string::npos);
    }
    const auto s = run_cli({"serve", "--list-shapes"});
    REQUIRE(s.exit_code == 0);
    for (const ShapePreset& p : shape_presets()) CHECK(s.out.find(p.source) != std::string::npos);
}

// A machine that idled runs its next step cold: this machine's profile
// measured a 64-token prefill 10-35 % slower after 50 ms of idling than back
// to back. The engine tells the clock how long it idled; the roofline adds
// the preset's cold_step_us to a step after kColdAfterIdleUs or more, and
// only then.
TEST_CASE("the engine says how long it idled before a step, and the roofline charges a cold step",
          "[serve][roofline]") {
    RooflineCost c = cost_of("h100-sxm", "llama3-8b", Dtype::bf16);
    c.hardware.cold_step_us = 250;
    const std::vector<SpanShape> spans{{64, 0, true}, {1, 100, true}};
    CHECK(c.step(spans, true).us - c.step(spans, false).us == Approx(250));
    CHECK(c.step(spans, true).overhead_us - c.step(spans, false).overhead_us == Approx(250));

    const Weights w = make_random_weights(small_config(32, 1, 2, 1, 16, 64, 50, 64), 46);
    EngineOptions eo;
    eo.backend = "cpu-ref";
    Engine e(w, eo);
    std::vector<double> idle, charged;
    const StepDuration roofline = c.clock();
    e.use_virtual_clock([&](const ModelConfig& m, const Schedule& s) {
        idle.push_back(s.idle_before_us);
        charged.push_back(roofline(m, s));
        return charged.back();
    });
    RequestOptions ro;
    ro.max_new_tokens = 2;
    const std::vector<int32_t> prompt = random_tokens(12, 50, 7);
    // Arrivals at 3 ms (idle since the engine was made), then 0.5 ms and 4 ms
    // after the engine's previous step ended.
    e.advance_clock_to(3000);
    e.add_request(prompt, ro);
    e.run();  // a prefill step and a decode step
    e.advance_clock_to(e.now_us() + 500);
    e.add_request(prompt, ro);
    e.run();
    e.advance_clock_to(e.now_us() + 4000);
    e.add_request(prompt, ro);
    e.run();
    REQUIRE(idle.size() == 6);
    CHECK(idle == std::vector<double>{3000, 0, 500, 0, 4000, 0});
    // Same prompts, so the prefills differ only by the cold charge: 3000 and
    // 4000 us of idling are cold, 500 us is not.
    CHECK(charged[0] - charged[2] == Approx(250));
    CHECK(charged[4] - charged[2] == Approx(250));
    CHECK(charged[3] == Approx(charged[1]));
}

TEST_CASE("plab serve --validate-cost reports the clock's errors against the real clock",
          "[serve][roofline][cli]") {
    const std::string model = roofline_model_dir();
    // Every request arrives at 0, so no step's makeup depends on when a real
    // clock lets an arrival in: both real runs schedule the same steps, and
    // every step is compared with its twin. (With Poisson arrivals even the
    // first step may take one request in one run and two in the other.)
    const auto workload = process_temp_dir("plab_roofline") / "at_zero.jsonl";
    write_bytes(workload,
                "{\"arrival_s\": 0, \"prompt_tokens\": 16, \"max_new_tokens\": 4}\n"
                "{\"arrival_s\": 0, \"prompt_tokens\": 48, \"max_new_tokens\": 8}\n"
                "{\"arrival_s\": 0, \"prompt_tokens\": 24, \"max_new_tokens\": 6}\n"
                "{\"arrival_s\": 0, \"prompt_tokens\": 40, \"max_new_tokens\": 5}\n");
    const auto r = run_cli(
        {"serve", "--model", model, "--workload", workload.string(), "--validate-cost", "--json"});
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    for (const char* key : {"median_step_rel_error", "p90_step_rel_error", "median_ttft_rel_error",
                            "median_itl_rel_error"}) {
        INFO(key);
        CHECK(j[key].get<double>() >= 0);
    }
    CHECK(j["steps"].get<int>() > 4);
    CHECK(j["requests"] == 4);
    // The real run timed twice and compared step by step while the two
    // schedules agree: here, all of them.
    CHECK(j["noise_steps"].get<int>() == j["steps"].get<int>());
    CHECK(j["median_step_rel_noise"].get<double>() >= 0);
    CHECK(j["p90_step_rel_noise"].get<double>() >= j["median_step_rel_noise"].get<double>());
    CHECK(j["cost_model"]["hardware"] == "this-machine");
    require_one_line_cli_error(
        run_cli({"serve", "--model", model, "--validate-cost", "--hardware", "h100-sxm"}),
        "--validate-cost compares the clock with this machine's real one");
}

}  // namespace plab::test
