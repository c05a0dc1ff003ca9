// Reference solution of the attention assignment, C++ variant (instructors only:
// remove before handing out). Grade with:  plab grade attention solution.cpp
//
// One function, attend(), does one head; the three entry points differ only in
// which keys a query sees and where a head's rows lie: a head's row i starts at
// x + i * stride, so one head of a (T, H, Dh) array has stride H * Dh.
#include <algorithm>
#include <cmath>
#include <vector>

namespace {

// out (T, Dh) of one head: mask == nullptr is causal (key j visible when j <= i).
void attend(const float* q, int q_stride, const float* k, const float* v, int kv_stride,
            const int* mask, int T, int Dh, float* out, int out_stride) {
    const double scale = 1.0 / std::sqrt(double(Dh));
    std::vector<double> s(T);  // the scores of one query row, then its weights
    for (int i = 0; i < T; ++i) {
        double max_score = -INFINITY;
        for (int j = 0; j < T; ++j) {
            const bool visible = mask != nullptr ? mask[i * T + j] != 0 : j <= i;
            if (!visible) {
                s[j] = -INFINITY;  // exp(-inf) = 0: a masked key weighs nothing
                continue;
            }
            double dot = 0;
            for (int d = 0; d < Dh; ++d) dot += double(q[i * q_stride + d]) * k[j * kv_stride + d];
            s[j] = dot * scale;
            max_score = std::max(max_score, s[j]);
        }
        double den = 0;
        for (int j = 0; j < T; ++j) {
            s[j] = std::exp(s[j] - max_score);  // minus the row's max: exp never overflows
            den += s[j];
        }
        for (int d = 0; d < Dh; ++d) {
            double num = 0;
            for (int j = 0; j < T; ++j) num += s[j] * v[j * kv_stride + d];
            out[i * out_stride + d] = float(num / den);
        }
    }
}

}  // namespace

extern "C" int causal_attention(const float* q, const float* k, const float* v, int T, int Dh,
                                float* out) {
    attend(q, Dh, k, v, Dh, nullptr, T, Dh, out, Dh);
    return 0;
}

extern "C" int masked_attention(const float* q, const float* k, const float* v, const int* mask,
                                int T, int Dh, float* out) {
    attend(q, Dh, k, v, Dh, mask, T, Dh, out, Dh);
    return 0;
}

extern "C" int gqa_attention(const float* q, const float* k, const float* v, int T, int H, int Hkv,
                             int Dh, float* out) {
    const int group = H / Hkv;  // query heads per K/V head
    for (int h = 0; h < H; ++h) {
        const int kv_head = h / group;  // consecutive query heads share one K/V head
        attend(q + h * Dh, H * Dh, k + kv_head * Dh, v + kv_head * Dh, Hkv * Dh, nullptr, T, Dh,
               out + h * Dh, H * Dh);
    }
    return 0;
}
