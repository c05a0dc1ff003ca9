#include "perf/roofline_plot.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "core/error.h"
#include "perf/flops.h"
#include "runtime/chunk_plan.h"

namespace plab {

// ---- log axes ------------------------------------------------------------

double LogAxis::to_pixel(double v) const {
    const double t = (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
    return pixel_lo + t * (pixel_hi - pixel_lo);
}

double LogAxis::to_value(double pixel) const {
    const double t = (pixel - pixel_lo) / (pixel_hi - pixel_lo);
    return std::pow(10.0, std::log10(lo) + t * (std::log10(hi) - std::log10(lo)));
}

double LogAxis::pixels_per_decade() const {
    return std::abs(pixel_hi - pixel_lo) / (std::log10(hi) - std::log10(lo));
}

DecadeRange decade_range(double min, double max, double margin) {
    PLAB_ASSERT(min > 0 && max >= min && margin >= 1);
    DecadeRange r;
    r.lo = std::pow(10.0, std::floor(std::log10(min / margin)));
    r.hi = std::pow(10.0, std::ceil(std::log10(max * margin)));
    if (r.hi <= r.lo) r.hi = r.lo * 10;
    return r;
}

std::vector<Tick> log_ticks(const LogAxis& axis, double min_label_gap_px) {
    const double ppd = axis.pixels_per_decade();
    // The narrowest gaps between neighbouring ticks of 1, 2, 5, 10: 1-2 and
    // 5-10, log10(2) = 0.30 of a decade each.
    const double minor_gap = ppd * std::log10(2.0);
    const bool minors = minor_gap >= kMinMinorTickGapPx;
    const bool minors_labelled = minor_gap >= min_label_gap_px;
    const int label_every = ppd >= min_label_gap_px ? 1 : int(std::ceil(min_label_gap_px / ppd));
    // A tolerance for values computed by pow: 10^-1 is not exactly 0.1.
    const double lo = axis.lo * (1 - 1e-9), hi = axis.hi * (1 + 1e-9);
    std::vector<Tick> ticks;
    for (int k = int(std::floor(std::log10(axis.lo))); k <= int(std::ceil(std::log10(axis.hi)));
         ++k) {
        const double decade = std::pow(10.0, k);
        const bool labelled = ((k % label_every) + label_every) % label_every == 0;
        if (decade >= lo && decade <= hi) ticks.push_back({decade, true, labelled});
        if (!minors) continue;
        for (double m : {2.0, 5.0}) {
            if (m * decade >= lo && m * decade <= hi)
                ticks.push_back({m * decade, false, minors_labelled});
        }
    }
    return ticks;
}

std::string tick_label(double v) {
    char s[32];
    std::snprintf(s, sizeof(s), "%g", v);
    return s;
}

// ---- the figure's content ------------------------------------------------

std::string peak_source(const MachineSpeed& m) {
    return m.eigen_gemm_gflops >= m.engine_gemm_gflops ? "Eigen's GEMM"
                                                       : "the engine's own GEMM (cpu_gemm)";
}

namespace {

std::string format(const char* fmt, double v) {
    char s[64];
    std::snprintf(s, sizeof(s), fmt, v);
    return s;
}

void add_point(RooflineFigure& f, RooflinePoint p) {
    if (std::find(f.backends.begin(), f.backends.end(), p.backend) == f.backends.end())
        f.backends.push_back(p.backend);
    // The first backend's points carry bare labels; the others say whose they are.
    if (p.backend != f.backends.front()) p.label += " (" + p.backend + ")";
    f.points.push_back(std::move(p));
}

}  // namespace

RooflineFigure roofline_figure(const BenchReport& r, const std::string& model_label,
                               const std::string& chunks) {
    const ModelConfig& c = r.config;
    const MachineSpeed& m = r.machine;
    RooflineFigure f;
    f.peak_gflops = m.gemm_gflops;
    f.peak_source = peak_source(m);
    f.read_gb_per_s = m.read_gb_per_s;
    f.copy_gb_per_s = m.copy_gb_per_s;
    f.title = "Roofline: " + model_label + ", this machine with " + std::to_string(m.threads) +
              " threads, one plab bench run";
    f.subtitle = c.summary() + "\nGEMM peak " + format("%.1f", m.gemm_gflops) + " GFLOP/s (" +
                 f.peak_source + ", 2048^3), read " + format("%.1f", m.read_gb_per_s) +
                 " GB/s, copy " + format("%.1f", m.copy_gb_per_s) + " GB/s, ridge " +
                 format("%.1f", f.ridge_flops_per_byte()) + " FLOP/byte";
    // The host's roofs do not bound a GPU backend: its rows are left out.
    for (const PrefillBenchRow& p : r.prefill) {
        if (!held_to_host_limits(p.backend)) continue;
        const double flops = p.gflops * 1e9 * p.median_s;
        double bytes = 0;  // a chunk reads every weight again (prefill_bytes per chunk)
        int pos0 = 0;
        for (int len : parse_chunk_plan(chunks, p.tokens).lengths) {
            bytes += prefill_bytes(c, len, pos0);
            pos0 += len;
        }
        add_point(f, {RooflinePointKind::prefill, p.backend, p.tokens, flops / bytes, p.gflops,
                      "prefill " + std::to_string(p.tokens)});
    }
    for (const DecodeBenchRow& d : r.decode) {
        if (!held_to_host_limits(d.backend)) continue;
        const DecodeStepCost k = decode_step_cost(c, 1, d.context);
        add_point(f, {RooflinePointKind::decode, d.backend, d.context,
                      k.flops() / d.bytes_per_token, k.flops() * d.tokens_per_s / 1e9, "decode"});
    }
    for (const DecodeBatchRow& d : r.decode_batch) {
        if (!held_to_host_limits(d.backend)) continue;
        add_point(f, {RooflinePointKind::decode_batch, d.backend, d.batch,
                      d.flops_per_step / d.bytes_per_step, d.flops_per_step / d.median_step_s / 1e9,
                      "decode b=" + std::to_string(d.batch)});
    }
    return f;
}

// ---- layout ----------------------------------------------------------------

RooflineLayout roofline_layout(const RooflineFigure& f, int width, int height) {
    PLAB_CHECK(width >= 400 && height >= 300,
               "a roofline of " << width << " x " << height
                                << " pixels has no room for its labels; give at least 400 x 300");
    PLAB_CHECK(f.peak_gflops > 0 && f.read_gb_per_s > 0,
               "a roofline needs a measured peak and read bandwidth (got "
                   << f.peak_gflops << " GFLOP/s, " << f.read_gb_per_s << " GB/s)");
    RooflineLayout l;
    l.width = width;
    l.height = height;
    l.text_scale = height >= 600 ? 2 : 1;
    const double s = l.text_scale;
    // Margins: title and subtitle above; tick labels, axis label and a note below.
    l.plot_left = 50 * s + 12;
    l.plot_right = width - 16 * s;
    l.plot_top = 56 * s;
    l.plot_bottom = height - 44 * s;
    // x: every point, and the ridge with a decade-ish of roof on either side.
    const double ridge = f.ridge_flops_per_byte();
    double x_min = ridge / 4, x_max = ridge * 4;
    double y_min = f.peak_gflops / 10, y_max = f.peak_gflops;
    for (const RooflinePoint& p : f.points) {
        x_min = std::min(x_min, p.flops_per_byte);
        x_max = std::max(x_max, p.flops_per_byte);
        y_min = std::min(y_min, p.gflops);
        y_max = std::max(y_max, p.gflops);
    }
    const DecadeRange xr = decade_range(x_min, x_max);
    // 2: room above the peak line for its label.
    const DecadeRange yr = decade_range(y_min, y_max, 2.0);
    l.x = {xr.lo, xr.hi, l.plot_left, l.plot_right};
    l.y = {yr.lo, yr.hi, l.plot_bottom, l.plot_top};
    // Labels such as "1000" are ~4 letters of 6 units: 30 units apart at least.
    l.x_ticks = log_ticks(l.x, 30 * s);
    l.y_ticks = log_ticks(l.y, 14 * s);
    return l;
}

// ---- drawing ---------------------------------------------------------------

namespace {

constexpr Rgb kWhite{255, 255, 255};
constexpr Rgb kText{30, 30, 30};
constexpr Rgb kMutedText{100, 100, 100};
constexpr Rgb kMajorGrid{215, 215, 215};
constexpr Rgb kMinorGrid{238, 238, 238};

struct Box {
    double x0, y0, x1, y1;
    double overlap(const Box& o) const {
        const double w = std::min(x1, o.x1) - std::max(x0, o.x0);
        const double h = std::min(y1, o.y1) - std::max(y0, o.y0);
        return w > 0 && h > 0 ? w * h : 0;
    }
    bool inside(const Box& o) const { return x0 >= o.x0 && x1 <= o.x1 && y0 >= o.y0 && y1 <= o.y1; }
};

// Greedy label placement: the first candidate box inside the plot that
// touches nothing taken yet, else the one overlapping least.
class Placer {
public:
    explicit Placer(Box area) : area_(area) {}
    void take(Box b) { taken_.push_back(b); }
    Box place(const std::vector<Box>& candidates) {
        const Box* best = nullptr;
        double best_overlap = std::numeric_limits<double>::infinity();
        for (const Box& c : candidates) {
            if (!c.inside(area_)) continue;
            double overlap = 0;
            for (const Box& t : taken_) overlap += c.overlap(t);
            if (overlap < best_overlap) {
                best_overlap = overlap;
                best = &c;
            }
            if (overlap == 0) break;
        }
        const Box chosen = best != nullptr ? *best : candidates.front();
        take(chosen);
        return chosen;
    }

private:
    Box area_;
    std::vector<Box> taken_;
};

// Small boxes along a segment: the roofs as obstacles for labels.
void take_segment(Placer& placer, double x0, double y0, double x1, double y1) {
    const double length = std::hypot(x1 - x0, y1 - y0);
    for (double t = 0; t <= length; t += 4) {
        const double x = x0 + (x1 - x0) * t / length, y = y0 + (y1 - y0) * t / length;
        placer.take({x - 3, y - 3, x + 3, y + 3});
    }
}

// Text with a translucent white box behind it, so grid lines do not cross it.
void label(Canvas& canvas, const Box& b, const std::string& s, double scale, Rgb c) {
    canvas.fill_rect(b.x0 - 2, b.y0, b.x1 + 2, b.y1, kWhite, 0.8);
    canvas.text(b.x0, b.y0 + scale, s, scale, c);
}

Rgb point_colour(RooflinePointKind k) {
    switch (k) {
        case RooflinePointKind::prefill:
            return kPrefillColour;
        case RooflinePointKind::decode:
            return kDecodeColour;
        case RooflinePointKind::decode_batch:
            return kDecodeBatchColour;
    }
    return kText;
}

// The first backend's points are discs; every other backend's are rings.
void marker(Canvas& canvas, double x, double y, Rgb c, bool filled) {
    if (filled)
        canvas.disc(x, y, kMarkerRadius, c);
    else
        canvas.ring(x, y, kMarkerRadius - 1, 2.5, c);
}

// 1. grid, frame, ticks and axis labels.
void draw_axes(Canvas& canvas, const RooflineLayout& l) {
    const double s = l.text_scale;
    for (const Tick& t : l.x_ticks) {
        const double x = l.px(t.value);
        canvas.line(x, l.plot_top, x, l.plot_bottom, 1, t.major ? kMajorGrid : kMinorGrid);
    }
    for (const Tick& t : l.y_ticks) {
        const double y = l.py(t.value);
        canvas.line(l.plot_left, y, l.plot_right, y, 1, t.major ? kMajorGrid : kMinorGrid);
    }
    const double fw = 1.5;  // the frame
    canvas.line(l.plot_left, l.plot_top, l.plot_right, l.plot_top, fw, kMutedText);
    canvas.line(l.plot_left, l.plot_bottom, l.plot_right, l.plot_bottom, fw, kMutedText);
    canvas.line(l.plot_left, l.plot_top, l.plot_left, l.plot_bottom, fw, kMutedText);
    canvas.line(l.plot_right, l.plot_top, l.plot_right, l.plot_bottom, fw, kMutedText);
    for (const Tick& t : l.x_ticks) {
        const double x = l.px(t.value), len = (t.major ? 5 : 3) * s;
        canvas.line(x, l.plot_bottom, x, l.plot_bottom + len, 1.5, kMutedText);
        if (!t.labelled) continue;
        const std::string text = tick_label(t.value);
        canvas.text(x - Canvas::text_width(text, s) / 2, l.plot_bottom + 7 * s, text, s, kText);
    }
    for (const Tick& t : l.y_ticks) {
        const double y = l.py(t.value), len = (t.major ? 5 : 3) * s;
        canvas.line(l.plot_left - len, y, l.plot_left, y, 1.5, kMutedText);
        if (!t.labelled) continue;
        const std::string text = tick_label(t.value);
        canvas.text(l.plot_left - 7 * s - Canvas::text_width(text, s), y - 4.5 * s, text, s, kText);
    }
    const std::string x_label = "arithmetic intensity (FLOP per byte read)";
    canvas.text((l.plot_left + l.plot_right - Canvas::text_width(x_label, s)) / 2,
                l.plot_bottom + 19 * s, x_label, s, kText);
    const std::string y_label = "GFLOP/s (float32, measured)";
    canvas.text(6, (l.plot_top + l.plot_bottom + Canvas::text_width(y_label, s)) / 2, y_label, s,
                kText, /*vertical=*/true);
}

// 2. the roofs: read bandwidth up to the ridge, then the peak; copy dashed.
void draw_roofs(Canvas& canvas, const RooflineLayout& l, const RooflineFigure& f, Placer& placer) {
    const double s = l.text_scale, ridge = f.ridge_flops_per_byte();
    const double rx = l.px(ridge), ry = l.py(f.peak_gflops);
    // The slanted line enters the plot at its left edge or its bottom.
    const auto slant_start = [&](double bw) { return std::max(l.x.lo, l.y.lo / bw); };
    const double ax = slant_start(f.read_gb_per_s);
    const double sx0 = l.px(ax), sy0 = l.py(ax * f.read_gb_per_s);
    // Under the roofs: the ridge's dotted drop to the x axis.
    canvas.dashed_line(rx, ry, rx, l.plot_bottom, 1.5, kCopyRoofColour, 2, 4);
    double cx0 = 0, cy0 = 0, cx1 = 0, cy1 = 0;
    if (f.copy_gb_per_s > 0) {
        const double c0 = slant_start(f.copy_gb_per_s);
        const double c1 = std::min(l.x.hi, f.peak_gflops / f.copy_gb_per_s);
        cx0 = l.px(c0), cy0 = l.py(c0 * f.copy_gb_per_s);
        cx1 = l.px(c1), cy1 = l.py(c1 * f.copy_gb_per_s);
        if (c1 > c0) canvas.dashed_line(cx0, cy0, cx1, cy1, 2, kCopyRoofColour, 10, 7);
        take_segment(placer, cx0, cy0, cx1, cy1);
    }
    canvas.line(sx0, sy0, rx, ry, kRoofWidth, kRoofColour);
    canvas.line(rx, ry, l.plot_right, ry, kRoofWidth, kRoofColour);
    canvas.disc(rx, ry, kRoofWidth / 2, kRoofColour);  // a round joint at the ridge
    take_segment(placer, sx0, sy0, rx, ry);
    take_segment(placer, rx, ry, l.plot_right, ry);
    const double h = Canvas::text_height(s);
    // The peak's label above its line, at the right.
    const std::string peak =
        "peak " + format("%.1f", f.peak_gflops) + " GFLOP/s (" + f.peak_source + ")";
    const double pw = Canvas::text_width(peak, s);
    label(canvas, placer.place({{l.plot_right - 8 - pw, ry - h - 4, l.plot_right - 8, ry - 4}}),
          peak, s, kText);
    // The ridge's, turned, beside its drop at the bottom.
    const std::string ridge_text = "ridge " + format("%.1f", ridge) + " FLOP/byte";
    const double rw = Canvas::text_width(ridge_text, s);
    canvas.text(rx + 4, l.plot_bottom - 6, ridge_text, s, kMutedText, /*vertical=*/true);
    placer.take({rx + 4, l.plot_bottom - 6 - rw, rx + 4 + h, l.plot_bottom - 6});
    // The bandwidths' labels: left of (above) the slanted line at 55% of its
    // way up, the copy line's on the side away from the read line.
    const auto slant_label = [&](const std::string& text, double x0, double y0, double x1,
                                 double y1, bool above, Rgb c) {
        const double x = x0 + 0.55 * (x1 - x0), y = y0 + 0.55 * (y1 - y0);
        const double w = Canvas::text_width(text, s);
        const Box left{x - 10 - w, y - h / 2, x - 10, y + h / 2};
        const Box right{x + 10, y - h / 2, x + 10 + w, y + h / 2};
        label(canvas,
              placer.place(above ? std::vector<Box>{left, right} : std::vector<Box>{right, left}),
              text, s, c);
    };
    slant_label("read " + format("%.1f", f.read_gb_per_s) + " GB/s", sx0, sy0, rx, ry,
                f.read_gb_per_s >= f.copy_gb_per_s, kRoofColour);
    if (f.copy_gb_per_s > 0) {
        slant_label("copy " + format("%.1f", f.copy_gb_per_s) + " GB/s (read + written)", cx0, cy0,
                    cx1, cy1, f.copy_gb_per_s > f.read_gb_per_s, kMutedText);
    }
}

// 3. the legend: what each colour and marker is.
void draw_legend(Canvas& canvas, const RooflineLayout& l, const RooflineFigure& f, Placer& placer,
                 const Box& area) {
    const double s = l.text_scale, h = Canvas::text_height(s), row = h + 4;
    struct Entry {
        Rgb colour;
        bool filled;
        bool line;
        std::string text;
    };
    std::vector<Entry> entries = {
        {kPrefillColour, true, false, "prefill of a cold prompt, one point per length"},
        {kDecodeColour, true, false, "decode, one sequence"},
        {kDecodeBatchColour, true, false, "decode, b sequences per step (--batch)"},
        {kRoofColour, true, true, "roof: read bandwidth, then GEMM peak"}};
    for (std::size_t b = 0; b < f.backends.size() && f.backends.size() > 1; ++b)
        entries.push_back({kMutedText, b == 0, false, "backend " + f.backends[b]});
    double w = 0;
    for (const Entry& e : entries) w = std::max(w, Canvas::text_width(e.text, s));
    w += 36 + 16;
    const double total = entries.size() * row + 12;
    const double pad = 10;
    const Box box = placer.place({
        {area.x0 + pad, area.y0 + pad, area.x0 + pad + w, area.y0 + pad + total},
        {area.x1 - pad - w, area.y1 - pad - total, area.x1 - pad, area.y1 - pad},
        {area.x0 + pad, area.y1 - pad - total, area.x0 + pad + w, area.y1 - pad},
        {area.x1 - pad - w, area.y0 + pad, area.x1 - pad, area.y0 + pad + total},
    });
    canvas.fill_rect(box.x0, box.y0, box.x1, box.y1, kWhite, 0.92);
    canvas.line(box.x0, box.y0, box.x1, box.y0, 1, kMajorGrid);
    canvas.line(box.x0, box.y1, box.x1, box.y1, 1, kMajorGrid);
    canvas.line(box.x0, box.y0, box.x0, box.y1, 1, kMajorGrid);
    canvas.line(box.x1, box.y0, box.x1, box.y1, 1, kMajorGrid);
    double y = box.y0 + 8;
    for (const Entry& e : entries) {
        const double cy = y + h * 0.4;
        if (e.line)
            canvas.line(box.x0 + 8, cy, box.x0 + 36, cy, kRoofWidth, e.colour);
        else
            marker(canvas, box.x0 + 22, cy, e.colour, e.filled);
        canvas.text(box.x0 + 44, y, e.text, s, kText);
        y += row;
    }
}

}  // namespace

Canvas draw_roofline(const RooflineFigure& f, int width, int height) {
    const RooflineLayout l = roofline_layout(f, width, height);
    const double s = l.text_scale;
    Canvas canvas(width, height, kWhite);
    // Title and subtitle above the plot.
    canvas.text(l.plot_left, 6 * s, f.title, s * 1.25, kText);
    double y = 6 * s + Canvas::text_height(s * 1.25) + 2;
    std::size_t start = 0;
    while (start <= f.subtitle.size()) {
        const std::size_t end = std::min(f.subtitle.find('\n', start), f.subtitle.size());
        canvas.text(l.plot_left, y, f.subtitle.substr(start, end - start), s, kMutedText);
        y += Canvas::text_height(s);
        start = end + 1;
    }
    draw_axes(canvas, l);
    // A note under the x axis label: what x and y count.
    canvas.text(l.plot_left, l.plot_bottom + 31 * s,
                "x: FLOPs as plab bench counts them / bytes read at least (every weight once, the "
                "K/V once); y: FLOPs / median time",
                s * 0.75, kMutedText);
    const Box area{l.plot_left + 2, l.plot_top + 2, l.plot_right - 2, l.plot_bottom - 2};
    Placer placer(area);
    // Markers first as obstacles, so no label covers a point.
    for (const RooflinePoint& p : f.points) {
        const double x = l.px(p.flops_per_byte), y = l.py(p.gflops), r = kMarkerRadius + 2;
        placer.take({x - r, y - r, x + r, y + r});
    }
    draw_roofs(canvas, l, f, placer);
    draw_legend(canvas, l, f, placer, area);
    for (const RooflinePoint& p : f.points) {
        const double x = l.px(p.flops_per_byte), y = l.py(p.gflops);
        marker(canvas, x, y, point_colour(p.kind), p.backend == f.backends.front());
    }
    for (const RooflinePoint& p : f.points) {
        const double x = l.px(p.flops_per_byte), y = l.py(p.gflops);
        const double w = Canvas::text_width(p.label, s), h = Canvas::text_height(s);
        const double r = kMarkerRadius + 4, d = r * 0.7;
        const Box b = placer.place({
            {x + r, y - h / 2, x + r + w, y + h / 2},  // right
            {x - r - w, y - h / 2, x - r, y + h / 2},  // left
            {x + d, y - d - h, x + d + w, y - d},      // above right
            {x + d, y + d, x + d + w, y + d + h},      // below right
            {x - d - w, y - d - h, x - d, y - d},      // above left
            {x - d - w, y + d, x - d, y + d + h},      // below left
            {x - w / 2, y - r - h, x + w / 2, y - r},  // above
            {x - w / 2, y + r, x + w / 2, y + r + h},  // below
        });
        label(canvas, b, p.label, s, point_colour(p.kind));
    }
    return canvas;
}

void check_plot_path(const std::string& path) {
    std::string ext = path.size() >= 4 ? path.substr(path.size() - 4) : "";
    for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    PLAB_CHECK(ext == ".png" && path.size() > 4,
               "--plot: '" << path << "' must be a file name ending in .png (the roofline is "
                           << "written as a PNG image), e.g. --plot roofline.png");
    PLAB_CHECK(!std::filesystem::is_directory(path),
               "--plot: '" << path << "' is a folder; give a file name ending in .png");
    // Opened for appending, an existing file is left as it is; a new one is
    // removed again, so a bench that fails later leaves nothing behind.
    const bool existed = std::filesystem::exists(path);
    std::FILE* f = std::fopen(path.c_str(), "ab");
    PLAB_CHECK(f != nullptr, "--plot: cannot write '"
                                 << path << "' (" << std::strerror(errno)
                                 << "); give a .png path in a folder that exists and is writable");
    std::fclose(f);
    if (!existed) std::remove(path.c_str());
}

void write_roofline_png(const RooflineFigure& f, const std::string& path, int width, int height) {
    draw_roofline(f, width, height).write_png(path);
}

}  // namespace plab
