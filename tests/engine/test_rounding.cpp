// The reduction-order lab (toy/rounding.h, `plab rounding`, lesson 15): each
// sum it prints recomputed here independently, the differences it teaches
// shown to exist for its defaults, and the real kernels' answer to its second
// scene — 80 cached + 48 new keys — checked on the backends themselves.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "runtime/device_model.h"
#include "runtime/equivalence.h"
#include "runtime/registry.h"
#include "test_util.h"
#include "toy/rounding.h"

using namespace plab;
using namespace plab::test;

namespace {

float left_to_right(const std::vector<float>& v, std::size_t lo, std::size_t hi) {
    return std::accumulate(v.begin() + std::ptrdiff_t(lo), v.begin() + std::ptrdiff_t(hi), 0.0f);
}

const std::vector<float> kTenths(8, 0.1f);  // the command's default --values

}  // namespace

TEST_CASE("rounding lab: scene 1 sums each order as it says / and the orders disagree",
          "[rounding]") {
    const OrdersScene s = orders_scene(kTenths);
    REQUIRE(s.orders.size() == 5);
    const std::vector<float>& v = kTenths;
    // Recomputed with other code: std::accumulate, explicit groupings.
    REQUIRE(float_bits(s.orders[0].sum) == float_bits(left_to_right(v, 0, 8)));
    const std::vector<float> r(v.rbegin(), v.rend());
    REQUIRE(float_bits(s.orders[1].sum) == float_bits(left_to_right(r, 0, 8)));
    REQUIRE(float_bits(s.orders[2].sum) ==
            float_bits(left_to_right(v, 0, 4) + left_to_right(v, 4, 8)));
    const float l0 = v[0] + v[4], l1 = v[1] + v[5], l2 = v[2] + v[6], l3 = v[3] + v[7];
    REQUIRE(float_bits(s.orders[3].sum) == float_bits((l0 + l1) + (l2 + l3)));
    REQUIRE(float_bits(s.orders[4].sum) ==
            float_bits(((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]))));
    double exact = 0;
    for (float x : v) exact += x;
    REQUIRE(s.exact == exact);
    // The point of the scene: one list, more than one answer, a few ulps apart.
    std::set<std::string> bits;
    for (const OrderedSum& o : s.orders) {
        bits.insert(float_bits(o.sum));
        REQUIRE(ulps_between(o.sum, float(exact)) <= 2);
    }
    REQUIRE(bits.size() >= 2);
}

TEST_CASE("rounding lab: ulps and bits", "[rounding]") {
    REQUIRE(float_bits(1.0f) == "0x3f800000");
    REQUIRE(ulps_between(1.0f, 1.0f) == 0);
    REQUIRE(ulps_between(1.0f, std::nextafter(1.0f, 2.0f)) == 1);
    REQUIRE(ulps_between(-0.0f, 0.0f) == 0);
    REQUIRE(ulps_between(std::nextafter(0.0f, -1.0f), std::nextafter(0.0f, 1.0f)) == 2);
}

TEST_CASE(
    "rounding lab: scene 2, 80 cached + 48 new keys in tiles of 32 / the separate "
    "reduction moves the tiles and the bits, appending first keeps full prefill's",
    "[rounding]") {
    const TilesScene s = tiles_scene(80, 48, 32, 1);
    REQUIRE(s.weights.size() == 128);
    REQUIRE(*std::max_element(s.weights.begin(), s.weights.end()) == 1.0f);  // exp(max - max)
    REQUIRE(s.full.starts == std::vector<int>{0, 32, 64, 96});
    REQUIRE(s.separate.starts == std::vector<int>{0, 32, 64, 80, 112});
    REQUIRE(s.appended.starts == s.full.starts);
    for (const PieceSum* p : {&s.full, &s.separate, &s.appended}) {
        INFO(p->name);
        for (std::size_t i = 0; i < p->starts.size(); ++i) {
            const std::size_t hi = i + 1 < p->starts.size() ? p->starts[i + 1] : 128;
            REQUIRE(float_bits(p->pieces[i]) ==
                    float_bits(left_to_right(s.weights, p->starts[i], hi)));
        }
        REQUIRE(float_bits(p->sum) == float_bits(left_to_right(p->pieces, 0, p->pieces.size())));
    }
    REQUIRE(float_bits(s.appended.sum) == float_bits(s.full.sum));
    REQUIRE(float_bits(s.separate.sum) != float_bits(s.full.sum));  // what lesson 15 shows
}

TEST_CASE("rounding lab: scene 3 / a fixed split count moves the bits, a fixed split size not",
          "[rounding]") {
    const TilesScene t = tiles_scene(80, 48, 32, 1);
    const SplitsScene s = splits_scene(t.weights, {3, 4, 6}, 32);
    REQUIRE(s.by_count.size() == 3);
    REQUIRE(s.by_count[0].starts == std::vector<int>{0, 43, 86});
    REQUIRE(s.by_count[1].starts == s.by_size.starts);  // 4 splits of 128 keys are 32 each
    REQUIRE(float_bits(s.by_count[1].sum) == float_bits(s.by_size.sum));
    int moved = 0;
    for (const PieceSum& p : s.by_count) moved += float_bits(p.sum) != float_bits(s.by_size.sum);
    REQUIRE(moved >= 1);
    require_error([&] { splits_scene(t.weights, {0}, 32); },
                  "--split-counts entries must be 1..128");
    require_error([&] { splits_scene(t.weights, {2}, 0); }, "--split-size must be 1..128");
}

TEST_CASE(
    "rounding lab, on the real kernels: 80 cached + 48 new keys give full prefill's bits "
    "on every backend",
    "[rounding][prefill]") {
    // Scene 2 on the engine: a 128-token prompt, plan 80,48 against the whole
    // prompt. Key tiles of 32 aligned to key 0 (cpu, gpu) and fixed-order sums
    // (cpu-ref, gpu-ref) keep every bit.
    const ModelConfig c = small_config(48, 2, 4, 2, 12, 96, 64, 128);
    const Weights w = make_random_weights(c, 80);
    const std::vector<int32_t> tokens = random_tokens(128, c.vocab_size, 48);
    for (const char* name : {"cpu-ref", "cpu"}) {
        INFO(name);
        auto b = make_backend(name);
        const DeviceModel dm(*b, w);
        const PrefillSnapshot whole = run_prefill_snapshot(dm, tokens, ChunkPlan{{128}});
        require_not_all_zero(whole.last_logits, "logits");
        const PrefillSnapshot chunked = run_prefill_snapshot(dm, tokens, ChunkPlan{{80, 48}});
        REQUIRE(compare_snapshots(chunked, whole).bitwise());
    }
}

TEST_CASE("plab rounding: prints the three scenes / JSON / bad input is one line",
          "[rounding][cli]") {
    const CliResult r = run_cli({"rounding"});
    REQUIRE(r.exit_code == 0);
    REQUIRE(r.out.find("0x3f4ccccd") != std::string::npos);  // 0.8's nearest float, in scene 1
    REQUIRE(r.out.find("pieces from key: 0 32 64 80 112") != std::string::npos);
    const nlohmann::json j = nlohmann::json::parse(run_cli({"rounding", "--json"}).out);
    const TilesScene s = tiles_scene(80, 48, 32, 1);
    REQUIRE(j["tiles"]["separate"]["bits"] == float_bits(s.separate.sum));
    REQUIRE(j["tiles"]["full"]["bits"] == float_bits(s.full.sum));
    REQUIRE(j["orders"]["sums"].size() == 5);
    REQUIRE(j["splits"]["by_count"].size() == 3);
    require_one_line_cli_error(run_cli({"rounding", "--values", "1"}),
                               "--values needs 2 to 4096 numbers, got 1");
    require_one_line_cli_error(run_cli({"rounding", "--values", "1,x"}), "--values");
    require_one_line_cli_error(run_cli({"rounding", "--tile", "0"}),
                               "--tile must be 1..4096, got 0");
    require_one_line_cli_error(run_cli({"rounding", "--cached", "-1"}),
                               "--cached must be 1..100000, got -1");
    require_one_line_cli_error(run_cli({"rounding", "--new", "0"}),
                               "--new must be 1..100000, got 0");
    require_one_line_cli_error(run_cli({"rounding", "--split-counts", "2,,3"}), "--split-counts");
    require_one_line_cli_error(run_cli({"rounding", "--split-size", "500"}),
                               "--split-size must be 1..128, got 500");
}
