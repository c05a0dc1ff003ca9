// The panels' colours (see ui_colours.h).
#include "panels/ui_colours.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iterator>

namespace plab::viewer {

ImU32 request_colour(int id) {
    // Apart from the fixed colours above (chunk orange, decode green, shared magenta).
    static constexpr ImU32 kPalette[] = {IM_COL32(70, 130, 220, 255), IM_COL32(40, 175, 165, 255),
                                         IM_COL32(175, 190, 60, 255), IM_COL32(150, 110, 225, 255),
                                         IM_COL32(190, 120, 70, 255)};
    return kPalette[static_cast<std::size_t>(id) % std::size(kPalette)];
}

ImU32 probability_colour(float p, bool sqrt_scale) {
    // Five stops of the viridis colour map (van der Walt & Smith, matplotlib).
    static constexpr float kStops[5][3] = {
        {68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
    float t = std::clamp(p, 0.0f, 1.0f);
    if (sqrt_scale) t = std::sqrt(t);
    const float x = t * 4.0f;
    const int i = std::min(3, static_cast<int>(x));
    const float f = x - static_cast<float>(i);
    auto mix = [&](int c) { return kStops[i][c] + (kStops[i + 1][c] - kStops[i][c]) * f; };
    return IM_COL32(static_cast<int>(mix(0)), static_cast<int>(mix(1)), static_cast<int>(mix(2)),
                    255);
}

}  // namespace plab::viewer
