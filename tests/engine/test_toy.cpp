// The toy example: 2, 4, 8, 10 -> 2, 3, 14/3, 6 through the model's own attention op.
#include <catch2/catch.hpp>
#include <cmath>

#include "runtime/registry.h"
#include "test_util.h"
#include "toy/toy.h"

using namespace plab;

namespace {

// Hand-computed causal softmax attention in double precision.
std::vector<double> hand_attention(const ToyInput& in) {
    std::vector<double> out;
    for (int p = 0; p < in.n_tokens(); ++p) {
        double m = -INFINITY;
        for (int j = 0; j <= p; ++j) m = std::max(m, double(in.queries[p]) * in.keys[j]);
        double num = 0, den = 0;
        for (int j = 0; j <= p; ++j) {
            const double e = std::exp(double(in.queries[p]) * in.keys[j] - m);
            num += e * in.values[j];
            den += e;
        }
        out.push_back(num / den);
    }
    return out;
}

}  // namespace

TEST_CASE("toy: 2,4,8,10 gives 2, 3, 14/3, 6 for full and every chunking", "[toy]") {
    for (const std::string& name : backend_names()) {
        auto backend = make_backend(name);
        const ToyInput in;  // queries and keys 1, values 2, 4, 8, 10
        const std::vector<float> expected{2.0f, 3.0f, 14.0f / 3.0f, 6.0f};
        for (const ChunkPlan& plan : all_chunk_plans(4)) {
            INFO("backend " << name << ", plan " << plan.to_string());
            const ToyRun r = run_toy(*backend, in, plan);
            test::require_bitwise_equal(r.outputs, expected, "toy outputs");
        }
    }
}

TEST_CASE("toy: probabilities are causal and sum to one", "[toy]") {
    auto backend = make_backend("cpu-ref");
    const ToyRun r = run_toy(*backend, ToyInput{}, ChunkPlan{{2, 2}});
    for (int p = 0; p < 4; ++p) {
        double sum = 0;
        for (int j = 0; j < 4; ++j) {
            const float w = r.probs[std::size_t(p) * 4 + j];
            if (j > p) REQUIRE(w == 0.0f);  // the future is masked
            sum += w;
        }
        REQUIRE(sum == Approx(1.0).epsilon(1e-6));
        REQUIRE(r.probs[std::size_t(p) * 4] == Approx(1.0 / (p + 1)).epsilon(1e-6));
    }
}

TEST_CASE("toy: other numbers match a hand-computed softmax", "[toy]") {
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        const int n = 1 + int(seed % 9);
        ToyInput in;
        in.queries = test::random_floats(n, seed, -3, 3);
        in.keys = test::random_floats(n, seed + 100, -3, 3);
        in.values = test::random_floats(n, seed + 200, -10, 10);
        const std::vector<double> want = hand_attention(in);
        std::vector<float> want_f(want.begin(), want.end());
        for (const std::string& name : backend_names()) {
            auto backend = make_backend(name);
            const ToyRun full = run_toy(*backend, in, ChunkPlan{{n}});
            // Float softmax of O(10) values: a few ulp of the largest |v|; 1e-5 relative is ample.
            test::require_allclose(full.outputs, want_f, 1e-5, 1e-5, "float vs double softmax");
            const ToyRun chunked = run_toy(*backend, in, fixed_chunk_plan(n, 2));
            if (backend->is_reference()) {
                test::require_bitwise_equal(chunked.outputs, full.outputs, "chunked vs full");
            } else {
                test::require_allclose(chunked.outputs, full.outputs, 1e-5, 1e-5,
                                       "fast backend: tile shapes reorder sums");
            }
        }
    }
}

TEST_CASE("toy: the exact fraction is computed, not printed from a table", "[toy]") {
    const ToyInput in;
    REQUIRE(toy_exact_output(in, 2) == "14/3 = mean of v0..v2");
    REQUIRE(toy_exact_output(in, 3) == "6 = mean of v0..v3");
    ToyInput other;
    other.values = {1, 2, 4, 4};
    REQUIRE(toy_exact_output(other, 1) == "3/2 = mean of v0..v1");
    other.queries = {1, 2, 1, 1};
    other.keys = {1, 3, 1, 1};
    REQUIRE(toy_exact_output(other, 1).empty());  // unequal scores: not a plain mean
}

TEST_CASE("toy: bad input is rejected with a clear message", "[toy]") {
    auto backend = make_backend("cpu-ref");
    ToyInput in;
    in.keys = {1, 1};
    REQUIRE_THROWS_WITH(run_toy(*backend, in, ChunkPlan{{4}}),
                        Catch::Contains("give one of each per position"));
    REQUIRE_THROWS_WITH(run_toy(*backend, ToyInput{}, ChunkPlan{{3}}),
                        Catch::Contains("covers 3 positions"));
}
