#include "perf/canvas.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

// Both stb headers are single-file libraries: the implementation is compiled
// here, with internal linkage (STB_IMAGE_WRITE_STATIC; stb_easy_font's
// functions are static already), so it cannot clash with the viewer's copy
// (viewer/app/capture.cpp) or Debian's libstb.
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#include <stb_easy_font.h>
#include <stb_image_write.h>

namespace plab {
namespace {

double clamp01(double v) {
    return std::clamp(v, 0.0, 1.0);
}

// stb_easy_font reads its glyph table at [c - 32]: only printable ASCII is in it.
std::string printable(std::string_view s) {
    std::string out(s);
    for (char& c : out) {
        if (c < 32 || c > 126) c = '?';
    }
    return out;
}

// One stb_easy_font quad: the rectangle [x0, x1) x [y0, y1) in font units.
struct Quad {
    float x0, y0, x1, y1;
};

// The quads stb_easy_font builds for `s`, the text's top left at (0, 0).
std::vector<Quad> glyph_quads(const std::string& s) {
    // stb_easy_font_print writes 4 vertices of 16 bytes (x, y, z floats and a
    // colour) per quad; its letters take at most ~30 quads each.
    std::vector<char> buffer(s.size() * 30 * 64 + 64);
    std::string text = s;  // stb_easy_font_print takes a non-const char*
    const int quads = stb_easy_font_print(0, 0, text.data(), nullptr, buffer.data(),
                                          static_cast<int>(buffer.size()));
    std::vector<Quad> out(static_cast<std::size_t>(quads));
    for (int q = 0; q < quads; ++q) {
        const char* v = buffer.data() + std::size_t(q) * 64;
        float corner0[2], corner2[2];  // vertex 0: top left, vertex 2: bottom right
        std::memcpy(corner0, v, sizeof(corner0));
        std::memcpy(corner2, v + 32, sizeof(corner2));
        out[std::size_t(q)] = {corner0[0], corner0[1], corner2[0], corner2[1]};
    }
    return out;
}

}  // namespace

Canvas::Canvas(int width, int height, Rgb background) : width_(width), height_(height) {
    PLAB_CHECK(width >= 1 && height >= 1 && width <= 16384 && height <= 16384,
               "canvas size " << width << " x " << height
                              << " must be between 1 and 16384 pixels each way");
    rgb_.resize(std::size_t(width) * height * 3);
    for (std::size_t i = 0; i < rgb_.size(); i += 3) {
        rgb_[i] = background.r;
        rgb_[i + 1] = background.g;
        rgb_[i + 2] = background.b;
    }
}

Rgb Canvas::pixel(int x, int y) const {
    PLAB_ASSERT(x >= 0 && x < width_ && y >= 0 && y < height_);
    const std::uint8_t* p = &rgb_[(std::size_t(y) * width_ + x) * 3];
    return {p[0], p[1], p[2]};
}

void Canvas::blend(int x, int y, Rgb c, double alpha) {
    if (x < 0 || x >= width_ || y < 0 || y >= height_ || alpha <= 0) return;
    alpha = std::min(alpha, 1.0);
    std::uint8_t* p = &rgb_[(std::size_t(y) * width_ + x) * 3];
    const auto mix = [alpha](std::uint8_t under, std::uint8_t over) {
        return static_cast<std::uint8_t>(std::lround(under + alpha * (double(over) - under)));
    };
    p[0] = mix(p[0], c.r);
    p[1] = mix(p[1], c.g);
    p[2] = mix(p[2], c.b);
}

void Canvas::fill_rect(double x0, double y0, double x1, double y1, Rgb c, double alpha) {
    if (x1 < x0) std::swap(x0, x1);
    if (y1 < y0) std::swap(y0, y1);
    const int px0 = std::max(0, int(std::floor(x0))), px1 = std::min(width_, int(std::ceil(x1)));
    const int py0 = std::max(0, int(std::floor(y0))), py1 = std::min(height_, int(std::ceil(y1)));
    for (int y = py0; y < py1; ++y) {
        const double cover_y = std::min(y1, y + 1.0) - std::max(y0, double(y));
        for (int x = px0; x < px1; ++x) {
            const double cover_x = std::min(x1, x + 1.0) - std::max(x0, double(x));
            blend(x, y, c, alpha * cover_x * cover_y);
        }
    }
}

void Canvas::line(double x0, double y0, double x1, double y1, double width, Rgb c) {
    const double dx = x1 - x0, dy = y1 - y0, length = std::hypot(dx, dy);
    if (length <= 0) return;
    const double ux = dx / length, uy = dy / length, half = width / 2;
    // Every pixel within half a width (+1 for the antialiased rim) of the segment.
    const double pad = half + 1;
    const int px0 = std::max(0, int(std::floor(std::min(x0, x1) - pad)));
    const int px1 = std::min(width_ - 1, int(std::ceil(std::max(x0, x1) + pad)));
    const int py0 = std::max(0, int(std::floor(std::min(y0, y1) - pad)));
    const int py1 = std::min(height_ - 1, int(std::ceil(std::max(y0, y1) + pad)));
    for (int y = py0; y <= py1; ++y) {
        for (int x = px0; x <= px1; ++x) {
            // The pixel's centre in the segment's frame: along it, and across it.
            const double cx = x + 0.5 - x0, cy = y + 0.5 - y0;
            const double along = cx * ux + cy * uy, across = std::abs(cx * uy - cy * ux);
            const double cover =
                clamp01(half + 0.5 - across) * clamp01(std::min(along, length - along) + 0.5);
            blend(x, y, c, cover);
        }
    }
}

void Canvas::dashed_line(double x0, double y0, double x1, double y1, double width, Rgb c,
                         double dash, double gap) {
    PLAB_ASSERT(dash > 0 && gap >= 0);
    const double length = std::hypot(x1 - x0, y1 - y0);
    if (length <= 0) return;
    const double ux = (x1 - x0) / length, uy = (y1 - y0) / length;
    for (double s = 0; s < length; s += dash + gap) {
        const double e = std::min(s + dash, length);
        line(x0 + ux * s, y0 + uy * s, x0 + ux * e, y0 + uy * e, width, c);
    }
}

void Canvas::disc(double cx, double cy, double radius, Rgb c) {
    const int px0 = std::max(0, int(std::floor(cx - radius - 1)));
    const int px1 = std::min(width_ - 1, int(std::ceil(cx + radius + 1)));
    const int py0 = std::max(0, int(std::floor(cy - radius - 1)));
    const int py1 = std::min(height_ - 1, int(std::ceil(cy + radius + 1)));
    for (int y = py0; y <= py1; ++y) {
        for (int x = px0; x <= px1; ++x) {
            const double d = std::hypot(x + 0.5 - cx, y + 0.5 - cy);
            blend(x, y, c, clamp01(radius + 0.5 - d));
        }
    }
}

void Canvas::ring(double cx, double cy, double radius, double width, Rgb c) {
    const double outer = radius + width / 2;
    const int px0 = std::max(0, int(std::floor(cx - outer - 1)));
    const int px1 = std::min(width_ - 1, int(std::ceil(cx + outer + 1)));
    const int py0 = std::max(0, int(std::floor(cy - outer - 1)));
    const int py1 = std::min(height_ - 1, int(std::ceil(cy + outer + 1)));
    for (int y = py0; y <= py1; ++y) {
        for (int x = px0; x <= px1; ++x) {
            const double d = std::hypot(x + 0.5 - cx, y + 0.5 - cy);
            blend(x, y, c, clamp01(width / 2 + 0.5 - std::abs(d - radius)));
        }
    }
}

double Canvas::text_width(std::string_view s, double scale) {
    std::string text = printable(s);
    return stb_easy_font_width(text.data()) * scale;
}

double Canvas::text_height(double scale) {
    // stb_easy_font's line: capitals 7 units, descenders to 9, 12 to the next line.
    return 12 * scale;
}

void Canvas::text(double x, double y, std::string_view s, double scale, Rgb c, bool vertical) {
    const std::string str = printable(s);
    const double w = text_width(str, scale), h = text_height(scale);
    // Coverage of the text's box first, then one blend per pixel: the quads of
    // a letter touch and overlap, and blending each on its own would darken
    // the pixels they share.
    const int ox = int(std::floor(x)), oy = int(std::floor(vertical ? y - w : y));
    const int mw = int(std::ceil(vertical ? h : w)) + 2, mh = int(std::ceil(vertical ? w : h)) + 2;
    std::vector<double> cover(std::size_t(mw) * mh, 0.0);
    for (const Quad& q : glyph_quads(str)) {
        // Font units -> image pixels, turned for vertical text: the text's
        // x runs up the image, its y runs right.
        double x0 = x + q.x0 * scale, x1 = x + q.x1 * scale;
        double y0 = y + q.y0 * scale, y1 = y + q.y1 * scale;
        if (vertical) {
            x0 = x + q.y0 * scale;
            x1 = x + q.y1 * scale;
            y0 = y - q.x1 * scale;
            y1 = y - q.x0 * scale;
        }
        for (int py = int(std::floor(y0)); py < int(std::ceil(y1)); ++py) {
            const double cy = std::min(y1, py + 1.0) - std::max(y0, double(py));
            for (int px = int(std::floor(x0)); px < int(std::ceil(x1)); ++px) {
                const double cx = std::min(x1, px + 1.0) - std::max(x0, double(px));
                const int mx = px - ox, my = py - oy;
                if (mx < 0 || mx >= mw || my < 0 || my >= mh) continue;
                double& m = cover[std::size_t(my) * mw + mx];
                m = std::min(1.0, m + cx * cy);
            }
        }
    }
    for (int my = 0; my < mh; ++my) {
        for (int mx = 0; mx < mw; ++mx)
            blend(ox + mx, oy + my, c, cover[std::size_t(my) * mw + mx]);
    }
}

void Canvas::write_png(const std::string& path) const {
    const int ok =
        stbi_write_png(path.c_str(), width_, height_, 3, rgb_.data(), width_ * 3 /* row bytes */);
    PLAB_CHECK(ok != 0,
               "could not write the PNG '" << path << "' (is its folder there and writable?)");
}

}  // namespace plab
