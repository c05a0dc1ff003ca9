// `plab bench --plot` end to end (issue 13): a real, short bench run writes a
// PNG that decodes, at the size asked, with its points where the run's own
// JSON figures put them; bad --plot values are refused in one line before
// the bench starts.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/shapes.h"
#include "perf/roofline_plot.h"
#include "test_util.h"

#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#include <stb_image.h>

using namespace plab;
using test::run_cli;
namespace fs = std::filesystem;

namespace {

// The bench report as the JSON reports it: what roofline_figure reads.
BenchReport report_from_json(const nlohmann::json& j, const ModelConfig& c) {
    BenchReport r;
    r.config = c;
    r.machine.gemm_gflops = j["gemm_peak_gflops"];
    r.machine.eigen_gemm_gflops = j["gemm_peak_eigen_gflops"];
    r.machine.engine_gemm_gflops = j["gemm_peak_engine_gflops"];
    r.machine.openblas_gemm_gflops = j["gemm_peak_openblas_gflops"];
    r.machine.read_gb_per_s = j["read_gb_per_s"];
    r.machine.copy_gb_per_s = j["copy_gb_per_s"];
    r.machine.threads = j["threads"];
    for (const auto& p : j["prefill"]) {
        PrefillBenchRow row;
        row.backend = p["backend"];
        row.tokens = p["tokens"];
        row.median_s = p["median_s"];
        row.gflops = p["gflops"];
        r.prefill.push_back(row);
    }
    for (const auto& d : j["decode"]) {
        DecodeBenchRow row;
        row.backend = d["backend"];
        row.context = d["context"];
        row.tokens_per_s = d["tokens_per_s"];
        row.bytes_per_token = d["bytes_per_token"];
        r.decode.push_back(row);
    }
    for (const auto& d : j["decode_batch"]) {
        DecodeBatchRow row;
        row.backend = d["backend"];
        row.batch = d["batch"];
        row.flops_per_step = d["flops_per_step"];
        row.bytes_per_step = d["bytes_per_step"];
        row.median_step_s = double(d["step_ms_median"]) / 1e3;
        r.decode_batch.push_back(row);
    }
    return r;
}

}  // namespace

TEST_CASE("plab bench --plot writes a roofline PNG with the run's points where they map",
          "[roofline][cli]") {
    const std::string png = (test::process_temp_dir("plab_bench_plot") / "roofline.png").string();
    const auto r = run_cli({"bench", "--backends", "cpu", "--lengths", "16", "--repeats", "1",
                            "--decode-steps", "2", "--shape", "small", "--batch", "1,2", "--plot",
                            png, "--json"});
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    // --plot leaves the JSON on stdout untouched.
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["prefill"].size() == 1);
    REQUIRE(j["decode_batch"].size() == 2);

    int width = 0, height = 0, channels = 0;
    unsigned char* data = stbi_load(png.c_str(), &width, &height, &channels, 3);
    INFO("stb_image: " << (data == nullptr ? stbi_failure_reason() : "ok"));
    REQUIRE(data != nullptr);
    const std::vector<std::uint8_t> rgb(data, data + std::size_t(width) * height * 3);
    stbi_image_free(data);
    REQUIRE(width == 1200);  // write_roofline_png's default size
    REQUIRE(height == 800);

    // The figure of the same numbers, laid out the same way: each marker's
    // pixel in the PNG has its kind's colour.
    const RooflineFigure f =
        roofline_figure(report_from_json(j, named_shape("small")), "random small shape");
    REQUIRE(f.points.size() == 4);  // prefill 16, decode, decode b=1, b=2
    const RooflineLayout l = roofline_layout(f, width, height);
    const auto at = [&](double x, double y) {
        const std::uint8_t* p =
            &rgb[(std::size_t(std::floor(l.py(y))) * width + std::size_t(std::floor(l.px(x)))) * 3];
        return Rgb{p[0], p[1], p[2]};
    };
    const RooflinePoint& prefill = f.points[0];
    REQUIRE(prefill.label == "prefill 16");
    REQUIRE(at(prefill.flops_per_byte, prefill.gflops) == kPrefillColour);
    // Decode of one sequence and at b = 1 may land on the same spot (the same
    // step, measured twice); the last drawn, b = 2, is on top of its own.
    const RooflinePoint& b2 = f.points[3];
    REQUIRE(b2.label == "decode b=2");
    REQUIRE(at(b2.flops_per_byte, b2.gflops) == kDecodeBatchColour);
}

TEST_CASE("plab bench --plot: a bad name, an unwritable path or no CPU backend is one line, exit 1",
          "[roofline][cli]") {
    // Each is refused before the bench measures anything (it would take seconds).
    const auto bench = [](std::vector<std::string> extra) {
        std::vector<std::string> args = {"bench", "--shape", "small", "--lengths", "16"};
        args.insert(args.end(), extra.begin(), extra.end());
        return run_cli(args);
    };
    test::require_one_line_cli_error(bench({"--plot", "roofline.svg"}),
                                     "'roofline.svg' must be a file name ending in .png");
    test::require_one_line_cli_error(bench({"--plot", "/nonexistent-plab-dir/roofline.png"}),
                                     "--plot: cannot write '/nonexistent-plab-dir/roofline.png'");
    const fs::path dir = test::process_temp_dir("plab_bench_plot_bad");
    test::require_one_line_cli_error(
        bench({"--backends", "gpu-ref", "--plot", (dir / "r.png").string()}),
        "bounds only the cpu backends");
    REQUIRE_FALSE(fs::exists(dir / "r.png"));
}
