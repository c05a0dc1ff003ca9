// The roofline of one `plab bench` run, drawn as a PNG (`plab bench --plot`).
//
// What it teaches (lessons/06-compute-vs-memory.md, Williams, Waterman and
// Patterson 2009): on log-log axes of arithmetic intensity (FLOP per byte
// read) and speed (GFLOP/s), a machine is two lines — its bandwidth, a slanted
// line y = bandwidth · x, and its peak, a flat line y = peak — meeting at the
// ridge point x = peak / bandwidth. An op left of the ridge is memory-bound,
// right of it compute-bound. Here every figure comes from the same run: the
// peak is the fastest float32 GEMM measured, the slanted line the measured
// read bandwidth (the copy bandwidth dashed beside it), and each point a
// measured row: prefill at each prompt length (weights read once for T
// tokens: far right), decode of one sequence (every weight read for one
// token: far left, ~0.5 FLOP/byte) and batched decode (b tokens per weight
// read: moving right with b, until the step reaches the ridge).
//
// The math (log mapping, tick choice, which rows become which points) is
// pure and tested on its own (tests/perf/test_roofline_plot.cpp); drawing is
// perf/canvas.h. Only CPU backends are placed: the host's peak and bandwidth
// do not bound a GPU (perf/bench.h leaves their fractions 0).
#pragma once

#include <string>
#include <vector>

#include "perf/bench.h"
#include "perf/canvas.h"

namespace plab {

// ---- log axes ------------------------------------------------------------

// One logarithmic axis: value `lo` sits at pixel coordinate `pixel_lo`, `hi`
// at `pixel_hi` (for a y axis pixel_lo is the larger: y grows downwards), and
// equal ratios of value are equal distances: log10(v) maps linearly.
struct LogAxis {
    double lo = 1, hi = 10;
    double pixel_lo = 0, pixel_hi = 1;
    double to_pixel(double v) const;
    double to_value(double pixel) const;
    double pixels_per_decade() const;  // always positive
};

// The decades holding [min, max] with `margin` to spare on each side: [10^a,
// 10^b] with 10^a <= min / margin and 10^b >= max · margin, a < b.
struct DecadeRange {
    double lo = 1, hi = 10;
};
DecadeRange decade_range(double min, double max, double margin = 1.5);

struct Tick {
    double value = 0;
    bool major = false;     // a power of ten
    bool labelled = false;  // gets a tick label
};
// The ticks of an axis: every power of ten in [lo, hi] is a major tick; the
// 2s and 5s of each decade are minor ticks once a decade has room for them
// (the gap between 5 and 10, 0.3 of a decade, at least kMinMinorTickGapPx).
// Labels are at least `min_label_gap_px` apart: every major if decades are
// that far apart (otherwise every 2nd, 3rd... decade), and the minors too
// when the 5-to-10 gap is that wide. In increasing value order.
inline constexpr double kMinMinorTickGapPx = 8;
std::vector<Tick> log_ticks(const LogAxis& axis, double min_label_gap_px);
// "0.01", "0.5", "1", "20", "1000", "1e+06" (%g: no trailing zeros).
std::string tick_label(double v);

// ---- the figure's content ------------------------------------------------

enum class RooflinePointKind { prefill, decode, decode_batch };

struct RooflinePoint {
    RooflinePointKind kind = RooflinePointKind::prefill;
    std::string backend;
    int size = 0;               // prefill: prompt tokens; decode: context; batch: b
    double flops_per_byte = 0;  // x: FLOPs / bytes read (runtime/cost_model.h)
    double gflops = 0;          // y: achieved
    std::string label;          // "prefill 512", "decode", "decode b=16" (whichever backend)
};

struct RooflineFigure {
    std::string title;     // model and machine (threads)
    std::string subtitle;  // the config, one line
    double peak_gflops = 0;
    std::string peak_source;  // which GEMM gave the peak
    double read_gb_per_s = 0;
    double copy_gb_per_s = 0;           // 0: no dashed copy line
    std::vector<std::string> backends;  // in order of first point: filled, ring, ...
    std::vector<RooflinePoint> points;
    double ridge_flops_per_byte() const { return peak_gflops / read_gb_per_s; }
};

// The points of a bench run, for its CPU backends:
//   prefill of T tokens   x = FLOPs of the row (GFLOP/s · median) /
//                             sum over the chunk plan of prefill_bytes
//                             (weights once per chunk, K/V of the prompt)
//                         y = the row's GFLOP/s
//   decode, one sequence  x = decode_step_cost(c, 1, ctx): FLOPs / bytes of one token
//                         y = those FLOPs · tokens/s
//   decode, b sequences   x = flops_per_step / bytes_per_step of the row
//                         y = flops_per_step / median step
// `chunks` is the bench's chunk plan (a chunked prefill reads the weights once
// per chunk); `model_label` names the weights ("random stories15M shape", a path).
RooflineFigure roofline_figure(const BenchReport& r, const std::string& model_label,
                               const std::string& chunks = "full");

// ---- layout and drawing --------------------------------------------------

// Where everything goes on a width x height image: the plot area, the two
// axes and their ticks. The x range holds every point and the ridge with
// room on both sides of it; the y range every point and the peak, with room
// above the peak for its label.
struct RooflineLayout {
    int width = 0, height = 0;
    double plot_left = 0, plot_top = 0, plot_right = 0, plot_bottom = 0;
    LogAxis x, y;
    std::vector<Tick> x_ticks, y_ticks;
    double text_scale = 2;  // stb_easy_font units per pixel of tick and point labels
    // The pixel coordinates (continuous) of a (FLOP/byte, GFLOP/s) pair.
    double px(double flops_per_byte) const { return x.to_pixel(flops_per_byte); }
    double py(double gflops) const { return y.to_pixel(gflops); }
};
RooflineLayout roofline_layout(const RooflineFigure& f, int width, int height);

// The colours, so a test can find what was drawn where.
inline constexpr Rgb kRoofColour{40, 40, 40};
inline constexpr Rgb kCopyRoofColour{130, 130, 130};
inline constexpr Rgb kPrefillColour{31, 119, 180};
inline constexpr Rgb kDecodeColour{214, 39, 40};
inline constexpr Rgb kDecodeBatchColour{255, 127, 14};
inline constexpr double kMarkerRadius = 6.5;
inline constexpr double kRoofWidth = 2.5;

Canvas draw_roofline(const RooflineFigure& f, int width, int height);
// Refuses, before a bench spends minutes measuring, a --plot path that is
// not a .png name or cannot be written (a missing or read-only folder).
void check_plot_path(const std::string& path);
// draw_roofline, written as a PNG at `path` (throws plab::Error if it cannot be).
void write_roofline_png(const RooflineFigure& f, const std::string& path, int width = 1200,
                        int height = 800);

}  // namespace plab
