// A C++ submission that does not compile (a missing ';'): plab grade must say
// so in one line, the compiler's first error, and exit 1.
extern "C" int rope(const float* x, int C, int H, int Dh, int pos0, double theta, float* out) {
    return 0
}
