// system(): a shell that removes a folder of the grader's (a decoy) and leaves
// a mark there. The folder is not visible in the sandbox; the shell fails.
// expect: causal, small shapes +0/4 +FAIL
// expect: causal_attention returned 1; return 0 when done
#include <cstdlib>

extern "C" int causal_attention(const float* q, const float* k, const float* v, int T, int Dh,
                                float* out) {
    std::system("rm -rf @DECOY@");
    return std::system("touch @DECOY@/pwned") == 0 ? 0 : 1;
}
