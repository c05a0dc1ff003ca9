// A tiny RGB raster canvas for the figures `plab` writes itself (the
// roofline of `plab bench --plot`, perf/roofline_plot.h): antialiased lines,
// dashed lines, filled circles and rings, rectangles, and text, saved as PNG.
//
// What it teaches: nothing about prefill — it is here so a figure needs no
// Python and no plotting library, only Debian's libstb-dev (stb_image_write
// for the PNG, stb_easy_font for the letters). Antialiasing is by coverage:
// a pixel takes the share of its unit square the shape covers (exactly for
// rectangles, from the distance to the shape's edge for lines and circles),
// which is what makes 2-pixel lines and scaled-up letters look like a figure
// and not like a terminal.
//
// Coordinates are continuous: pixel (x, y) is the unit square [x, x+1) x
// [y, y+1), y grows downwards, so the pixel holding a point p is
// (floor(p.x), floor(p.y)). Left out on purpose: clipping paths, fonts other
// than stb_easy_font's, transparency in the saved image.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace plab {

struct Rgb {
    std::uint8_t r = 0, g = 0, b = 0;
    friend bool operator==(const Rgb&, const Rgb&) = default;
};

class Canvas {
public:
    Canvas(int width, int height, Rgb background);

    int width() const { return width_; }
    int height() const { return height_; }
    Rgb pixel(int x, int y) const;
    // (height, width, 3) row-major bytes, as the PNG stores them.
    const std::vector<std::uint8_t>& rgb() const { return rgb_; }

    // Blends `c` over pixel (x, y) with weight `alpha` in [0, 1]; outside: nothing.
    void blend(int x, int y, Rgb c, double alpha);
    // The rectangle [x0, x1) x [y0, y1), edge pixels by the area they share with it.
    void fill_rect(double x0, double y0, double x1, double y1, Rgb c, double alpha = 1.0);
    // A segment `width` pixels thick with flat ends.
    void line(double x0, double y0, double x1, double y1, double width, Rgb c);
    // The same segment drawn `dash` pixels on, `gap` pixels off, from (x0, y0).
    void dashed_line(double x0, double y0, double x1, double y1, double width, Rgb c, double dash,
                     double gap);
    void disc(double cx, double cy, double radius, Rgb c);
    // A circle's outline `width` pixels thick, centred on `radius`.
    void ring(double cx, double cy, double radius, double width, Rgb c);

    // Text in stb_easy_font's letters (printable ASCII; anything else shows as
    // '?'), each font unit `scale` pixels. (x, y) is the top left corner of the
    // text box; `vertical` turns it 90 degrees counter-clockwise (it then
    // reads bottom to top, (x, y) being the box's bottom left corner).
    void text(double x, double y, std::string_view s, double scale, Rgb c, bool vertical = false);
    // The size of that box, in pixels, unturned.
    static double text_width(std::string_view s, double scale);
    static double text_height(double scale);

    // Writes the canvas as an RGB PNG; throws plab::Error naming the path if it cannot.
    void write_png(const std::string& path) const;

private:
    int width_, height_;
    std::vector<std::uint8_t> rgb_;  // (height, width, 3) row-major
};

}  // namespace plab
