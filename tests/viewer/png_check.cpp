// png_check: is a viewer screenshot a real picture of the requested size, and
// does it show what its scene must show?
//
// Usage: plab_png_check FILE WIDTH HEIGHT [NAME=RRGGBB:MIN_PIXELS ...]
// Passes when the PNG has exactly WIDTH x HEIGHT pixels, at least 16 distinct
// colours, no single colour covering more than 97% of it (a blank or
// one-colour frame fails), and at least MIN_PIXELS pixels of each named colour.
// The viewer fills its blocks, cells and badges with fixed colours
// (viewer/panels/ui_colours.h), so a KV scene whose blocks were never drawn, a matrix
// without its "bitwise" badges, or a picture of the wrong scene misses one.
// Part of tests/viewer (issues 4 and 8).
#define STB_IMAGE_IMPLEMENTATION
#include <stb_image.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

struct Required {
    std::string name;
    unsigned rgb = 0;  // 0xRRGGBB
    long min_pixels = 0;
};

// "bitwise-badge=3caa50:1500" -> {name, 0x3caa50, 1500}; false when malformed.
bool parse_required(const std::string& text, Required& out) {
    const std::size_t eq = text.find('='), colon = text.find(':');
    if (eq == std::string::npos || colon == std::string::npos || colon != eq + 7 || eq == 0)
        return false;
    char* end = nullptr;
    const std::string hex = text.substr(eq + 1, 6);
    out.rgb = static_cast<unsigned>(std::strtoul(hex.c_str(), &end, 16));
    if (end != hex.c_str() + 6) return false;
    const std::string min = text.substr(colon + 1);
    out.min_pixels = std::strtol(min.c_str(), &end, 10);
    if (min.empty() || *end != '\0' || out.min_pixels < 1) return false;
    out.name = text.substr(0, eq);
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr,
                     "usage: plab_png_check FILE WIDTH HEIGHT [NAME=RRGGBB:MIN_PIXELS ...]\n");
        return 2;
    }
    std::vector<Required> required;
    for (int i = 4; i < argc; ++i) {
        Required r;
        if (!parse_required(argv[i], r)) {
            std::fprintf(stderr,
                         "png_check: '%s' is not NAME=RRGGBB:MIN_PIXELS (e.g. "
                         "bitwise-badge=3caa50:1500)\n",
                         argv[i]);
            return 2;
        }
        required.push_back(r);
    }
    const int want_w = std::atoi(argv[2]), want_h = std::atoi(argv[3]);
    int w = 0, h = 0, channels = 0;
    unsigned char* px = stbi_load(argv[1], &w, &h, &channels, 4);
    if (px == nullptr) {
        std::fprintf(stderr, "png_check: cannot read %s: %s\n", argv[1], stbi_failure_reason());
        return 1;
    }
    // Colours as 0xRRGGBB.
    std::unordered_map<unsigned, long> counts;
    const long n = static_cast<long>(w) * h;
    for (long i = 0; i < n; ++i) {
        const unsigned char* p = px + 4 * i;
        ++counts[(unsigned(p[0]) << 16) | (unsigned(p[1]) << 8) | unsigned(p[2])];
    }
    stbi_image_free(px);
    long top = 0;
    for (const auto& kv : counts) top = std::max(top, kv.second);
    const double top_share = n > 0 ? static_cast<double>(top) / n : 1.0;
    std::printf("png_check: %s is %dx%d, %zu distinct colours, most common colour %.1f%%\n",
                argv[1], w, h, counts.size(), 100.0 * top_share);
    int failed = 0;
    if (w != want_w || h != want_h) {
        std::fprintf(stderr, "png_check: expected %dx%d\n", want_w, want_h);
        failed = 1;
    }
    if (counts.size() < 16 || top_share > 0.97) {
        std::fprintf(stderr, "png_check: the picture looks blank\n");
        failed = 1;
    }
    for (const Required& r : required) {
        const auto it = counts.find(r.rgb);
        const long got = it == counts.end() ? 0 : it->second;
        std::printf("png_check: %s (#%06x): %ld pixels, at least %ld wanted\n", r.name.c_str(),
                    r.rgb, got, r.min_pixels);
        if (got < r.min_pixels) {
            std::fprintf(stderr, "png_check: too little %s (#%06x): %ld pixels, expected >= %ld\n",
                         r.name.c_str(), r.rgb, got, r.min_pixels);
            failed = 1;
        }
    }
    return failed;
}
