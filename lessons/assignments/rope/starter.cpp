// RoPE assignment, C++ variant: fill in rope()
// (lessons/assignments/rope/README.md, "C++ variant").
//
// Grade with:  plab grade rope starter.cpp
//
// plab compiles this file (c++ -O1 -shared -fPIC -std=c++17) and calls rope()
// once per chunk of a chunk plan, as for the Python variant. Arrays are
// float32, row-major; rope writes its result into `out` (allocated by the
// grader) and returns 0. The body below returns -1: "not written yet".
#include <cmath>

// Rotary position embedding of one prefill chunk.
// x: (C, H, Dh): C rows (queries or keys) of H heads; row i sits at absolute
// position pos0 + i (pos0 = tokens already in the KV cache). theta: the base,
// e.g. 10000. out: (C, H, Dh): each pair (x[.., i], x[.., i + Dh/2]), i < Dh/2,
// rotated by the angle pos * theta^(-2i/Dh); an odd Dh's last component is
// copied as it is.
extern "C" int rope(const float* x, int C, int H, int Dh, int pos0, double theta, float* out) {
    return -1;  // not written yet
}
