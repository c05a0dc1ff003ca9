// Attention assignment, C++ variant: fill in the three functions
// (lessons/assignments/attention/README.md, "C++ variant").
//
// Grade with:  plab grade attention starter.cpp
//
// plab compiles this file (c++ -O1 -shared -fPIC -std=c++17) and calls the
// functions below with the same cases as the Python variant. Arrays are
// float32, row-major; each function writes its result into `out` (allocated by
// the grader) and returns 0. The bodies below return -1: "not written yet".
#include <cmath>

// Causal attention for one head.
// q, k, v: (T, Dh); row i is position i. out: (T, Dh): row i is the
// softmax-weighted sum of v[0..i] with weights softmax_j(q[i] . k[j] / sqrt(Dh))
// over the keys j <= i.
extern "C" int causal_attention(const float* q, const float* k, const float* v, int T, int Dh,
                                float* out) {
    return -1;  // not written yet
}

// Attention for one head under any mask.
// mask: (T, T) of 0/1; mask[i * T + j] == 1 lets query i see key j (every row
// has at least one 1). out: (T, Dh).
extern "C" int masked_attention(const float* q, const float* k, const float* v, const int* mask,
                                int T, int Dh, float* out) {
    return -1;  // not written yet
}

// Causal attention of H query heads sharing Hkv K/V heads (grouped-query attention).
// q: (T, H, Dh); k, v: (T, Hkv, Dh), H a multiple of Hkv. Query head h reads
// K/V head h / (H / Hkv): consecutive query heads share one K/V head.
// out: (T, H, Dh).
extern "C" int gqa_attention(const float* q, const float* k, const float* v, int T, int H, int Hkv,
                             int Dh, float* out) {
    return -1;  // not written yet
}
