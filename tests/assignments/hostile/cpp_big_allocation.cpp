// 10 GB in one allocation: AddressSanitizer refuses it past the memory limit.
// expect: causal, small shapes +0/4 +FAIL \(memory limit\)
// expect: memory limit 1024 MiB exceeded \(AddressSanitizer: requested allocation size
#include <cstring>

extern "C" int causal_attention(const float* q, const float* k, const float* v, int T, int Dh,
                                float* out) {
    float* big = new float[(10ull << 30) / 4];
    std::memset(big, 0, 10ull << 30);
    out[0] = big[1];
    return 0;
}
