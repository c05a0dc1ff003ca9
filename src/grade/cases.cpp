// `plab grade`: the small helpers every assignment's cases share: tensors as
// the harness sends them, seeded inputs, random chunk plans.
#include <algorithm>

#include "core/random.h"
#include "grade/grade.h"

namespace plab::grade {

Tensor tensor(std::vector<int> shape, std::vector<double> data) {
    return Tensor{std::move(shape), std::move(data)};
}

Tensor tensor_f(std::vector<int> shape, const std::vector<float>& data) {
    return Tensor{std::move(shape), std::vector<double>(data.begin(), data.end())};
}

nlohmann::json to_arg(const Tensor& t, bool integer) {
    nlohmann::json values = nlohmann::json::array();
    for (double x : t.data) {
        if (integer)
            values.push_back(static_cast<long long>(x));
        else
            values.push_back(static_cast<float>(x));  // the engine's float32 inputs, exactly
    }
    return {{"array", values}, {"shape", t.shape}, {"dtype", integer ? "int64" : "float32"}};
}

std::vector<float> uniform(std::mt19937_64& rng, std::size_t n, float scale) {
    std::vector<float> v(n);
    for (float& x : v) x = random::uniform(rng, -scale, scale);
    return v;
}

int uniform_int(std::mt19937_64& rng, int lo, int hi) {
    return int(random::uniform_int(rng, lo, hi));
}

std::vector<int> random_plan(std::mt19937_64& rng, int t, int max_chunk) {
    std::vector<int> plan;
    for (int done = 0; done < t;) {
        const int c = std::min(uniform_int(rng, 1, max_chunk), t - done);
        plan.push_back(c);
        done += c;
    }
    return plan;
}

}  // namespace plab::grade
