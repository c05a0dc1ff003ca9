#include "perf/roofline_plot.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <limits>

#include "core/error.h"
#include "runtime/chunk_plan.h"
#include "runtime/cost_model.h"

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

namespace {

std::string format(const char* fmt, double v) {
    char s[64];
    std::snprintf(s, sizeof(s), fmt, v);
    return s;
}

void add_point(RooflineFigure& f, RooflinePoint p) {
    // A log axis has no place for 0 (a row that measured nothing).
    if (!(p.flops_per_byte > 0 && p.gflops > 0 && std::isfinite(p.flops_per_byte) &&
          std::isfinite(p.gflops)))
        return;
    if (std::find(f.backends.begin(), f.backends.end(), p.backend) == f.backends.end())
        f.backends.push_back(p.backend);
    // Labels stay short (the default run has two backends' points side by
    // side): the marker says whose a point is, the legend which marker is whose.
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
    f.title = "Roofline: " + model_label + ", " + std::to_string(m.threads) +
              " threads, one plab bench run";
    f.subtitle = c.summary() + ", float32; every line and point measured in the same run";
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
    // x: every point, and the ridge with 4x of roof on either side of it.
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
    // 1.4: room above the peak line for its label.
    const DecadeRange yr = decade_range(y_min, y_max, 1.4);
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
// touches nothing taken yet, else the one overlapping least (a box taken
// with a weight counts that many times: covering a marker is worse than
// crossing a line).
class Placer {
public:
    explicit Placer(Box area) : area_(area) {}
    void take(Box b, double weight = 1) { taken_.push_back({b, weight}); }
    Box place(const std::vector<Box>& candidates) {
        const Box* best = nullptr;
        double best_overlap = std::numeric_limits<double>::infinity();
        for (const Box& c : candidates) {
            if (!c.inside(area_)) continue;
            double overlap = 0;
            for (const auto& [t, weight] : taken_) overlap += weight * c.overlap(t);
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
    std::vector<std::pair<Box, double>> taken_;
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

std::string ridge_label(const RooflineFigure& f) {
    return "ridge " + format("%.1f", f.ridge_flops_per_byte()) + " FLOP/byte";
}

// The roofs in pixels: the read line from where it enters the plot (its
// left edge or its bottom) to the ridge, the peak from there to the right
// edge, and the copy line (x0 == x1 when there is none).
struct RoofPixels {
    double read_x0, read_y0, ridge_x, ridge_y;
    double copy_x0 = 0, copy_y0 = 0, copy_x1 = 0, copy_y1 = 0;
};

RoofPixels roof_pixels(const RooflineLayout& l, const RooflineFigure& f) {
    const auto slant_start = [&](double bw) { return std::max(l.x.lo, l.y.lo / bw); };
    const double a = slant_start(f.read_gb_per_s);
    RoofPixels r{l.px(a), l.py(a * f.read_gb_per_s), l.px(f.ridge_flops_per_byte()),
                 l.py(f.peak_gflops)};
    if (f.copy_gb_per_s > 0) {
        const double c0 = slant_start(f.copy_gb_per_s);
        const double c1 = std::max(c0, std::min(l.x.hi, f.peak_gflops / f.copy_gb_per_s));
        r.copy_x0 = l.px(c0), r.copy_y0 = l.py(c0 * f.copy_gb_per_s);
        r.copy_x1 = l.px(c1), r.copy_y1 = l.py(c1 * f.copy_gb_per_s);
    }
    return r;
}

// 2. the roofs: read bandwidth up to the ridge, then the peak; copy dashed;
// the peak's label. The lines and the ridge's label become obstacles.
void draw_roofs(Canvas& canvas, const RooflineLayout& l, const RooflineFigure& f,
                const RoofPixels& r, Placer& placer) {
    const double s = l.text_scale, h = Canvas::text_height(s);
    // Under the roofs: the ridge's dotted drop to the x axis.
    canvas.dashed_line(r.ridge_x, r.ridge_y, r.ridge_x, l.plot_bottom, 1.5, kCopyRoofColour, 2, 4);
    if (r.copy_x1 > r.copy_x0) {
        canvas.dashed_line(r.copy_x0, r.copy_y0, r.copy_x1, r.copy_y1, 2, kCopyRoofColour, 10, 7);
        take_segment(placer, r.copy_x0, r.copy_y0, r.copy_x1, r.copy_y1);
    }
    canvas.line(r.read_x0, r.read_y0, r.ridge_x, r.ridge_y, kRoofWidth, kRoofColour);
    canvas.line(r.ridge_x, r.ridge_y, l.plot_right, r.ridge_y, kRoofWidth, kRoofColour);
    canvas.disc(r.ridge_x, r.ridge_y, kRoofWidth / 2, kRoofColour);  // a round joint
    take_segment(placer, r.read_x0, r.read_y0, r.ridge_x, r.ridge_y);
    take_segment(placer, r.ridge_x, r.ridge_y, l.plot_right, r.ridge_y);
    // The peak's label above its line, at the right.
    const std::string peak =
        "GEMM peak " + format("%.1f", f.peak_gflops) + " GFLOP/s (" + f.peak_source + ", 2048^3)";
    const double pw = Canvas::text_width(peak, s);
    label(
        canvas,
        placer.place({{l.plot_right - 8 - pw, r.ridge_y - h - 4, l.plot_right - 8, r.ridge_y - 4}}),
        peak, s, kText);
    // The ridge's, turned, beside its drop at the bottom (drawn last).
    const double rw = Canvas::text_width(ridge_label(f), s);
    placer.take({r.ridge_x + 4, l.plot_bottom - 6 - rw, r.ridge_x + 4 + h, l.plot_bottom - 6});
}

// 4. the bandwidths' labels beside their lines: the higher line's above it
// (to its left), the lower one's below it, at the first free spot along it.
void draw_bandwidth_labels(Canvas& canvas, const RooflineLayout& l, const RooflineFigure& f,
                           const RoofPixels& r, Placer& placer) {
    const double s = l.text_scale, h = Canvas::text_height(s);
    const auto slant_label = [&](const std::string& text, double x0, double y0, double x1,
                                 double y1, bool above, Rgb c) {
        const double w = Canvas::text_width(text, s);
        // Along the line on its own side first, then on the other side: with
        // the legend in the corner above a steep line, no spot on its own side
        // may be free (the copy label once printed over the legend).
        std::vector<Box> candidates;
        for (const bool own_side : {true, false}) {
            for (double t : {0.55, 0.4, 0.7, 0.25, 0.85, 0.15, 0.95}) {
                const double x = x0 + t * (x1 - x0), y = y0 + t * (y1 - y0);
                const Box left{x - 10 - w, y - h / 2, x - 10, y + h / 2};
                const Box right{x + 10, y - h / 2, x + 10 + w, y + h / 2};
                candidates.push_back(above == own_side ? left : right);
            }
        }
        label(canvas, placer.place(candidates), text, s, c);
    };
    slant_label("read " + format("%.1f", f.read_gb_per_s) + " GB/s", r.read_x0, r.read_y0,
                r.ridge_x, r.ridge_y, f.read_gb_per_s >= f.copy_gb_per_s, kRoofColour);
    if (r.copy_x1 > r.copy_x0) {
        slant_label("copy " + format("%.1f", f.copy_gb_per_s) + " GB/s (read + written)", r.copy_x0,
                    r.copy_y0, r.copy_x1, r.copy_y1, f.copy_gb_per_s > f.read_gb_per_s, kMutedText);
    }
}

// 3. the legend: what each colour and marker is.
void draw_legend(Canvas& canvas, const RooflineLayout& l, const RooflineFigure& f, Placer& placer,
                 const Box& area) {
    // Smaller letters than the plot's: the legend is read once.
    const double s = l.text_scale * 0.75, h = Canvas::text_height(s), row = h + 3;
    struct Entry {
        Rgb colour;
        bool filled;
        bool line;
        std::string text;
    };
    std::vector<Entry> entries = {
        {kPrefillColour, true, false, "prefill of a cold prompt, per length"},
        {kDecodeColour, true, false, "decode, one sequence"},
        {kDecodeBatchColour, true, false, "decode, b sequences a step (--batch)"},
        {kRoofColour, true, true, "read bandwidth, then GEMM peak"}};
    for (std::size_t b = 0; b < f.backends.size() && f.backends.size() > 1; ++b)
        entries.push_back({kMutedText, b == 0, false, f.backends[b]});
    double w = 0;
    for (const Entry& e : entries) w = std::max(w, Canvas::text_width(e.text, s));
    w += 44 + 10;
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
    // Title and subtitle above the plot, shrunk to the width if they need it.
    const auto fitted = [&](const std::string& text, double scale) {
        const double room = l.plot_right - l.plot_left;
        return std::min(scale, room / Canvas::text_width(text, 1));
    };
    canvas.text(l.plot_left, 6 * s, f.title, fitted(f.title, s * 1.25), kText);
    canvas.text(l.plot_left, 8 * s + Canvas::text_height(s * 1.25), f.subtitle,
                fitted(f.subtitle, s), kMutedText);
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
        placer.take({x - r, y - r, x + r, y + r}, /*weight=*/20);
    }
    const RoofPixels roofs = roof_pixels(l, f);
    draw_roofs(canvas, l, f, roofs, placer);
    draw_legend(canvas, l, f, placer, area);
    draw_bandwidth_labels(canvas, l, f, roofs, placer);
    std::vector<Box> boxes;  // of each point's label
    for (const RooflinePoint& p : f.points) {
        const double x = l.px(p.flops_per_byte), y = l.py(p.gflops);
        const double w = Canvas::text_width(p.label, s), h = Canvas::text_height(s);
        // Eight spots around the marker, near first, then the same farther out.
        std::vector<Box> spots;
        for (double r : {kMarkerRadius + 4, 2.5 * kMarkerRadius + 4, 4 * kMarkerRadius + 4}) {
            const double d = r * 0.7;
            for (const Box& b : std::initializer_list<Box>{
                     {x + r, y - h / 2, x + r + w, y + h / 2},  // right
                     {x - r - w, y - h / 2, x - r, y + h / 2},  // left
                     {x + d, y - d - h, x + d + w, y - d},      // above right
                     {x + d, y + d, x + d + w, y + d + h},      // below right
                     {x - d - w, y - d - h, x - d, y - d},      // above left
                     {x - d - w, y + d, x - d, y + d + h},      // below left
                     {x - w / 2, y - r - h, x + w / 2, y - r},  // above
                     {x - w / 2, y + r, x + w / 2, y + r + h},  // below
                 })
                spots.push_back(b);
        }
        boxes.push_back(placer.place(spots));
    }
    // 5. the points: every label's white box, then the letters, then the
    // markers on top, so a crowded corner never hides a point or a label.
    for (const Box& b : boxes) canvas.fill_rect(b.x0 - 2, b.y0, b.x1 + 2, b.y1, kWhite, 0.8);
    for (std::size_t i = 0; i < f.points.size(); ++i) {
        const RooflinePoint& p = f.points[i];
        canvas.text(boxes[i].x0, boxes[i].y0 + s, p.label, s, point_colour(p.kind));
    }
    for (const RooflinePoint& p : f.points) {
        marker(canvas, l.px(p.flops_per_byte), l.py(p.gflops), point_colour(p.kind),
               p.backend == f.backends.front());
    }
    canvas.text(l.px(f.ridge_flops_per_byte()) + 4, l.plot_bottom - 6, ridge_label(f), s,
                kMutedText, /*vertical=*/true);
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
