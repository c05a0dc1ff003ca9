// `plab grade attention`: one head's attention, causal and under any mask of
// `plab mask`'s grammar, then H query heads sharing Hkv K/V heads (GQA)
// (lessons/assignments/attention/README.md).
//
// The reference is the engine's own: core/attention_math.h's score, softmax
// statistics and output — the functions cpu-ref and gpu-ref call — over a KV
// cache of one block, with the mask built by runtime/mask_grammar.h, and for
// GQA the engine's head mapping (core/kv_layout.h's kv_head_of, inside
// attention_score). Known mistakes are the same functions with one thing
// changed (scale 1, scale 1/Dh, every key visible, the causal mask instead of
// the one given, query head h reading K/V head h % Hkv).
#include <array>
#include <cmath>

#include "core/attention_math.h"
#include "core/attention_reference.h"
#include "core/attention_shape.h"
#include "grade/grade.h"
#include "runtime/mask_grammar.h"

namespace plab::grade {
namespace attention_detail {

// out (T, Dh) of one head over keys 0..T-1 under `mask`, scores times `scale`: cpu-ref's
// whole softmax (core/attention_reference.h).
Tensor reference(const std::vector<float>& q, const std::vector<float>& k,
                 const std::vector<float>& v, int t, int dh, const Mask& mask, float scale) {
    return tensor_f({t, dh}, head_softmax(q.data(), k.data(), v.data(), t, dh, mask, scale).out);
}

// out (T, H, Dh) of H query heads over Hkv K/V heads, causal: q (T, H, Dh), k and v
// (T, Hkv, Dh), which is the pool of one block of T slots. The engine picks each
// query head's K/V head (kv_head_of: h / (H / Hkv)).
Tensor gqa_reference(const std::vector<float>& q, const std::vector<float>& k,
                     const std::vector<float>& v, int t, int h, int hkv, int dh) {
    const AttentionShape s = attention_shape(t, 0, h, hkv, dh, t);
    const int block_table[1] = {0};
    std::vector<float> scores(static_cast<std::size_t>(t));
    std::vector<float> out(std::size_t(t) * h * dh);
    for (int p = 0; p < t; ++p) {
        for (int head = 0; head < h; ++head) {
            const float* qrow = &q[(std::size_t(p) * h + head) * dh];
            std::fill(scores.begin(), scores.end(), -INFINITY);
            const KeyRange r = attention_key_range(s, p);
            for (int j = r.lo; j <= r.hi; ++j)
                scores[j] = attention_score(qrow, k.data(), block_table, s, head, p, j);
            const SoftmaxStats st = attention_softmax_stats(scores.data(), s, p);
            const int kv_head = kv_head_of(head, h, hkv);
            for (int d = 0; d < dh; ++d)
                out[(std::size_t(p) * h + head) * dh + d] =
                    attention_output(scores.data(), st, v.data(), block_table, s, kv_head, p, d);
        }
    }
    return tensor_f({t, h, dh}, out);
}

// Float32 against the student's numpy (float64, or float32 with pairwise sums):
// outputs are weighted means of values in [-1, 1], off by ~1e-6; scores of a
// few hundred (the large-score check) carry ~3e-5 in float32, so 1e-4.
constexpr double kTol = 1e-4;

std::string nan_hint(const Tensor& got) {
    for (double x : got.data)
        if (!std::isfinite(x))
            return "your output has inf or NaN: subtract each row's largest score before exp "
                   "(exp overflows for large scores), and let every query see itself (k <= q)";
    return "";
}

// A mask from a rule visible(q, k), as a custom 0/1 matrix (core/mask.h): the
// off-by-one masks students write, which the grammar has no item for.
template <typename Rule>
BoundMask rule_mask(int t, const std::string& name, Rule visible) {
    const int words_per_row = (t + 31) / 32;
    std::vector<uint32_t> words(std::size_t(t) * words_per_row, 0u);
    for (int q = 0; q < t; ++q)
        for (int k = 0; k < t; ++k)
            if (visible(q, k)) words[std::size_t(q) * words_per_row + k / 32] |= 1u << (k % 32);
    Mask m;
    m.terms[0].kind = MaskKind::custom;
    m.terms[0].a = t;
    m.n_terms = 1;
    m.limit = t;
    return BoundMask(name, m, std::move(words));
}

// The two causal masks one off: a query that also sees the next key, and one
// that does not see itself (its first row sees nothing: not checked).
const char* kSeesLaterHint =
    "a query sees later keys: set the scores of masked keys (k > q, or mask 0) to -inf before "
    "the softmax";
const char* kSeesNextHint = "mask off by one: query q also sees key q+1; the causal mask is k <= q";
const char* kHidesItselfHint =
    "mask off by one: a query does not see itself; the causal mask is k <= q, not k < q";
BoundMask sees_next_mask(int t) {
    return rule_mask(t, "k <= q + 1", [](int q, int k) { return k <= q + 1; });
}
BoundMask hides_itself_mask(int t) {
    return rule_mask(t, "k < q", [](int q, int k) { return k < q; });
}
// Rows that see no key have no defined output: NaN, "not checked".
void unchecked_rows(Tensor& out, const BoundMask& m, int t, int row_size) {
    for (int q = 0; q < t; ++q) {
        bool any = false;
        for (int k = 0; k < t; ++k) any = any || m.view().visible(q, k);
        if (!any)
            std::fill(out.data.begin() + std::size_t(q) * row_size,
                      out.data.begin() + std::size_t(q + 1) * row_size, NAN);
    }
}

Case make_case(std::mt19937_64& rng, int t, int dh, float scale_inputs, const std::string& spec,
               bool pass_mask) {
    const std::size_t n = std::size_t(t) * dh;
    const std::vector<float> q = uniform(rng, n, scale_inputs), k = uniform(rng, n, scale_inputs),
                             v = uniform(rng, n);
    const BoundMask m = make_mask_one_head(spec, t);
    const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
    Case c;
    nlohmann::json args = {{"q", to_arg(tensor_f({t, dh}, q))},
                           {"k", to_arg(tensor_f({t, dh}, k))},
                           {"v", to_arg(tensor_f({t, dh}, v))}};
    if (pass_mask) {
        std::vector<double> bits;
        for (int a = 0; a < t; ++a)
            for (int b = 0; b < t; ++b) bits.push_back(m.view().visible(a, b) ? 1 : 0);
        args["mask"] = to_arg(tensor({t, t}, bits), true);
    }
    c.calls.push_back(
        {{"fn", pass_mask ? "masked_attention" : "causal_attention"}, {"args", args}});
    Expectation e;
    e.what = "output";
    e.where = "T=" + std::to_string(t) + " Dh=" + std::to_string(dh) +
              (pass_mask ? ", mask " + spec : "");
    e.axes = {"position", "component"};
    e.expected = reference(q, k, v, t, dh, m.view(), scale);
    e.atol = e.rtol = kTol;
    e.mistakes = {
        {reference(q, k, v, t, dh, m.view(), 1.0f),
         "your scores are not scaled by 1/sqrt(Dh): s = q.k / sqrt(Dh)"},
        {reference(q, k, v, t, dh, m.view(), 1.0f / static_cast<float>(dh)),
         "you scaled by 1/Dh; the scale is 1/sqrt(Dh)"},
        {reference(q, k, v, t, dh, make_mask_one_head("prefix:" + std::to_string(t), t).view(),
                   scale),
         kSeesLaterHint},
    };
    if (!pass_mask) {
        e.mistakes.push_back(
            {reference(q, k, v, t, dh, sees_next_mask(t).view(), scale), kSeesNextHint});
        const BoundMask hides = hides_itself_mask(t);
        Tensor hidden = reference(q, k, v, t, dh, hides.view(), scale);
        unchecked_rows(hidden, hides, t, dh);
        e.mistakes.push_back({hidden, kHidesItselfHint});
    }
    if (pass_mask && spec != "causal")
        e.mistakes.push_back(
            {reference(q, k, v, t, dh, make_mask_one_head("causal", t).view(), scale),
             "you applied the causal mask, not the mask given: mask[q, k] == 0 "
             "hides key k from query q"});
    e.diagnose = nan_hint;
    c.expect.push_back(std::move(e));
    return c;
}

// A known GQA mistake: query head `head` reads K/V head `kv_head(head)`, each head
// then one head's attention as the engine computes it, times `scale`.
template <typename KvHead>
Tensor gqa_mistake(const std::vector<float>& q, const std::vector<float>& k,
                   const std::vector<float>& v, int t, int h, int hkv, int dh, float scale,
                   KvHead kv_head, const BoundMask& causal) {
    std::vector<double> out(std::size_t(t) * h * dh);
    std::vector<float> qh(std::size_t(t) * dh), kh(qh.size()), vh(qh.size());
    for (int head = 0; head < h; ++head) {
        const int g = kv_head(head);
        for (int p = 0; p < t; ++p)
            for (int d = 0; d < dh; ++d) {
                qh[std::size_t(p) * dh + d] = q[(std::size_t(p) * h + head) * dh + d];
                kh[std::size_t(p) * dh + d] = k[(std::size_t(p) * hkv + g) * dh + d];
                vh[std::size_t(p) * dh + d] = v[(std::size_t(p) * hkv + g) * dh + d];
            }
        const Tensor one = reference(qh, kh, vh, t, dh, causal.view(), scale);
        for (int p = 0; p < t; ++p)
            for (int d = 0; d < dh; ++d)
                out[(std::size_t(p) * h + head) * dh + d] = one.data[std::size_t(p) * dh + d];
    }
    Tensor result = tensor({t, h, dh}, out);
    unchecked_rows(result, causal, t, h * dh);
    return result;
}

const char* kGqaModuloHint =
    "GQA head mapping: query head h reads K/V head h // (H / Hkv) (consecutive query heads "
    "share one K/V head), not h % Hkv";

Case gqa_case(std::mt19937_64& rng, int t, int h, int hkv, int dh) {
    const std::vector<float> q = uniform(rng, std::size_t(t) * h * dh),
                             k = uniform(rng, std::size_t(t) * hkv * dh),
                             v = uniform(rng, std::size_t(t) * hkv * dh);
    Case c;
    c.calls.push_back({{"fn", "gqa_attention"},
                       {"args",
                        {{"q", to_arg(tensor_f({t, h, dh}, q))},
                         {"k", to_arg(tensor_f({t, hkv, dh}, k))},
                         {"v", to_arg(tensor_f({t, hkv, dh}, v))}}}});
    Expectation e;
    e.what = "output";
    e.where = "T=" + std::to_string(t) + " H=" + std::to_string(h) + " Hkv=" + std::to_string(hkv) +
              " Dh=" + std::to_string(dh);
    e.axes = {"position", "head", "component"};
    e.expected = gqa_reference(q, k, v, t, h, hkv, dh);
    e.atol = e.rtol = kTol;
    const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
    const BoundMask causal = make_mask_one_head("causal", t);
    auto engine_head = [h, hkv](int head) { return kv_head_of(head, h, hkv); };
    // Only where the two mappings differ: 1 < Hkv < H (MQA and MHA agree).
    if (hkv > 1 && hkv < h)
        e.mistakes.push_back(
            {gqa_mistake(
                 q, k, v, t, h, hkv, dh, scale, [hkv](int head) { return head % hkv; }, causal),
             kGqaModuloHint});
    e.mistakes.push_back({gqa_mistake(q, k, v, t, h, hkv, dh, 1.0f, engine_head, causal),
                          "your scores are not scaled by 1/sqrt(Dh): s = q.k / sqrt(Dh)"});
    // The causal mask's mistakes, as in causal_attention (students share the code).
    e.mistakes.push_back({gqa_mistake(q, k, v, t, h, hkv, dh, scale, engine_head,
                                      make_mask_one_head("prefix:" + std::to_string(t), t)),
                          kSeesLaterHint});
    e.mistakes.push_back(
        {gqa_mistake(q, k, v, t, h, hkv, dh, scale, engine_head, sees_next_mask(t)),
         kSeesNextHint});
    e.mistakes.push_back(
        {gqa_mistake(q, k, v, t, h, hkv, dh, scale, engine_head, hides_itself_mask(t)),
         kHidesItselfHint});
    e.diagnose = nan_hint;
    c.expect.push_back(std::move(e));
    return c;
}

}  // namespace attention_detail

std::vector<Check> attention_checks(std::mt19937_64& rng) {
    using attention_detail::gqa_case;
    using attention_detail::make_case;
    std::vector<Check> checks(5);
    checks[0] = {"causal, small shapes",
                 "compute s = q.k / sqrt(Dh), hide k > q, softmax over each row, weight v",
                 {}};
    for (auto [t, dh] : {std::pair{1, 1}, {2, 4}, {5, 2}, {4, 8}})
        checks[0].cases.push_back(make_case(rng, t, dh, 1.0f, "causal", false));
    checks[1] = {"causal, odd sizes (T and Dh 1, 7, 33)",
                 "shapes: q, k, v are (T, Dh) and the output is (T, Dh)",
                 {}};
    for (auto [t, dh] : {std::pair{7, 7}, {33, 3}, {7, 33}, {33, 1}})
        checks[1].cases.push_back(make_case(rng, t, dh, 1.0f, "causal", false));
    checks[2] = {"causal, large scores (softmax overflow)",
                 "subtract each row's largest score before exp",
                 {}};
    for (auto [t, dh] : {std::pair{9, 16}, {17, 8}})
        checks[2].cases.push_back(make_case(rng, t, dh, 60.0f, "causal", false));
    checks[3] = {"masks of plab mask's grammar",
                 "mask[q, k] == 1: query q may see key k; 0: its score is -inf",
                 {}};
    for (const char* spec : {"causal", "window:3", "window:4+sink:2", "dilated:3,2", "chunked:5",
                             "prefix:6", "docs:4,7,5", "chunked:4|prefix:3"})
        checks[3].cases.push_back(make_case(rng, 16, 5, 1.0f, spec, true));
    checks[4] = {"GQA: H query heads over Hkv K/V heads",
                 "query head h reads K/V head h // (H / Hkv): consecutive query heads share one "
                 "K/V head (q is (T, H, Dh), k and v (T, Hkv, Dh))",
                 {}};
    // Groups of 2, 3 and 4 query heads; MQA (Hkv 1) and MHA (Hkv = H); odd Dh.
    for (auto [t, h, hkv, dh] : {std::array{5, 4, 2, 3},
                                 {9, 6, 3, 4},
                                 {7, 8, 2, 5},
                                 {12, 6, 2, 8},
                                 {4, 3, 1, 7},
                                 {6, 4, 4, 2}})
        checks[4].cases.push_back(gqa_case(rng, t, h, hkv, dh));
    return checks;
}

}  // namespace plab::grade
