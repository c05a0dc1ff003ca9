// png_check: is a viewer screenshot a real picture of the requested size?
//
// Usage: plab_png_check FILE WIDTH HEIGHT
// Passes when the PNG has exactly WIDTH x HEIGHT pixels, at least 16 distinct
// colours, and no single colour covers more than 97% of it (a blank or
// one-colour frame fails). Part of tests/viewer (issue 4).
#define STB_IMAGE_IMPLEMENTATION
#include <stb_image.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: plab_png_check FILE WIDTH HEIGHT\n");
        return 2;
    }
    const int want_w = std::atoi(argv[2]), want_h = std::atoi(argv[3]);
    int w = 0, h = 0, channels = 0;
    unsigned char* px = stbi_load(argv[1], &w, &h, &channels, 4);
    if (px == nullptr) {
        std::fprintf(stderr, "png_check: cannot read %s: %s\n", argv[1], stbi_failure_reason());
        return 1;
    }
    std::unordered_map<unsigned, long> counts;
    const long n = static_cast<long>(w) * h;
    for (long i = 0; i < n; ++i) {
        unsigned c = 0;
        std::memcpy(&c, px + 4 * i, 3);
        ++counts[c];
    }
    stbi_image_free(px);
    long top = 0;
    for (const auto& kv : counts) top = std::max(top, kv.second);
    const double top_share = n > 0 ? static_cast<double>(top) / n : 1.0;
    std::printf("png_check: %s is %dx%d, %zu distinct colours, most common colour %.1f%%\n",
                argv[1], w, h, counts.size(), 100.0 * top_share);
    if (w != want_w || h != want_h) {
        std::fprintf(stderr, "png_check: expected %dx%d\n", want_w, want_h);
        return 1;
    }
    if (counts.size() < 16 || top_share > 0.97) {
        std::fprintf(stderr, "png_check: the picture looks blank\n");
        return 1;
    }
    return 0;
}
