// `plab grade chunked_prefill`: the whole model's prefill from the weights,
// chunk by chunk (lessons/assignments/chunked_prefill/README.md).
//
// What it teaches: every piece of the earlier assignments (attention, RoPE at
// absolute positions, the KV cache) put together into the engine's forward pass
// (runtime/forward.h), and the central invariant of chunked prefill: any chunk
// plan gives the same logits and the same K/V as one chunk.
//
// The reference is the engine's own: a Session on the cpu-ref backend, its
// last-position logits and the K/V it cached, layer by layer. The known
// mistakes come from a small scalar model here (double, one loop per formula)
// that can go wrong on purpose: RoPE positions restarting in every chunk, a
// causal mask that forgets the cached prefix, query head h reading KV head
// h % Hkv, scores not scaled by 1/sqrt(Dh). Left out: masks other than causal,
// a paged pool (the kv_cache assignment), decode.
#include <algorithm>
#include <cmath>

#include "grade/grade.h"
#include "model/shapes.h"
#include "model/weights.h"
#include "runtime/session.h"

namespace plab::grade {
namespace chunked_prefill_detail {

enum class Variant { engine, restart, no_prefix, gqa_modulo, no_scale };

// What a prefill leaves: the last position's logits and every layer's cache.
struct Prefilled {
    std::vector<double> logits;             // (V)
    std::vector<std::vector<double>> k, v;  // L of (T, Hkv, Dh), keys after RoPE
};

// The scalar model: the engine's formulas in double, one chunk at a time, or
// with one mistake planted. Only the mistakes' answers come from here.
Prefilled run_scalar(const Weights& w, const std::vector<int>& tokens, const std::vector<int>& plan,
                     Variant variant) {
    const ModelConfig& c = w.config;
    const int d = c.dim, h = c.n_heads, hkv = c.n_kv_heads, dh = c.head_dim, f = c.hidden_dim;
    const int t = static_cast<int>(tokens.size()), half = dh / 2;
    Prefilled out;
    out.k.assign(c.n_layers, std::vector<double>(std::size_t(t) * hkv * dh));
    out.v = out.k;
    // y (n) = W (n, k) x (k)
    auto linear = [](const std::vector<float>& wt, const std::vector<double>& x, int n) {
        const std::size_t k = x.size();
        std::vector<double> y(n, 0.0);
        for (int i = 0; i < n; ++i)
            for (std::size_t j = 0; j < k; ++j) y[i] += double(wt[i * k + j]) * x[j];
        return y;
    };
    auto rmsnorm = [&](const std::vector<double>& x, const std::vector<float>& weight) {
        double ss = 0;
        for (double e : x) ss += e * e;
        const double inv = 1.0 / std::sqrt(ss / d + double(c.norm_eps));
        std::vector<double> y(d);
        for (int i = 0; i < d; ++i) y[i] = x[i] * inv * weight[i];
        return y;
    };
    // Half-split pairs (i, i + Dh/2) of every head of `x`, turned to position `pos`.
    auto rope = [&](std::vector<double>& x, int heads, int pos) {
        for (int hh = 0; hh < heads; ++hh)
            for (int i = 0; i < half; ++i) {
                const double a = pos * std::pow(c.rope_theta, -2.0 * i / dh);
                double& x0 = x[hh * dh + i];
                double& x1 = x[hh * dh + i + half];
                const double y0 = x0 * std::cos(a) - x1 * std::sin(a);
                x1 = x0 * std::sin(a) + x1 * std::cos(a);
                x0 = y0;
            }
    };
    std::vector<std::vector<double>> x(t, std::vector<double>(d));
    for (int p = 0; p < t; ++p)
        for (int i = 0; i < d; ++i) x[p][i] = w.tok_embeddings[std::size_t(tokens[p]) * d + i];
    // Chunk by chunk: every layer of a chunk runs before the next chunk starts.
    int pos0 = 0;
    for (int len : plan) {
        for (int l = 0; l < c.n_layers; ++l) {
            const LayerWeights& lw = w.layers[l];
            std::vector<std::vector<double>> q(len);
            for (int r = 0; r < len; ++r) {
                const int p = pos0 + r;
                const int rope_pos = variant == Variant::restart ? r : p;
                const std::vector<double> xn = rmsnorm(x[p], lw.attn_norm);
                q[r] = linear(lw.wq, xn, h * dh);
                std::vector<double> k = linear(lw.wk, xn, hkv * dh);
                const std::vector<double> v = linear(lw.wv, xn, hkv * dh);
                rope(q[r], h, rope_pos);
                rope(k, hkv, rope_pos);
                std::copy(k.begin(), k.end(), out.k[l].begin() + std::size_t(p) * hkv * dh);
                std::copy(v.begin(), v.end(), out.v[l].begin() + std::size_t(p) * hkv * dh);
            }
            for (int r = 0; r < len; ++r) {
                const int p = pos0 + r;
                const int first = variant == Variant::no_prefix ? pos0 : 0;
                const double scale = variant == Variant::no_scale ? 1.0 : 1.0 / std::sqrt(dh);
                std::vector<double> att(std::size_t(h) * dh, 0.0);
                for (int hh = 0; hh < h; ++hh) {
                    const int g = variant == Variant::gqa_modulo ? hh % hkv : hh / (h / hkv);
                    std::vector<double> s(p + 1 - first);
                    double m = -INFINITY, sum = 0;
                    for (int j = first; j <= p; ++j) {
                        double dot = 0;
                        for (int e = 0; e < dh; ++e)
                            dot +=
                                q[r][hh * dh + e] * out.k[l][(std::size_t(j) * hkv + g) * dh + e];
                        s[j - first] = dot * scale;
                        m = std::max(m, s[j - first]);
                    }
                    for (double& e : s) sum += (e = std::exp(e - m));
                    for (int j = first; j <= p; ++j)
                        for (int e = 0; e < dh; ++e)
                            att[hh * dh + e] +=
                                s[j - first] / sum * out.v[l][(std::size_t(j) * hkv + g) * dh + e];
                }
                const std::vector<double> o = linear(lw.wo, att, d);
                for (int i = 0; i < d; ++i) x[p][i] += o[i];
                const std::vector<double> xn = rmsnorm(x[p], lw.ffn_norm);
                const std::vector<double> gate = linear(lw.w_gate, xn, f);
                std::vector<double> up = linear(lw.w_up, xn, f);
                for (int i = 0; i < f; ++i) up[i] *= gate[i] / (1.0 + std::exp(-gate[i]));
                const std::vector<double> down = linear(lw.w_down, up, d);
                for (int i = 0; i < d; ++i) x[p][i] += down[i];
            }
        }
        pos0 += len;
    }
    out.logits = linear(w.classifier_or_tied(), rmsnorm(x[t - 1], w.final_norm), c.vocab_size);
    return out;
}

// The engine's answer: one chunk on cpu-ref (any plan gives the same bits there).
Prefilled run_engine(const Weights& w, const std::vector<int>& tokens) {
    const LoadedModel model(w, "cpu-ref");
    Session session(model);
    const std::vector<int32_t> ids(tokens.begin(), tokens.end());
    const PrefillResult r = session.prefill(ids, ChunkPlan{{static_cast<int>(tokens.size())}});
    Prefilled out;
    out.logits.assign(r.last_logits.begin(), r.last_logits.end());
    for (int l = 0; l < w.config.n_layers; ++l) {
        const std::vector<float> k = session.read_kv(l, KvPart::K);
        const std::vector<float> v = session.read_kv(l, KvPart::V);
        out.k.emplace_back(k.begin(), k.end());
        out.v.emplace_back(v.begin(), v.end());
    }
    return out;
}

// The student's full prefill against the engine's: the engine sums in float32 in
// its own fixed order (core/strict_math.h), numpy in float32 or float64 in
// BLAS's order; over two or three layers of values of order 1 they part by
// ~1e-6, so 1e-4 + 1e-4 |expected|, as the other assignments.
constexpr double kTol = 1e-4;
// The student's chunked prefill against their own full one. Not bitwise: numpy's
// matrix products block a (C, D) operand differently for different C, so even an
// order-stable implementation in float32 moves by ~1e-7 per product; a wrong
// chunked prefill moves the logits by ~1e-2 or more. 1e-5 + 1e-5 |expected|.
constexpr double kChunkTol = 1e-5;

struct Model {
    Weights weights;
    std::string name;  // "D=24 L=2 H=6 Hkv=2 Dh=4 F=40 V=29"
};

Model make_model(std::mt19937_64& rng, int d, int l, int h, int hkv, int dh, int f, int v) {
    ModelConfig c;
    c.dim = d, c.n_layers = l, c.n_heads = h, c.n_kv_heads = hkv, c.head_dim = dh;
    c.hidden_dim = f, c.vocab_size = v, c.max_seq_len = 64;
    c.validate();
    Model m;
    m.weights = make_random_weights(c, rng());
    // Sharper attention than an initialised model (scores of std ~2, not ~1), so
    // that a position or a mask gone wrong moves the logits well past kTol.
    for (LayerWeights& lw : m.weights.layers)
        for (float& e : lw.wq) e *= 2.0f;
    m.name = "D=" + std::to_string(d) + " L=" + std::to_string(l) + " H=" + std::to_string(h) +
             " Hkv=" + std::to_string(hkv) + " Dh=" + std::to_string(dh) +
             " F=" + std::to_string(f) + " V=" + std::to_string(v);
    return m;
}

// Stacks one tensor of every layer: (L, ...).
Tensor stack(const Weights& w, std::vector<float> LayerWeights::*field, std::vector<int> shape) {
    std::vector<float> all;
    for (const LayerWeights& lw : w.layers)
        all.insert(all.end(), (lw.*field).begin(), (lw.*field).end());
    shape.insert(shape.begin(), w.config.n_layers);
    return tensor_f(std::move(shape), all);
}

// The call that builds the student's Prefill object, named `as`, over the weights.
nlohmann::json construct(const Weights& w, const std::string& as) {
    const ModelConfig& c = w.config;
    const int d = c.dim, q = c.n_heads * c.head_dim, kv = c.n_kv_heads * c.head_dim,
              f = c.hidden_dim;
    return {{"fn", "Prefill"},
            {"as", as},
            {"args",
             {{"n_heads", c.n_heads},
              {"n_kv_heads", c.n_kv_heads},
              {"rope_theta", c.rope_theta},
              {"norm_eps", c.norm_eps},
              {"tok_embeddings", to_arg(tensor_f({c.vocab_size, d}, w.tok_embeddings))},
              {"attn_norm", to_arg(stack(w, &LayerWeights::attn_norm, {d}))},
              {"wq", to_arg(stack(w, &LayerWeights::wq, {q, d}))},
              {"wk", to_arg(stack(w, &LayerWeights::wk, {kv, d}))},
              {"wv", to_arg(stack(w, &LayerWeights::wv, {kv, d}))},
              {"wo", to_arg(stack(w, &LayerWeights::wo, {d, q}))},
              {"ffn_norm", to_arg(stack(w, &LayerWeights::ffn_norm, {d}))},
              {"w_gate", to_arg(stack(w, &LayerWeights::w_gate, {f, d}))},
              {"w_up", to_arg(stack(w, &LayerWeights::w_up, {f, d}))},
              {"w_down", to_arg(stack(w, &LayerWeights::w_down, {d, f}))},
              {"final_norm", to_arg(tensor_f({d}, w.final_norm))},
              {"classifier", to_arg(tensor_f({c.vocab_size, d}, w.classifier_or_tied()))}}}};
}

nlohmann::json chunk_call(const std::string& obj, const std::vector<int>& tokens, int pos0,
                          int len) {
    std::vector<double> ids(tokens.begin() + pos0, tokens.begin() + pos0 + len);
    return {{"fn", obj + ".chunk"}, {"args", {{"tokens", to_arg(tensor({len}, ids), true)}}}};
}

std::string plan_text(const std::vector<int>& plan) {
    std::string s;
    for (int len : plan) s += (s.empty() ? "" : ",") + std::to_string(len);
    return s;
}

// "position offset missing in chunk 1 (positions 3..6)": the first chunk that
// starts after cached tokens, where a restarting position first goes wrong.
std::string restart_hint(const std::vector<int>& plan) {
    if (plan.size() < 2) return "";
    return "position offset missing in chunk 1 (positions " + std::to_string(plan[0]) + ".." +
           std::to_string(plan[0] + plan[1] - 1) +
           "): RoPE turns a chunk's rows to their absolute positions pos0, pos0+1, ... "
           "(pos0 = tokens already cached), not 0, 1, ...";
}

const char* kNoPrefixHint =
    "your causal mask forgets the cached prefix: a query at position p sees keys 0..p, "
    "the cached ones included, not only its own chunk's";
const char* kGqaHint =
    "GQA head mapping: query head h reads KV head h // (H / Hkv) (consecutive query "
    "heads share one KV head), not h % Hkv";
const char* kNoScaleHint = "your scores are not scaled by 1/sqrt(Dh): s = q.k / sqrt(Dh)";

Tensor logits_tensor(const Prefilled& p) {
    return tensor({static_cast<int>(p.logits.size())}, p.logits);
}

// Mistakes seen in the last-position logits (`plan` the student ran).
std::vector<Mistake> logit_mistakes(const Weights& w, const std::vector<int>& tokens,
                                    const std::vector<int>& plan) {
    std::vector<Mistake> out;
    if (plan.size() > 1) {
        out.push_back(
            {logits_tensor(run_scalar(w, tokens, plan, Variant::restart)), restart_hint(plan)});
        out.push_back(
            {logits_tensor(run_scalar(w, tokens, plan, Variant::no_prefix)), kNoPrefixHint});
    }
    if (w.config.n_kv_heads < w.config.n_heads && w.config.n_kv_heads > 1)
        out.push_back({logits_tensor(run_scalar(w, tokens, plan, Variant::gqa_modulo)), kGqaHint});
    out.push_back({logits_tensor(run_scalar(w, tokens, plan, Variant::no_scale)), kNoScaleHint});
    return out;
}

// (a) The full prefill's last-position logits against the engine's.
Case full_case(const Model& m, std::mt19937_64& rng, int t) {
    std::vector<int> tokens(t);
    for (int& id : tokens) id = uniform_int(rng, 0, m.weights.config.vocab_size - 1);
    Case c;
    c.calls.push_back(construct(m.weights, "m"));
    c.calls.push_back(chunk_call("m", tokens, 0, t));
    Expectation e;
    e.call = 1;
    e.what = "last-position logits";
    e.where = m.name + ", T=" + std::to_string(t) + ", one chunk";
    e.axes = {"token id"};
    e.expected = logits_tensor(run_engine(m.weights, tokens));
    e.atol = e.rtol = kTol;
    e.mistakes = logit_mistakes(m.weights, tokens, {t});
    c.expect.push_back(std::move(e));
    return c;
}

// (b) A chunked prefill against the student's own full prefill of the same tokens.
Case chunked_case(const Model& m, std::mt19937_64& rng, const std::vector<int>& plan) {
    int t = 0;
    for (int len : plan) t += len;
    std::vector<int> tokens(t);
    for (int& id : tokens) id = uniform_int(rng, 0, m.weights.config.vocab_size - 1);
    Case c;
    c.calls.push_back(construct(m.weights, "full"));
    c.calls.push_back(chunk_call("full", tokens, 0, t));
    c.calls.push_back(construct(m.weights, "chunked"));
    int pos0 = 0;
    for (int len : plan) {
        c.calls.push_back(chunk_call("chunked", tokens, pos0, len));
        pos0 += len;
    }
    Expectation e;
    e.call = static_cast<int>(c.calls.size()) - 1;
    e.same_as_call = 1;
    e.what = "last-position logits of the last chunk, against your full prefill's";
    e.where = m.name + ", T=" + std::to_string(t) + ", chunk plan " + plan_text(plan);
    e.axes = {"token id"};
    e.atol = e.rtol = kChunkTol;
    std::vector<Mistake> all = logit_mistakes(m.weights, tokens, plan);
    // Only the mistakes that show in chunks: the others are in the full prefill too.
    for (Mistake& mk : all)
        if (mk.hint != kGqaHint && mk.hint != kNoScaleHint) e.mistakes.push_back(std::move(mk));
    c.expect.push_back(std::move(e));
    return c;
}

// (c) The K/V cached by a chunked prefill against the engine's, layer by layer.
Case cache_case(const Model& m, std::mt19937_64& rng, const std::vector<int>& plan) {
    const ModelConfig& cfg = m.weights.config;
    int t = 0;
    for (int len : plan) t += len;
    std::vector<int> tokens(t);
    for (int& id : tokens) id = uniform_int(rng, 0, cfg.vocab_size - 1);
    Case c;
    c.calls.push_back(construct(m.weights, "m"));
    int pos0 = 0;
    for (int len : plan) {
        c.calls.push_back(chunk_call("m", tokens, pos0, len));
        pos0 += len;
    }
    const Prefilled engine = run_engine(m.weights, tokens);
    std::vector<std::pair<Prefilled, std::string>> wrong;
    if (plan.size() > 1) {
        wrong.push_back(
            {run_scalar(m.weights, tokens, plan, Variant::restart), restart_hint(plan)});
        wrong.push_back({run_scalar(m.weights, tokens, plan, Variant::no_prefix), kNoPrefixHint});
    }
    if (cfg.n_kv_heads < cfg.n_heads && cfg.n_kv_heads > 1)
        wrong.push_back({run_scalar(m.weights, tokens, plan, Variant::gqa_modulo), kGqaHint});
    wrong.push_back({run_scalar(m.weights, tokens, plan, Variant::no_scale), kNoScaleHint});
    const std::vector<int> shape = {t, cfg.n_kv_heads, cfg.head_dim};
    for (int l = 0; l < cfg.n_layers; ++l) {
        c.calls.push_back({{"fn", "m.kv"}, {"args", {{"layer", l}}}});
        for (int part = 0; part < 2; ++part) {
            Expectation e;
            e.call = static_cast<int>(c.calls.size()) - 1;
            e.part = part;
            e.what = std::string(part == 0 ? "K" : "V") + " of layer " + std::to_string(l);
            e.where = m.name + ", T=" + std::to_string(t) + ", chunk plan " + plan_text(plan);
            e.axes = {"position", "kv head", "component"};
            e.expected = tensor(shape, part == 0 ? engine.k[l] : engine.v[l]);
            e.atol = e.rtol = kTol;
            for (const auto& [p, hint] : wrong)
                e.mistakes.push_back({tensor(shape, part == 0 ? p.k[l] : p.v[l]), hint});
            c.expect.push_back(std::move(e));
        }
    }
    return c;
}

// A plan of t tokens with at least two chunks, some not dividing t.
std::vector<int> plan_of(std::mt19937_64& rng, int t, int max_chunk) {
    for (;;) {
        std::vector<int> plan = random_plan(rng, t, max_chunk);
        if (plan.size() > 1 && plan[0] < t) return plan;
    }
}

}  // namespace chunked_prefill_detail

std::vector<Check> chunked_prefill_checks(std::mt19937_64& rng) {
    using namespace chunked_prefill_detail;
    // Odd head counts and GQA: H=9 over Hkv=3 (D != H·Dh), H=6 over Hkv=2; and MHA.
    const Model a = make_model(rng, 24, 2, 6, 2, 4, 40, 29);
    const Model b = make_model(rng, 18, 3, 9, 3, 6, 28, 31);
    const Model mha = make_model(rng, 16, 2, 2, 2, 8, 24, 23);
    std::vector<Check> checks(3);
    checks[0] = {"full prefill: logits vs the engine",
                 "per layer: RMSNorm, Q/K/V, RoPE, causal attention (GQA), O, + x, "
                 "RMSNorm, SwiGLU MLP, + x; then the final norm and the classifier",
                 {}};
    checks[0].cases.push_back(full_case(a, rng, 11));
    checks[0].cases.push_back(full_case(b, rng, 17));
    checks[0].cases.push_back(full_case(mha, rng, 1));
    checks[1] = {"chunked == your full prefill (chunk plans)",
                 "a chunk's queries sit at positions pos0.. and see every cached key",
                 {}};
    checks[1].cases.push_back(chunked_case(a, rng, plan_of(rng, 13, 5)));
    checks[1].cases.push_back(chunked_case(a, rng, {1, 1, 1, 1, 1}));
    checks[1].cases.push_back(chunked_case(b, rng, plan_of(rng, 16, 7)));
    checks[1].cases.push_back(chunked_case(mha, rng, plan_of(rng, 9, 4)));
    checks[2] = {"K/V cache per layer vs the engine",
                 "cache K after RoPE, V as projected, (T, Hkv, Dh) per layer",
                 {}};
    checks[2].cases.push_back(cache_case(a, rng, plan_of(rng, 10, 4)));
    checks[2].cases.push_back(cache_case(b, rng, plan_of(rng, 12, 5)));
    return checks;
}

}  // namespace plab::grade
