// Fills 1 GB and aborts, which would write a core dump of that size. Core
// dumps are off (RLIMIT_CORE 0): a crash, and no file. (--memory 2048: the
// gigabyte itself is allowed, so the crash is the abort's.)
// args: --memory 2048
// expect: causal, small shapes +0/4 +FAIL \(crashed\)
// expect: your code crashed \(SIGABRT\) in causal_attention
#include <cstdlib>
#include <cstring>

extern "C" int causal_attention(const float* q, const float* k, const float* v, int T, int Dh,
                                float* out) {
    const std::size_t gigabyte = 1000u << 20;
    char* big = static_cast<char*>(std::malloc(gigabyte));
    std::memset(big, 1, gigabyte);
    std::abort();
}
