// The roofline of `plab bench --plot` (issue 13): the log-axis and tick math
// on its own, the figure's points recomputed from a bench report by hand, and
// the drawn image read back from its PNG: the peak line on the row the
// mapping gives, the slanted line ending at the ridge, each marker on the
// pixel its (FLOP/byte, GFLOP/s) maps to. Then the CLI end to end.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/shapes.h"
#include "perf/canvas.h"
#include "perf/roofline_plot.h"
#include "runtime/cost_model.h"
#include "test_util.h"

// The decoder the check uses is not the encoder under test: stb_image reads
// the PNG as any viewer would (internal linkage, like canvas.cpp's writer).
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#include <stb_image.h>

using namespace plab;
namespace fs = std::filesystem;

namespace {

// A PNG read back: width, height and (height, width, 3) bytes.
struct Image {
    int width = 0, height = 0;
    std::vector<std::uint8_t> rgb;
    Rgb at(int x, int y) const {
        const std::uint8_t* p = &rgb[(std::size_t(y) * width + x) * 3];
        return {p[0], p[1], p[2]};
    }
};

Image read_png(const std::string& path) {
    Image im;
    int channels = 0;
    unsigned char* data = stbi_load(path.c_str(), &im.width, &im.height, &channels, 3);
    INFO("stb_image: " << (data == nullptr ? stbi_failure_reason() : "ok") << " reading " << path);
    REQUIRE(data != nullptr);
    REQUIRE(channels == 3);  // written as RGB, no alpha
    im.rgb.assign(data, data + std::size_t(im.width) * im.height * 3);
    stbi_image_free(data);
    return im;
}

std::string rgb_text(Rgb c) {
    return "(" + std::to_string(c.r) + "," + std::to_string(c.g) + "," + std::to_string(c.b) + ")";
}

// A bench report built by hand on the stories15M shape: a machine of 100
// GFLOP/s and 10 GB/s (ridge 10 FLOP/byte), prefill at 128 and 512 tokens,
// one decode row, batched decode at b = 4 and 16, each figure derived from
// runtime/cost_model.h the way run_bench derives it; a second CPU backend (cpu-ref)
// and a GPU backend, whose rows the host's roofline must leave out.
BenchReport hand_built_report() {
    BenchReport r;
    r.config = named_shape("stories15m");
    const ModelConfig& c = r.config;
    r.machine.gemm_gflops = 100;
    r.machine.eigen_gemm_gflops = 100;
    r.machine.engine_gemm_gflops = 80;
    r.machine.read_gb_per_s = 10;
    r.machine.copy_gb_per_s = 12;
    r.machine.threads = 2;
    const auto prefill = [&](const std::string& backend, int n, double gflops) {
        PrefillBenchRow p;
        p.backend = backend;
        p.tokens = n;
        p.gflops = gflops;
        p.median_s = prefill_cost(c, n).total() / (gflops * 1e9);
        p.fraction_of_peak = backend.rfind("cpu", 0) == 0 ? gflops / 100 : 0;
        return p;
    };
    // Far below the peak (0.4 of a decade and more), so their labels stay off its line.
    r.prefill = {prefill("cpu", 128, 30), prefill("cpu", 512, 40), prefill("cpu-ref", 512, 2),
                 prefill("gpu", 512, 3000)};
    DecodeBenchRow d;
    d.backend = "cpu";
    d.context = 144;
    d.tokens_per_s = 150;
    d.median_step_s = 1 / d.tokens_per_s;
    d.bytes_per_token = decode_bytes(c, d.context);
    d.bound_tokens_per_s = 12e9 / d.bytes_per_token;
    r.decode = {d};
    const auto batch = [&](int b, double gflops) {
        const DecodeStepCost k = decode_step_cost(c, b, 40.5);
        DecodeBatchRow row;
        row.backend = "cpu";
        row.batch = b;
        row.context = 40.5;
        row.flops_per_step = k.flops();
        row.bytes_per_step = k.bytes();
        row.median_step_s = k.flops() / (gflops * 1e9);
        row.bound_tokens_per_s = 1;
        return row;
    };
    r.decode_batch = {batch(4, 6), batch(16, 15)};
    return r;
}

const RooflinePoint& point(const RooflineFigure& f, RooflinePointKind kind, int size,
                           const std::string& backend = "cpu") {
    for (const RooflinePoint& p : f.points) {
        if (p.kind == kind && p.size == size && p.backend == backend) return p;
    }
    FAIL("no point of size " << size << " for " << backend);
    throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("decade_range holds the values with the margin, on powers of ten", "[roofline]") {
    const DecadeRange a = decade_range(0.37, 240);  // margin 1.5: 0.247 .. 360
    REQUIRE(a.lo == Approx(0.1));
    REQUIRE(a.hi == Approx(1000));
    const DecadeRange b = decade_range(1, 10, 1.0);  // exactly on decades, no margin
    REQUIRE(b.lo == Approx(1));
    REQUIRE(b.hi == Approx(10));
    const DecadeRange c = decade_range(1, 10, 1.5);
    REQUIRE(c.lo == Approx(0.1));
    REQUIRE(c.hi == Approx(100));
    const DecadeRange d = decade_range(5, 5);  // one value still spans a decade
    REQUIRE(d.lo == Approx(1));
    REQUIRE(d.hi == Approx(10));
}

TEST_CASE("LogAxis maps equal ratios to equal distances, both ways", "[roofline]") {
    const LogAxis x{0.1, 1000, 100, 900};  // 4 decades over 800 px
    REQUIRE(x.pixels_per_decade() == Approx(200));
    REQUIRE(x.to_pixel(0.1) == Approx(100));
    REQUIRE(x.to_pixel(1000) == Approx(900));
    REQUIRE(x.to_pixel(1) == Approx(300));
    REQUIRE(x.to_pixel(std::sqrt(10.0)) == Approx(400));  // half a decade
    const LogAxis y{1, 1000, 700, 100};                   // a y axis: the larger value higher up
    REQUIRE(y.pixels_per_decade() == Approx(200));
    REQUIRE(y.to_pixel(10) == Approx(500));
    REQUIRE(y.to_pixel(2) < y.to_pixel(1));
    for (double v : {0.13, 0.5, 7.3, 42.0, 999.0})
        REQUIRE(x.to_value(x.to_pixel(v)) == Approx(v).epsilon(1e-12));
}

TEST_CASE("log_ticks: decades, then 2s and 5s, labelled as room allows", "[roofline]") {
    SECTION("200 px a decade: every 1, 2 and 5, all labelled") {
        const std::vector<Tick> t = log_ticks({0.1, 1000, 0, 800}, 40);
        const std::vector<double> want = {0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000};
        REQUIRE(t.size() == want.size());
        for (std::size_t i = 0; i < t.size(); ++i) {
            INFO("tick " << i);
            REQUIRE(t[i].value == Approx(want[i]));
            REQUIRE(t[i].major == (i % 3 == 0));  // 0.1, 1, 10, 100, 1000
            REQUIRE(t[i].labelled);               // the 5-10 gap is 60 px >= 40
        }
    }
    SECTION("100 px a decade: minors drawn, only decades labelled") {
        const std::vector<Tick> t = log_ticks({1, 100, 200, 0}, 40);  // a y axis
        REQUIRE(t.size() == 7);                                       // 1 2 5 10 20 50 100
        for (const Tick& k : t) REQUIRE(k.labelled == k.major);       // 30 px < 40
    }
    SECTION("25 px a decade: no minors, every second decade labelled") {
        const std::vector<Tick> t = log_ticks({0.1, 1000, 0, 100}, 40);
        REQUIRE(t.size() == 5);  // 5-10 would be 7.5 px < kMinMinorTickGapPx
        // ceil(40 / 25) = 2: the even powers of ten, 10^0 and 10^2.
        const std::vector<bool> labelled = {false, true, false, true, false};
        for (std::size_t i = 0; i < t.size(); ++i) {
            REQUIRE(t[i].major);
            REQUIRE(t[i].labelled == labelled[i]);
        }
    }
    REQUIRE(tick_label(0.1) == "0.1");
    REQUIRE(tick_label(2 * std::pow(10.0, -1)) == "0.2");  // pow's 10^-1 is not exactly 0.1
    REQUIRE(tick_label(1000) == "1000");
    REQUIRE(tick_label(0.005) == "0.005");
}

TEST_CASE("prefill_bytes: every weight once, the K/V of every position once", "[roofline]") {
    for (const std::string shape : {"stories15m", "small"}) {  // tied and untied embeddings
        INFO(shape);
        const ModelConfig c = named_shape(shape);
        const double row = c.tied_embeddings ? 0 : 4.0 * c.dim;
        const double kv = 4.0 * c.kv_floats_per_token();
        // One token: the decode step's bytes with its own position counted.
        for (int pos0 : {0, 7, 100})
            REQUIRE(prefill_bytes(c, 1, pos0) == decode_bytes(c, pos0 + 1));
        // n tokens: n embedding rows (untied) and n more K/V positions, not n copies of the weights.
        REQUIRE(prefill_bytes(c, 64, 0) == Approx(decode_bytes(c, 64) + 63 * row));
        REQUIRE(prefill_bytes(c, 64, 10) - prefill_bytes(c, 64, 0) == Approx(10 * kv));
    }
    // stories15M at 2048 tokens: 4 bytes x (15.2M parameters + 2048 x 3456 K/V floats).
    const ModelConfig s = named_shape("stories15m");
    REQUIRE(prefill_bytes(s, 2048) == Approx(4.0 * (s.n_params() + 2048.0 * 2 * 6 * 288)));
}

TEST_CASE("roofline_figure: one point per CPU row, each coordinate recomputed by hand",
          "[roofline]") {
    const BenchReport r = hand_built_report();
    const ModelConfig& c = r.config;
    const RooflineFigure f = roofline_figure(r, "random stories15M shape");
    REQUIRE(f.peak_gflops == 100);
    REQUIRE(f.read_gb_per_s == 10);
    REQUIRE(f.ridge_flops_per_byte() == Approx(10));
    REQUIRE(f.peak_source == "Eigen GEMM");  // Eigen 100 beat the engine's 80
    REQUIRE(f.title.find("random stories15M shape") != std::string::npos);
    REQUIRE(f.title.find("2 threads") != std::string::npos);
    // 2 + 1 prefill (the gpu row left out), 1 decode, 2 batched.
    REQUIRE(f.points.size() == 6);
    for (const RooflinePoint& p : f.points) REQUIRE(p.backend != "gpu");
    REQUIRE(f.backends == std::vector<std::string>{"cpu", "cpu-ref"});

    const RooflinePoint p512 = point(f, RooflinePointKind::prefill, 512);
    REQUIRE(p512.label == "prefill 512");
    REQUIRE(p512.gflops == 40);
    REQUIRE(p512.flops_per_byte == Approx(prefill_cost(c, 512).total() / prefill_bytes(c, 512)));
    REQUIRE(point(f, RooflinePointKind::prefill, 512, "cpu-ref").label == "prefill 512");

    const RooflinePoint dec = point(f, RooflinePointKind::decode, 144);
    REQUIRE(dec.label == "decode");
    const double per_token = decode_step_cost(c, 1, 144).flops();
    REQUIRE(dec.flops_per_byte == Approx(per_token / decode_bytes(c, 144)));
    REQUIRE(dec.gflops == Approx(per_token * 150 / 1e9));
    // A decode step does ~2 FLOPs per 4-byte weight: ~0.5 FLOP/byte, far left of the ridge.
    REQUIRE(dec.flops_per_byte == Approx(0.5).epsilon(0.1));

    const RooflinePoint b16 = point(f, RooflinePointKind::decode_batch, 16);
    REQUIRE(b16.label == "decode b=16");
    REQUIRE(b16.flops_per_byte == Approx(decode_step_cost(c, 16, 40.5).flops_per_byte()));
    REQUIRE(b16.gflops == Approx(15));
    // Batching moves decode right: b tokens for one read of the weights.
    REQUIRE(b16.flops_per_byte > point(f, RooflinePointKind::decode_batch, 4).flops_per_byte);
    REQUIRE(point(f, RooflinePointKind::decode_batch, 4).flops_per_byte > dec.flops_per_byte);

    // Chunks of 128 read the weights 4 times for 512 tokens: a quarter of the intensity, nearly.
    const RooflineFigure chunked = roofline_figure(r, "x", "128");
    const double x4 = point(chunked, RooflinePointKind::prefill, 512).flops_per_byte;
    double bytes = 0;
    for (int i = 0; i < 4; ++i) bytes += prefill_bytes(c, 128, 128 * i);
    REQUIRE(x4 == Approx(prefill_cost(c, 512).total() / bytes));
    REQUIRE(x4 < p512.flops_per_byte / 3);
}

TEST_CASE("the roofline PNG: peak row, slanted line ending at the ridge, markers where they map",
          "[roofline]") {
    const RooflineFigure f = roofline_figure(hand_built_report(), "random stories15M shape");
    const int width = 1100, height = 700;
    const RooflineLayout l = roofline_layout(f, width, height);
    const std::string path = (test::process_temp_dir("plab_roofline") / "roofline.png").string();
    write_roofline_png(f, path, width, height);
    const Image im = read_png(path);
    REQUIRE(im.width == width);
    REQUIRE(im.height == height);
    // Lossless: the PNG holds exactly the canvas that was drawn.
    REQUIRE(im.rgb == draw_roofline(f, width, height).rgb());

    // The axes hold everything: the ridge and every point inside the plot.
    REQUIRE(l.x.lo <= f.points[0].flops_per_byte);
    REQUIRE(l.px(f.ridge_flops_per_byte()) > l.plot_left);
    REQUIRE(l.px(f.ridge_flops_per_byte()) < l.plot_right);
    REQUIRE(l.py(f.peak_gflops) > l.plot_top);

    // 1. The peak: a flat line on the row the mapping gives for 100 GFLOP/s,
    //    from the ridge to the right edge (its label sits above it).
    const int peak_row = int(std::floor(l.py(f.peak_gflops)));
    const int ridge_col = int(std::floor(l.px(f.ridge_flops_per_byte())));
    for (int x = ridge_col + 3; x < int(l.plot_right) - 3; ++x) {
        INFO("column " << x << " row " << peak_row << ": " << rgb_text(im.at(x, peak_row)));
        REQUIRE(im.at(x, peak_row) == kRoofColour);
    }
    REQUIRE_FALSE(im.at(ridge_col + 20, peak_row + 6) == kRoofColour);  // 2.5 px thick, not 12

    // 2. The ridge: scanning the peak row from 40 px left of it, the first
    //    roof pixel is within the line's width of the ridge's column.
    int first = -1;
    for (int x = ridge_col - 40; x <= ridge_col + 3 && first < 0; ++x) {
        if (im.at(x, peak_row) == kRoofColour) first = x;
    }
    INFO("ridge column " << ridge_col << ", first roof pixel on the peak row at " << first);
    REQUIRE(first >= ridge_col - 3);
    REQUIRE(first <= ridge_col);
    // The slanted line is y = read bandwidth · x below the ridge, and stops there.
    for (double x : {f.ridge_flops_per_byte() / 1.2, f.ridge_flops_per_byte() / 2,
                     f.ridge_flops_per_byte() / 4}) {
        const int px = int(std::floor(l.px(x))), py = int(std::floor(l.py(x * f.read_gb_per_s)));
        INFO("slanted line at " << x << " FLOP/byte: pixel " << px << "," << py << " is "
                                << rgb_text(im.at(px, py)));
        REQUIRE(im.at(px, py) == kRoofColour);
    }
    const double beyond = 2 * f.ridge_flops_per_byte();  // where the slant would continue
    REQUIRE_FALSE(im.at(int(l.px(beyond)), int(l.py(beyond * f.read_gb_per_s))) == kRoofColour);

    // 3. Every point's marker on the pixel its (FLOP/byte, GFLOP/s) maps to, in
    //    its kind's colour: filled for cpu, a ring (hollow) for cpu-ref.
    for (const RooflinePoint& p : f.points) {
        const int px = int(std::floor(l.px(p.flops_per_byte))),
                  py = int(std::floor(l.py(p.gflops)));
        const Rgb want = p.kind == RooflinePointKind::prefill  ? kPrefillColour
                         : p.kind == RooflinePointKind::decode ? kDecodeColour
                                                               : kDecodeBatchColour;
        INFO(p.label << " at " << p.flops_per_byte << " FLOP/byte, " << p.gflops
                     << " GFLOP/s: pixel " << px << "," << py << " is " << rgb_text(im.at(px, py)));
        REQUIRE(px > l.plot_left);
        REQUIRE(px < l.plot_right);
        REQUIRE(py > l.plot_top);
        REQUIRE(py < l.plot_bottom);
        if (p.backend == "cpu") {
            REQUIRE(im.at(px, py) == want);
            // Centred there: its colour 5 px out each way, not 8 px out (radius 6.5).
            for (const auto& [dx, dy] : {std::pair{1, 0}, {-1, 0}, {0, 1}, {0, -1}}) {
                INFO("offset " << dx << "," << dy);
                REQUIRE(im.at(px + 5 * dx, py + 5 * dy) == want);
                REQUIRE_FALSE(im.at(px + 8 * dx, py + 8 * dy) == want);
            }
        } else {
            REQUIRE_FALSE(im.at(px, py) == want);  // hollow
            // The ring's pixel on its radius (kMarkerRadius - 1) to the right.
            const int rx = int(std::floor(l.px(p.flops_per_byte) + kMarkerRadius - 1));
            REQUIRE(im.at(rx, py) == want);
        }
    }
}

TEST_CASE("Canvas: coverage antialiasing, text inside its box, a PNG that cannot be written",
          "[roofline]") {
    Canvas c(40, 30, {255, 255, 255});
    // A rectangle covering half of pixel (10, 10) and all of (11, 10): 50% and 100%.
    c.fill_rect(10.5, 10, 12, 11, {0, 0, 0});
    REQUIRE(c.pixel(10, 10) == Rgb{128, 128, 128});  // 255 - 127.5, rounded
    REQUIRE(c.pixel(11, 10) == Rgb{0, 0, 0});
    REQUIRE(c.pixel(12, 10) == Rgb{255, 255, 255});
    REQUIRE(c.pixel(10, 11) == Rgb{255, 255, 255});
    // A horizontal line 2 px thick centred on y = 20: rows 19 and 20, not 18 or 21.
    c.line(2, 20, 30, 20, 2, {0, 0, 255});
    REQUIRE(c.pixel(15, 19) == Rgb{0, 0, 255});
    REQUIRE(c.pixel(15, 20) == Rgb{0, 0, 255});
    REQUIRE(c.pixel(15, 18) == Rgb{255, 255, 255});
    REQUIRE(c.pixel(15, 21) == Rgb{255, 255, 255});

    // Text: ink inside its box, none outside it; turned, the box turns too.
    for (const bool vertical : {false, true}) {
        INFO((vertical ? "vertical" : "horizontal"));
        Canvas t(120, 120, {255, 255, 255});
        const double w = Canvas::text_width("Roof 42", 2), h = Canvas::text_height(2);
        REQUIRE(w > 0);
        t.text(20, vertical ? 100 : 20, "Roof 42", 2, {0, 0, 0}, vertical);
        const double x0 = 20, x1 = 20 + (vertical ? h : w);
        const double y0 = vertical ? 100 - w : 20, y1 = vertical ? 100 : 20 + h;
        int inside = 0, outside = 0;
        for (int y = 0; y < 120; ++y) {
            for (int x = 0; x < 120; ++x) {
                if (t.pixel(x, y) == Rgb{255, 255, 255}) continue;
                const bool in = x >= x0 - 1 && x < x1 + 1 && y >= y0 - 1 && y < y1 + 1;
                (in ? inside : outside) += 1;
            }
        }
        REQUIRE(inside > 50);  // 6 letters of 2 px strokes
        REQUIRE(outside == 0);
    }
    test::require_error([&] { c.write_png("/nonexistent-plab-dir/x.png"); }, "could not write");
}

TEST_CASE("check_plot_path refuses a name without .png and a path that cannot be written",
          "[roofline]") {
    const fs::path dir = test::process_temp_dir("plab_roofline_path");
    test::require_error([] { check_plot_path("roofline.jpg"); },
                        "must be a file name ending in .png");
    test::require_error([] { check_plot_path(".png"); }, "must be a file name ending in .png");
    test::require_error([] { check_plot_path("/nonexistent-plab-dir/r.png"); }, "cannot write");
    fs::create_directories(dir / "folder.png");
    test::require_error([&] { check_plot_path((dir / "folder.png").string()); }, "is a folder");
    // A new path: accepted, and nothing left behind by the check.
    const fs::path fresh = dir / "fresh.PNG";
    check_plot_path(fresh.string());
    REQUIRE_FALSE(fs::exists(fresh));
    // An existing file: accepted and left as it was.
    const fs::path old = dir / "old.png";
    std::ofstream(old) << "not yet a png";
    check_plot_path(old.string());
    REQUIRE(fs::file_size(old) == 13);
}
