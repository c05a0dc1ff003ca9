// Golden logits from the independent PyTorch reference (tests/reference/) versus
// the engine's cpu-ref and cpu backends, on the shipped model and on random
// models (GQA, odd head counts, head_dim 6/8/10, rope_theta 1e4..1e6, tied and
// separate classifiers), plus a llama2.c .bin written by Python.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "golden_file.h"
#include "model/model_io.h"
#include "model/tokenizers/tokenizer_bpe.h"
#include "model_test_util.h"
#include "runtime/sampler.h"
#include "test_util.h"

using namespace plab;
using namespace plab::test;

namespace {

void check_golden(const std::string& golden_name, const std::string& backend) {
    const GoldenFile g = read_golden(repo_path("tests/golden/" + golden_name));
    const Model m =
        load_model(g.model == "assets/model" ? shipped_model_dir() : repo_path(g.model));
    REQUIRE(m.weights.config.vocab_size == g.vocab);
    for (const GoldenCase& c : g.cases) {
        INFO(golden_name << " case " << c.name << " on " << backend << " (" << c.tokens.size()
                         << " tokens)");
        if (!c.text.empty()) {
            // The C++ tokenizer must give the ids the Python tokenizer gave.
            REQUIRE(m.tokenizer->encode(c.text, true) == c.tokens);
        }
        const std::vector<float> got = all_logits(m.weights, backend, c.tokens);
        require_not_all_zero(c.logits, "golden logits");
        double scale = 0, worst = 0;
        for (float e : c.logits) scale = std::max(scale, double(std::fabs(e)));
        worst = max_abs_diff(got, c.logits) / scale;
        WARN(golden_name << " " << c.name << " " << backend
                         << ": max |diff| / max |logit| = " << worst);
        // Tolerance: the reference is float64; the engine is float32, so each logit
        // carries rounding from ~D + F + T terms per layer (a few ulps of the
        // largest logit, ~1e-7 relative each). 1e-5 of the largest logit leaves
        // room for that and still catches any wrong convention (RoPE pairing,
        // GQA mapping, eps, scale), which moves logits by >1e-2.
        require_allclose(got, c.logits, 1e-5 * scale, 0.0,
                         "float32 engine vs float64 reference, 1e-5 of the largest logit");
        // The engine's greedy first token (the sampler's argmax over the engine's
        // last-position logits) is the token PyTorch picked (argmax_last).
        const std::size_t last_row = (c.tokens.size() - 1) * std::size_t(g.vocab);
        const int32_t engine_first_token =
            argmax(std::vector<float>(got.begin() + std::ptrdiff_t(last_row),
                                      got.begin() + std::ptrdiff_t(last_row + g.vocab)));
        REQUIRE(engine_first_token == c.argmax_last);
        // Same greedy token at the last position, and at every position whose
        // top two reference logits are not a near tie.
        const int V = g.vocab;
        const int T = int(c.tokens.size());
        for (int t = 0; t < T; ++t) {
            const float* e = c.logits.data() + std::size_t(t) * V;
            const float* a = got.data() + std::size_t(t) * V;
            int ea = 0, aa = 0;
            for (int i = 1; i < V; ++i) {
                if (e[i] > e[ea]) ea = i;
                if (a[i] > a[aa]) aa = i;
            }
            float second = -1e30f;
            for (int i = 0; i < V; ++i)
                if (i != ea) second = std::max(second, e[i]);
            if (t == T - 1 || e[ea] - second > 1e-4 * scale) {
                INFO("position " << t);
                REQUIRE(aa == ea);
            }
        }
    }
}

}  // namespace

TEST_CASE("golden: random GQA model, 3 heads of dim 10, theta 5e5", "[model][golden]") {
    for (const char* b : {"cpu-ref", "cpu"}) check_golden("rand_gqa_h3_dh10.golden", b);
}

TEST_CASE("golden: random GQA model, 6 heads of dim 6, tied classifier", "[model][golden]") {
    for (const char* b : {"cpu-ref", "cpu"}) check_golden("rand_gqa_h6_dh6.golden", b);
}

TEST_CASE("golden: random MHA model, 5 heads of dim 8, theta 1e6", "[model][golden]") {
    for (const char* b : {"cpu-ref", "cpu"}) check_golden("rand_mha_h5_dh8.golden", b);
}

TEST_CASE("golden: llama2.c .bin written by Python (interleaved RoPE rows)",
          "[model][golden][llama2c]") {
    for (const char* b : {"cpu-ref", "cpu"}) check_golden("rand_llama2c_gqa.golden", b);
}

TEST_CASE("golden: the shipped model on held-out story prompts", "[model][golden][shipped]") {
    for (const char* b : {"cpu-ref", "cpu"}) check_golden("shipped_model.golden", b);
}

TEST_CASE("golden: the .bin and the safetensors of one model give identical logits",
          "[model][llama2c]") {
    // Same floats, two files, two RoPE pairings on disk: cpu-ref must agree bit for bit.
    const Model a = load_model(repo_path("tests/golden/models/rand_llama2c_gqa.bin"));
    const Model b = load_model(repo_path("tests/golden/models/rand_llama2c_gqa"));
    const std::vector<int32_t> tokens = random_tokens(25, 258, 7);
    const auto la = all_logits(a.weights, "cpu-ref", tokens);
    require_not_all_zero(la, "logits");
    require_bitwise_equal(la, all_logits(b.weights, "cpu-ref", tokens),
                          ".bin vs safetensors logits");
}
