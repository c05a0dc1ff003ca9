// The `plab` command line: real runs, and bad input answered with one clear
// line and a non-zero exit — never a crash.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "model/model_io.h"
#include "model/shapes.h"
#include "test_util.h"

using namespace plab;
using test::run_cli;
namespace fs = std::filesystem;

namespace {

using test::require_one_line_cli_error;

fs::path small_model_dir() {
    static const test::CliRandomModel model("plab_cli_model", 3);
    return model.dir;
}

}  // namespace

TEST_CASE("plab toy prints 2, 3, 14/3, 6 and all chunk plans match", "[cli]") {
    const auto r = run_cli({"toy"});
    REQUIRE(r.exit_code == 0);
    REQUIRE(r.out.find("14/3 = mean of v0..v2") != std::string::npos);
    REQUIRE(r.out.find("All 8 chunk plans are bitwise equal to the full prefill.") !=
            std::string::npos);
    const auto j = nlohmann::json::parse(run_cli({"toy", "--json"}).out);
    REQUIRE(j["full"] == nlohmann::json({2.0, 3.0, 14.0f / 3.0f, 6.0}));
    REQUIRE(j["all_bitwise_equal"] == true);
    const auto k = nlohmann::json::parse(run_cli({"toy", "--values", "1,2", "--queries", "1,2",
                                                  "--keys", "0,1", "--chunks", "1", "--json"})
                                             .out);
    REQUIRE(k["chunked"].size() == 1);
    REQUIRE(k["all_bitwise_equal"] == true);
}

TEST_CASE("plab prefill reports bitwise equivalence for cpu-ref and for the chunk-invariant cpu",
          "[cli]") {
    const std::string model = small_model_dir().string();
    // 40 tokens in KV blocks of 16 (the default): three blocks, the last one
    // half full. Plan 16,5,11,8 puts chunk boundaries on block boundaries (16,
    // 32) and inside a block (21); plan 7,13,20 has chunks that start inside a
    // block and run across the next boundary (chunk 7..19 crosses 16, chunk
    // 20..39 crosses 32). Every one must match the whole-prompt prefill bitwise.
    std::string tokens = "256";
    for (int i = 1; i < 40; ++i) tokens += "," + std::to_string(i);
    nlohmann::json j;
    for (const std::string plan : {"16,5,11,8", "7,13,20"}) {
        INFO("plan " << plan);
        j = nlohmann::json::parse(run_cli({"prefill", "--model", model, "--chunks", plan,
                                           "--backend", "cpu-ref", "--tokens", tokens, "--json"})
                                      .out);
        REQUIRE(j["tokens"].size() == 40);
        REQUIRE(j["plan"] == plan);
        REQUIRE(j["compared_plan"] == "40");
        REQUIRE(j["kv_blocks"] == 3);  // ceil(40 / 16): the prompt really spans 3 blocks
        REQUIRE(j["equivalence"]["logits_bitwise"] == true);
        REQUIRE(j["equivalence"]["kv_bitwise"] == true);
        REQUIRE(j["top"].size() == 5);
    }
    j = nlohmann::json::parse(run_cli({"prefill", "--model", model, "--chunks", "5", "--backend",
                                       "cpu", "--json", "hello world, again"})
                                  .out);
    REQUIRE(j["equivalence"]["same_first_token"] == true);
    // The fast backend's kernels are chunk-invariant (lesson 15): chunks of 5
    // give the bits of its own full prefill, logits and every K/V.
    REQUIRE(j["equivalence"]["logits_bitwise"] == true);
    REQUIRE(j["equivalence"]["kv_bitwise"] == true);
    const auto text = run_cli({"prefill", "--model", model, "--chunks", "4"});
    REQUIRE(text.exit_code == 0);
    REQUIRE(text.out.find("bitwise equal: yes") != std::string::npos);
}

TEST_CASE("plab generate, info and bench run and report", "[cli]") {
    const std::string model = small_model_dir().string();
    const fs::path trace = fs::path(model) / "trace.json";
    auto g = run_cli({"generate", "--model", model, "-n", "5", "--no-stop", "--trace",
                      trace.string(), "--json", "abc"});
    REQUIRE(g.exit_code == 0);
    const auto j = nlohmann::json::parse(g.out);
    REQUIRE(j["new_tokens"].size() == 5);
    REQUIRE(j["ttft_ms"].get<double>() >= j["prefill_ms"].get<double>());
    // Warm medians, the cold first run apart (issue 15): both present, each
    // TTFT containing its prefill.
    REQUIRE(j["warm_runs"] == 3);
    REQUIRE(j["cold_ttft_ms"].get<double>() >= j["cold_prefill_ms"].get<double>());
    REQUIRE(j["cold_prefill_ms"].get<double>() > 0);
    std::ifstream tf(trace);
    const auto tj = nlohmann::json::parse(tf);
    REQUIRE(tj["traceEvents"].size() > 5);
    REQUIRE(j["kv_cache"] == true);
    REQUIRE(j["decode_step_positions"] == std::vector<int>(4, 1));

    // --no-kv-cache: the same tokens; step k recomputes the 4 prompt tokens
    // (BOS + "abc") plus k, and its FLOPs grow with them.
    const auto n = nlohmann::json::parse(run_cli({"generate", "--model", model, "-n", "5",
                                                  "--no-stop", "--no-kv-cache", "--json", "abc"})
                                             .out);
    REQUIRE(n["kv_cache"] == false);
    REQUIRE(n["new_tokens"] == j["new_tokens"]);
    REQUIRE(n["decode_step_positions"] == std::vector<int>{5, 6, 7, 8});
    const auto flops = n["decode_step_flops"].get<std::vector<double>>();
    const auto cached_flops = j["decode_step_flops"].get<std::vector<double>>();
    for (std::size_t k = 0; k < 4; ++k) REQUIRE(flops[k] > 4 * cached_flops[k]);
    for (std::size_t k = 1; k < 4; ++k) REQUIRE(flops[k] > flops[k - 1]);
    require_one_line_cli_error(
        run_cli({"generate", "--model", model, "--prompts", "x.txt", "--no-kv-cache"}),
        "--no-kv-cache recomputes one prompt's sequence");

    const auto info = nlohmann::json::parse(run_cli({"info", "--model", model, "--json"}).out);
    REQUIRE(info["kv_bytes_per_token"] == 2 * 2 * 2 * 16 * 4);
    REQUIRE(info["parameters"].get<long>() > 100000);
    const std::string gpu_form = info["gpu_form"];
    REQUIRE((gpu_form.find("emulated") != std::string::npos ||
             gpu_form.find("native") != std::string::npos));

    // --peak-size 256: the peak's products at 256^3, not 2048^3 (under ASan
    // the 2048^3 ones took ~3 minutes of this test); the JSON says which.
    const auto b =
        run_cli({"bench", "--model", model, "--backends", "cpu,cpu-ref", "--lengths", "32,9",
                 "--repeats", "3", "--decode-steps", "3", "--peak-size", "256", "--json"});
    REQUIRE(b.exit_code == 0);
    const auto bj = nlohmann::json::parse(b.out);
    // Paired runs (lesson 6): the cpu rows again, each run followed by one
    // product of the peak's GEMM. The pair shown is the one whose ratio
    // (prefill GFLOP/s / that product's) is the median of the row's, the lower
    // middle one of an even count: recomputed here from the runs the JSON lists.
    REQUIRE(bj["prefill"].size() == 4);
    for (const auto& p : bj["prefill"]) {
        if (p["backend"] == "cpu-ref") {  // not tuned, not paired
            REQUIRE_FALSE(p.contains("fraction_of_paired_peak"));
            continue;
        }
        const std::vector<double> times = p["paired_prefill_s"],
                                  peaks = p["paired_peak_run_gflops"];
        REQUIRE(times.size() == 3);  // --repeats
        REQUIRE(peaks.size() == times.size());
        const double flops = p["gflops"].get<double>() * p["median_s"].get<double>() * 1e9;
        std::vector<std::pair<double, std::size_t>> ratios;
        for (std::size_t i = 0; i < times.size(); ++i) {
            REQUIRE(times[i] > 0);
            REQUIRE(peaks[i] > 0);
            ratios.push_back({flops / times[i] / 1e9 / peaks[i], i});
        }
        std::sort(ratios.begin(), ratios.end());
        const auto [ratio, mid] = ratios[(ratios.size() - 1) / 2];
        REQUIRE(p["fraction_of_paired_peak"].get<double>() == Approx(ratio).epsilon(1e-9));
        REQUIRE(p["paired_gflops"].get<double>() == Approx(flops / times[mid] / 1e9).epsilon(1e-9));
        REQUIRE(p["paired_peak_gflops"].get<double>() == peaks[mid]);
    }
    REQUIRE(bj["gemm_peak_size"] == 256);
    REQUIRE(bj["gemm_peak_gflops"].get<double>() > 0);
    REQUIRE(bj["prefill"][0]["gflops"].get<double>() > 0);
    REQUIRE(bj["decode"][0]["bound_tokens_per_s"].get<double>() > 0);
    // The peak is the fastest of the three GEMMs measured (issue 13): Eigen's,
    // OpenBLAS's (installed by the package list) and the engine's; the JSON
    // names which one and OpenBLAS's build.
    const double eigen = bj["gemm_peak_eigen_gflops"], engine = bj["gemm_peak_engine_gflops"],
                 openblas = bj["gemm_peak_openblas_gflops"];
    REQUIRE(eigen > 0);
    REQUIRE(engine > 0);
    REQUIRE(openblas > 0);
    const double peak = bj["gemm_peak_gflops"];
    REQUIRE(peak == std::max({eigen, openblas, engine}));
    const std::string source = bj["gemm_peak_source"];
    REQUIRE(source == (peak == eigen      ? "Eigen GEMM"
                       : peak == openblas ? "OpenBLAS GEMM"
                                          : "engine GEMM, cpu_gemm"));
    REQUIRE(bj["openblas"].get<std::string>().rfind("OpenBLAS ", 0) == 0);
    // The weight-sweep limit: the time to stream the step's bytes, as tokens/s.
    const auto& d = bj["decode"][0];
    REQUIRE(d["sweep_s"].get<double>() > 0);
    REQUIRE(d["sweep_bound_tokens_per_s"].get<double>() ==
            Approx(1.0 / d["sweep_s"].get<double>()).epsilon(1e-12));
    REQUIRE(d["fraction_of_weight_sweep"].get<double>() ==
            Approx(d["tokens_per_s"].get<double>() / d["sweep_bound_tokens_per_s"].get<double>())
                .epsilon(1e-12));
    // Paired with it: the steps again, each followed by one sweep; the pair
    // shown is the one whose sweep / step is the median (the lower middle of
    // an even count), recomputed here from the pairs the JSON lists. cpu-ref's
    // row is not paired (not tuned, as its prefill rows).
    REQUIRE(bj["decode"].size() == 2);
    REQUIRE(d["backend"] == "cpu");
    REQUIRE_FALSE(bj["decode"][1].contains("fraction_of_paired_sweep"));
    const std::vector<double> steps = d["paired_step_s"], sweeps = d["paired_sweep_s"];
    REQUIRE(steps.size() == 3);  // --decode-steps
    REQUIRE(sweeps.size() == steps.size());
    std::vector<std::pair<double, std::size_t>> pair_ratios;
    for (std::size_t i = 0; i < steps.size(); ++i) {
        REQUIRE(steps[i] > 0);
        REQUIRE(sweeps[i] > 0);
        pair_ratios.push_back({sweeps[i] / steps[i], i});
    }
    std::sort(pair_ratios.begin(), pair_ratios.end());
    const auto [pair_ratio, pair] = pair_ratios[(pair_ratios.size() - 1) / 2];
    REQUIRE(d["fraction_of_paired_sweep"].get<double>() == Approx(pair_ratio).epsilon(1e-9));
    REQUIRE(d["paired_step_ms"].get<double>() == Approx(steps[pair] * 1e3).epsilon(1e-12));
    REQUIRE(d["paired_sweep_ms"].get<double>() == Approx(sweeps[pair] * 1e3).epsilon(1e-12));
    // --shape (or --random) names the shape of random weights; not beside --model, not unknown.
    require_one_line_cli_error(run_cli({"bench", "--shape", "stories1b"}),
                               "unknown model shape 'stories1b'; valid shapes: small, stories15m, "
                               "stories110m");
    // A peak size out of range is refused before anything is measured.
    for (const char* n : {"16", "100000"})
        require_one_line_cli_error(
            run_cli({"bench", "--model", model, "--lengths", "32", "--peak-size", n}),
            std::string("--peak-size ") + n + " must be in 64..8192 (the n of the n^3 GEMMs");
    const auto both = run_cli({"bench", "--random", "small", "--model", model});
    REQUIRE(both.exit_code != 0);
    REQUIRE(both.err.find("excludes") != std::string::npos);
}

TEST_CASE("plab bench holds gpu rows to the device's own cuBLAS peak, or to none", "[cli]") {
    // A GPU does not run on the host's FMAs: its rows' "of peak" is against
    // the device's float32 GEMM (cuBLAS SGEMM, measured in the same run). Where
    // the GPU backends run emulated there is no device to measure: no peak,
    // no fraction, and a note that says why. The same test takes the native
    // branch on a CUDA machine (kernels/device-check.sh runs it there).
    const std::string model = small_model_dir().string();
    const auto info = nlohmann::json::parse(run_cli({"info", "--model", model, "--json"}).out);
    const bool native = info["gpu_form"].get<std::string>().find("native") != std::string::npos;
    const auto b =
        run_cli({"bench", "--model", model, "--backends", "cpu,gpu", "--lengths", "8", "--repeats",
                 "1", "--decode-steps", "2", "--peak-size", "64", "--json"});
    REQUIRE(b.exit_code == 0);
    const auto j = nlohmann::json::parse(b.out);
    REQUIRE(j["prefill"].size() == 2);
    const auto& cpu = j["prefill"][0];
    const auto& gpu = j["prefill"][1];
    REQUIRE(gpu["backend"].get<std::string>().rfind("gpu", 0) == 0);
    // Only the tuned host backend's rows are paired with the host's GEMM.
    REQUIRE(cpu.contains("fraction_of_paired_peak"));
    REQUIRE_FALSE(gpu.contains("fraction_of_paired_peak"));
    // The cpu row keeps the host's peak.
    REQUIRE(
        cpu["fraction_of_peak"].get<double>() ==
        Approx(cpu["gflops"].get<double>() / j["gemm_peak_gflops"].get<double>()).epsilon(1e-12));
    if (native) {
        const double peak = j["device_gemm_peak_gflops"];
        REQUIRE(peak > 0);
        REQUIRE(j["device_gemm_peak_size"].get<int>() >= 256);
        REQUIRE(j["device_gemm_peak_source"].get<std::string>().rfind("cuBLAS ", 0) == 0);
        REQUIRE(j["device_gemm_peak_note"] == "");
        REQUIRE(gpu["fraction_of_peak"].get<double>() ==
                Approx(gpu["gflops"].get<double>() / peak).epsilon(1e-12));
    } else {
        REQUIRE(j["device_gemm_peak_gflops"].is_null());
        REQUIRE(j["device_gemm_peak_note"].get<std::string>().rfind(
                    "the GPU backends run emulated here: ", 0) == 0);
        REQUIRE(gpu["fraction_of_peak"].is_null());
    }
    // Without a GPU backend nothing is measured on the device, and no key says otherwise.
    const auto c = nlohmann::json::parse(
        run_cli({"bench", "--model", model, "--backends", "cpu", "--lengths", "8", "--repeats", "1",
                 "--decode-steps", "2", "--peak-size", "64", "--json"})
            .out);
    REQUIRE_FALSE(c.contains("device_gemm_peak_gflops"));
}

TEST_CASE("named shapes: stories110m is llama2.c's 110M model", "[cli][shapes]") {
    const ModelConfig c = named_shape("stories110m");
    const long long D = c.dim, F = c.hidden_dim, V = c.vocab_size, L = c.n_layers;
    REQUIRE(c.n_heads * c.head_dim == c.dim);
    // Tied embeddings: V·D once, per layer 4·D² (Q, K, V, O) + 3·D·F (SwiGLU) + 2·D (norms).
    REQUIRE(static_cast<long long>(c.n_params()) ==
            V * D + L * (4 * D * D + 3 * D * F + 2 * D) + D);
    REQUIRE(c.n_params() > 109'000'000);
    REQUIRE(c.n_params() < 110'000'000);
}

TEST_CASE("plab prefill --attention prints each probed head's T x T probabilities", "[cli]") {
    const std::string model = small_model_dir().string();
    const auto r = run_cli({"prefill", "--model", model, "--chunks", "3", "--repeats", "1",
                            "--attention", "0:1,1:0", "--json", "Once upon a time"});
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    const std::size_t t = j["tokens"].size();
    REQUIRE(j["attention"].size() == 2);
    REQUIRE(j["attention"][1]["layer"] == 1);
    REQUIRE(j["attention"][1]["head"] == 0);
    for (const auto& a : j["attention"]) {
        const auto probs = a["probs"].get<std::vector<std::vector<float>>>();
        REQUIRE(probs.size() == t);
        for (std::size_t q = 0; q < t; ++q) {
            INFO("query " << q);
            REQUIRE(probs[q].size() == t);
            double sum = 0;
            for (std::size_t k = 0; k < t; ++k) {
                if (k > q) REQUIRE(probs[q][k] == 0.0f);  // causal: nothing ahead
                sum += probs[q][k];
            }
            REQUIRE(sum == Approx(1.0).epsilon(1e-5));  // a softmax row, in float
        }
        REQUIRE(probs[0][0] == 1.0f);  // the first query sees only itself
    }
    require_one_line_cli_error(run_cli({"prefill", "--model", model, "--attention", "1:9", "hi"}),
                               "head 9 is not in 0..");
    require_one_line_cli_error(run_cli({"prefill", "--model", model, "--attention", "13", "hi"}),
                               "--attention item '13' must be LAYER:HEAD, e.g. 1:2");
}

TEST_CASE("the prompt as positional text or as --prompt TEXT is the same prompt", "[cli]") {
    const std::string model = small_model_dir().string();
    const auto positional = run_cli({"prefill", "--model", model, "--json", "Once upon a time"});
    const auto named =
        run_cli({"prefill", "--model", model, "--json", "--prompt", "Once upon a time"});
    const auto other = run_cli({"prefill", "--model", model, "--json", "--prompt", "A cat sat"});
    REQUIRE(positional.exit_code == 0);
    REQUIRE(named.exit_code == 0);
    REQUIRE(other.exit_code == 0);
    auto tokens_of = [](const std::string& out) {
        const auto j = nlohmann::json::parse(out);
        return std::make_pair(j.at("tokens").get<std::vector<int>>(),
                              j.at("first_token").at("id").get<int>());
    };
    REQUIRE(tokens_of(named.out) == tokens_of(positional.out));
    REQUIRE(tokens_of(other.out) != tokens_of(positional.out));  // the text was read, not a default
}

TEST_CASE("plab prefill times warm runs and prints the cold first run apart", "[cli]") {
    const std::string model = small_model_dir().string();
    const auto r = run_cli({"prefill", "--model", model, "--repeats", "4", "--json", "abc"});
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["warm_runs"] == 4);
    REQUIRE(j["prefill_ms"].get<double>() > 0);
    REQUIRE(j["cold_prefill_ms"].get<double>() > 0);
    const auto text = run_cli({"prefill", "--model", model, "--repeats", "2", "abc"});
    REQUIRE(text.out.find("time: median of 2 warm runs, each on a fresh KV cache; the first, "
                          "cold run took ") != std::string::npos);
    require_one_line_cli_error(run_cli({"prefill", "--model", model, "--repeats", "0"}),
                               "--repeats 0 must be between 1 and 1000");
    require_one_line_cli_error(run_cli({"generate", "--model", model, "--repeats", "-1"}),
                               "--repeats -1 must be between 1 and 1000");
}

TEST_CASE("bad input: one clear line, non-zero exit, never a crash", "[cli]") {
    const std::string model = small_model_dir().string();
    const std::string long_prompt(300, 'a');  // > max_seq_len 256
    require_one_line_cli_error(run_cli({"prefill", "--model", model, "--prompt-file", "/dev/null"}),
                               "empty");
    require_one_line_cli_error(run_cli({"prefill", "--model", model, "--prompt-file", "/"}),
                               "is a directory");
    require_one_line_cli_error(run_cli({"prefill", "--model", model, long_prompt}),
                               "longer than the model's max_seq_len");
    require_one_line_cli_error(run_cli({"prefill", "--model", model, "--tokens", "1,2,999"}),
                               "out of range");
    require_one_line_cli_error(run_cli({"prefill", "--model", model, "--tokens", "1,x"}),
                               "not a whole number");
    // A stray comma is an empty item, reported, not dropped.
    require_one_line_cli_error(run_cli({"prefill", "--model", model, "--tokens", "1,2,"}),
                               "--tokens: empty entry in '1,2,'; expected e.g. 1,2,3");
    require_one_line_cli_error(run_cli({"toy", "--values", "2,,8,10"}),
                               "--values: empty entry in '2,,8,10'");
    // An empty prompt typed on purpose is an error, in either spelling; only
    // a prompt left out means the built-in one.
    for (const char* spelling : {"", "--prompt"}) {
        std::vector<std::string> args = {"prefill", "--model", model};
        if (*spelling != 0) args.push_back(spelling);
        args.push_back("");
        require_one_line_cli_error(run_cli(args), "the prompt is empty; give some text");
    }
    require_one_line_cli_error(
        run_cli({"prefill", "--model", model, "--prompt", "Once", "--tokens", "1,2"}),
        "give the prompt one way");
    require_one_line_cli_error(run_cli({"prefill", "--model", model, "--chunks", "0", "abc"}),
                               "at least 1");
    require_one_line_cli_error(run_cli({"prefill", "--model", model, "--chunks", "2,-1,4", "abc"}),
                               "at least 1");
    require_one_line_cli_error(run_cli({"prefill", "--model", model, "--chunks", "1,1", "abc"}),
                               "sums to 2");
    require_one_line_cli_error(run_cli({"prefill", "--model", model, "--backend", "tpu"}),
                               "valid backends: cpu-ref, cpu");
    require_one_line_cli_error(run_cli({"prefill", "--model", "/nonexistent"}), "does not exist");
    require_one_line_cli_error(run_cli({"toy", "--values", "1,2", "--keys", "1"}),
                               "one of each per position");
    require_one_line_cli_error(run_cli({"toy", "--values", "1,nan"}), "not a finite number");
    require_one_line_cli_error(run_cli({"generate", "--model", model, "--temperature", "-1"}),
                               "temperature");
    require_one_line_cli_error(run_cli({"prefill", "--model", model, "--block-size", "0"}),
                               "block size");

    // A truncated model file.
    const fs::path broken =
        fs::path(model).parent_path() / ("plab_cli_broken_" + std::to_string(::getpid()));
    fs::remove_all(broken);
    fs::copy(model, broken);
    fs::resize_file(broken / "model.safetensors", 1000);
    require_one_line_cli_error(run_cli({"info", "--model", broken.string()}), "model.safetensors");
    fs::remove_all(broken);

    // Usage errors the parser (CLI11) finds are one line too (issue 43).
    require_one_line_cli_error(run_cli({"prefill", "--no-such-flag"}),
                               "prefill: unknown option --no-such-flag");
}

// Issue 43: the CLI introduces itself. Six cases: `plab` alone, `plab --help`,
// `plab --version` (and `plab version`), an unknown command, the parser's own
// errors as one line, and the nearest known name suggested.
TEST_CASE("the CLI introduces itself: commands, version, one-line usage errors", "[cli]") {
    // 1-2. `plab` and `plab --help`: every command with its summary, and lesson 1.
    const auto bare = run_cli({});
    const auto help = run_cli({"--help"});
    for (const auto* r : {&bare, &help}) {
        INFO("stdout: " << r->out << "stderr: " << r->err);
        REQUIRE(r->exit_code == 0);
        REQUIRE(r->err.empty());
        for (const char* command :
             {"toy", "prefill", "generate", "bench", "info", "eval", "convert", "random-model",
              "compare", "mask", "rounding", "serve", "version"}) {
            INFO(command);
            REQUIRE(r->out.find("\n  " + std::string(command) + " ") != std::string::npos);
        }
        REQUIRE(r->out.find("the [2,4,8,10] attention example") != std::string::npos);
        REQUIRE(r->out.find("lesson 1, lessons/01-toy-example.md") != std::string::npos);
        REQUIRE(fs::exists(fs::path(PLAB_LESSONS_DIR) / "01-toy-example.md"));
    }
    REQUIRE(bare.out == help.out);
    // A command's own help is still CLI11's page of its options.
    const auto prefill_help = run_cli({"prefill", "--help"});
    REQUIRE(prefill_help.exit_code == 0);
    REQUIRE(prefill_help.out.find("--chunks") != std::string::npos);

    // 3. The version: "plab <version>" from CMakeLists.txt's project(), then the formats.
    const auto version = run_cli({"--version"});
    REQUIRE(version.exit_code == 0);
    REQUIRE(version.out.rfind("plab " PLAB_TEST_VERSION "\n", 0) == 0);
    REQUIRE(version.out.find("model files: llama2.c") != std::string::npos);
    REQUIRE(version.out.find("safetensors") != std::string::npos);
    REQUIRE(run_cli({"version"}).out == version.out);

    // 4. An unknown command, and a typo of one.
    require_one_line_cli_error(run_cli({"bogus"}), "unknown command 'bogus' (plab --help");
    require_one_line_cli_error(run_cli({"prefil"}), "did you mean 'prefill'?");

    // 5. What the parser rejects: one line "plab: error: ...", exit 1, the command named.
    require_one_line_cli_error(run_cli({"generate", "-n", "abc"}),
                               "generate: --max-new-tokens expects a value of type");
    require_one_line_cli_error(run_cli({"convert", "a", "b", "--to", "onnx"}),
                               "convert: --to: onnx not in {safetensors,llama2c,gguf}");
    require_one_line_cli_error(run_cli({"prefill", "--prompt-file"}),
                               "prefill: --prompt-file needs a value");
    require_one_line_cli_error(run_cli({"convert", "a"}),
                               "(plab convert --help lists its options)");

    // 6. An unknown option close to a known one is named; a far one is not guessed.
    require_one_line_cli_error(run_cli({"prefill", "--chunk", "4"}),
                               "prefill: unknown option --chunk; did you mean --chunks?");
    require_one_line_cli_error(run_cli({"prefill", "--chunk=4"}), "did you mean --chunks?");
    require_one_line_cli_error(run_cli({"bench", "--lenghts", "64"}), "did you mean --lengths?");
    require_one_line_cli_error(run_cli({"--verison"}), "did you mean --version?");
    const auto far = run_cli({"prefill", "--zzzzzz"});
    REQUIRE(far.err.find("did you mean") == std::string::npos);
    require_one_line_cli_error(far, "unknown option --zzzzzz");
}

TEST_CASE("a model is named as the user gave it and the default one as assets/model", "[cli]") {
    // Lessons show this output; an absolute path would be the lesson writer's
    // checkout, never the reader's.
    const auto d = nlohmann::json::parse(run_cli({"info", "--json"}).out);
    CHECK(d["model"] == "assets/model");
    CHECK(run_cli({"info"}).out.find("Model: assets/model\n") != std::string::npos);
    const std::string dir = small_model_dir().string();
    const auto given = nlohmann::json::parse(run_cli({"info", "--model", dir, "--json"}).out);
    CHECK(given["model"] == dir);
    const auto env =
        nlohmann::json::parse(test::run_cli_env("PLAB_MODEL=" + dir, {"info", "--json"}).out);
    CHECK(env["model"] == dir);
}

TEST_CASE(
    "CLI edges a lecturer hit: an empty prompt option and unquoted words and a short mask and the "
    "context end",
    "[cli]") {
    const std::string model = small_model_dir().string();
    // "" is a mistake to report, never a request for the built-in prompt.
    require_one_line_cli_error(run_cli({"prefill", "--model", model, "--tokens", ""}),
                               "--tokens is empty; give token ids like 256,72,105");
    require_one_line_cli_error(run_cli({"prefill", "--model", model, "--prompt-file", ""}),
                               "--prompt-file is empty");
    // Unquoted words: named in the order typed, option values left out.
    require_one_line_cli_error(
        run_cli({"prefill", "--model", model, "--chunks", "4", "Once", "upon", "a", "time"}),
        "prefill: the prompt is several words; quote it: plab prefill \"Once upon a time\"");
    require_one_line_cli_error(run_cli({"generate", "Once", "upon", "-n", "3"}),
                               "quote it: plab generate \"Once upon\"");

    // The default tile fits a short mask; a tile the user gives must fit.
    const auto short_mask = run_cli({"mask", "causal", "--length", "3", "--json"});
    REQUIRE(short_mask.exit_code == 0);
    CHECK(nlohmann::json::parse(short_mask.out)["tile"] == 3);
    CHECK(nlohmann::json::parse(run_cli({"mask", "causal", "--json"}).out)["tile"] == 4);
    require_one_line_cli_error(run_cli({"mask", "causal", "--length", "3", "--tile", "4"}),
                               "--tile 4 must be between 1 and the length 3");

    // -n past the context: generates to max_seq_len and says why on stderr.
    const auto info = nlohmann::json::parse(run_cli({"info", "--model", model, "--json"}).out);
    const int max_seq_len = info["config"]["max_position_embeddings"];
    const auto longer = run_cli({"generate", "--model", model, "--tokens", "1,2,3", "-n",
                                 "1000000000", "--no-stop", "--json"});
    REQUIRE(longer.exit_code == 0);
    CHECK(nlohmann::json::parse(longer.out)["new_tokens"].size() == std::size_t(max_seq_len - 3));
    CHECK(longer.err.find("plab: note: stopped after " + std::to_string(max_seq_len - 3) +
                          " new tokens of the 1000000000 asked: the sequence reached the "
                          "model's max_seq_len of " +
                          std::to_string(max_seq_len)) != std::string::npos);
    const auto shorter = run_cli(
        {"generate", "--model", model, "--tokens", "1,2,3", "-n", "4", "--no-stop", "--json"});
    CHECK(shorter.err.empty());
}

TEST_CASE("a model file is diagnosed by its name and magic, not as a missing directory",
          "[cli][model]") {
    const fs::path dir = test::process_temp_dir("plab_cli_files");
    test::write_bytes(dir / "empty.gguf", "");
    test::write_bytes(dir / "noise.gguf", std::string("\x13\x37 not a gguf file at all", 25));
    test::write_bytes(dir / "notes.txt", "hello");
    for (const char* name : {"empty.gguf", "noise.gguf"}) {
        INFO(name);
        const auto r = run_cli({"info", "--model", (dir / name).string()});
        require_one_line_cli_error(r, name);
        CHECK(r.err.find("GGUF") != std::string::npos);
        CHECK(r.err.find("config.json") == std::string::npos);
    }
    require_one_line_cli_error(run_cli({"info", "--model", (dir / "notes.txt").string()}),
                               "is in no format plab reads; give one of: GGUF file (.gguf)");
}
