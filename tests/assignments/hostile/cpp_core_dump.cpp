// Fills 900 MB and aborts, which would write a core dump of that size. Core
// dumps are off (RLIMIT_CORE 0): a crash, and no file.
// expect: causal, small shapes +0/4 +FAIL \(crashed\)
// expect: your code crashed \(SIGABRT\) in causal_attention
#include <cstdlib>
#include <cstring>

extern "C" int causal_attention(const float* q, const float* k, const float* v, int T, int Dh,
                                float* out) {
    char* big = static_cast<char*>(std::malloc(900u << 20));
    std::memset(big, 1, 900u << 20);
    std::abort();
}
