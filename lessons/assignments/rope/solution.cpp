// Reference solution of the rope assignment, C++ variant (instructors only:
// remove before handing out). Grade with:  plab grade rope solution.cpp
//
// As the engine does it (src/core/rope.h): pair i is (x[i], x[i + Dh/2])
// (half-split), turned by the angle pos * theta^(-2i/Dh), in double.
#include <cmath>
#include <cstddef>

extern "C" int rope(const float* x, int C, int H, int Dh, int pos0, double theta, float* out) {
    const int half = Dh / 2;
    for (int i = 0; i < C; ++i) {
        const double pos = pos0 + i;  // absolute position, not i
        for (int h = 0; h < H; ++h) {
            const float* a = x + (std::size_t(i) * H + h) * Dh;
            float* o = out + (std::size_t(i) * H + h) * Dh;
            for (int p = 0; p < half; ++p) {
                const double angle = pos * std::pow(theta, -2.0 * p / Dh);
                const double c = std::cos(angle), s = std::sin(angle);
                const double x0 = a[p], x1 = a[p + half];
                o[p] = float(x0 * c - x1 * s);
                o[p + half] = float(x0 * s + x1 * c);
            }
            if (Dh % 2 == 1) o[Dh - 1] = a[Dh - 1];  // an odd Dh's last component stays
        }
    }
    return 0;
}
