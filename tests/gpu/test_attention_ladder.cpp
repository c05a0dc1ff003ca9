// The attention ladder (kernels/attention_ladder.h): each rung against cpu-ref
// within its stated tolerance, chunk-invariant, and counted.
//
// What it shows: naive sums exactly as cpu-ref does (bitwise); online
// rescales (a few ulp); tiled is online bit for bit (the tiles move data, not
// sums); flash is the gpu backend's kernel. Every rung gives the same bits
// whether the call comes whole or in chunks. The emulated counts follow the
// ladder's story: naive reads K twice, online once per query, tiled once per
// block of 32 queries, flash at most as much. Shapes are awkward (odd Dh,
// GQA, a decode query, blocks of 5 and 7), the pools hold NaN in every unused
// slot, and masks empty, cut and modify scores.
#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "mask_cases.h"
#include "runtime/attention_ladder.h"
#include "runtime/mask_grammar.h"
#include "test_util.h"

namespace plab::test {
namespace {

struct LadderCase {
    const char* what;
    int n_queries, pos0, n_heads, n_kv_heads, head_dim, block_size;
    std::vector<int> plan;  // chunks of n_queries
};

// clang-format off
const LadderCase kCases[] = {
    {"37 queries, Dh 7, GQA 2:1, blocks of 5", 37, 0, 4, 2, 7, 5, {10, 26, 1}},
    {"70 queries at 20, Dh 32, MQA, blocks of 16", 70, 20, 2, 1, 32, 16, {33, 1, 36}},
    {"1 query at 90 (a decode step), Dh 16, blocks of 7", 1, 90, 3, 3, 16, 7, {1}},
};
const char* const kMasks[] = {"causal", "window:9+sink:2", "chunked:12+alibi+softcap:4"};
// clang-format on

}  // namespace

TEST_CASE("attention ladder: every rung against cpu-ref, and chunked equals whole",
          "[gpu][ladder]") {
    for (const LadderCase& c : kCases) {
        const std::vector<int32_t> tokens(std::size_t(c.pos0 + c.n_queries), 5);
        for (const char* spec : kMasks) {
            INFO(c.what << ", mask " << spec);
            const BoundMask mask = make_mask(spec, mask_context(tokens, c.n_heads));
            LadderProblem p = random_ladder_problem(c.n_queries, c.pos0, c.n_heads, c.n_kv_heads,
                                                    c.head_dim, c.block_size, 17);
            p.s.mask = mask.view();
            const std::vector<float> want = cpu_ref_attention(p);
            require_not_all_zero(want, "cpu-ref attention");
            std::vector<float> online;
            for (LadderRung rung : kLadderRungs) {
                INFO("rung " << ladder_rung_name(rung));
                const LadderRun r = gpu_emulated::run_attention_rung(rung, p);
                const LadderTolerance t = ladder_tolerance(rung);
                if (t.bitwise) {
                    require_bitwise_equal(r.out, want, "naive sums as cpu-ref does");
                } else {
                    require_allclose(r.out, want, t.atol, t.rtol,
                                     "the online softmax rescales as the max grows: a few ulp");
                }
                if (rung == LadderRung::online) online = r.out;
                if (rung == LadderRung::tiled)
                    require_bitwise_equal(r.out, online, "tiled runs online's steps in its order");
                require_bitwise_equal(ladder_chunked(rung, p, c.plan), r.out, "chunked vs whole");
            }
        }
    }
}

TEST_CASE("attention ladder: the bytes of K and V each rung reads, and its operations",
          "[gpu][ladder]") {
    // A causal prefill of 64 queries, 2 heads over 1 K/V head, Dh 16: query p
    // sees keys 0..p, so a head has 1 + 2 + ... + 64 = 2080 (query, key) pairs.
    const int dh = 16;
    const LadderProblem p = random_ladder_problem(64, 0, 2, 1, dh, 16, 5);
    const long long pairs = 2 * 2080;
    const long long row = 4LL * dh;  // bytes of one K or V row
    auto run = [&](LadderRung r) { return gpu_emulated::run_attention_rung(r, p).counts; };
    const LadderCounts naive = run(LadderRung::naive), online = run(LadderRung::online),
                       tiled = run(LadderRung::tiled), flash = run(LadderRung::flash);
    // naive: K in both passes, V in the second; a score is 2 Dh + 1 operations.
    CHECK(naive.kv_bytes == pairs * 3 * row);
    CHECK(naive.flops == pairs * (2 * (2 * dh + 1) + 3 + 2 * dh));
    // online: K and V once a pair; the score and the online step (3 Dh + 6).
    CHECK(online.kv_bytes == pairs * 2 * row);
    CHECK(online.flops == pairs * ((2 * dh + 1) + (3 * dh + 6)));
    // tiled: a block of 32 queries reads its keys once: the first block keys
    // 0..31, the second 0..63, per head; the same operations as online.
    CHECK(tiled.kv_bytes == 2 * (32 + 64) * 2 * row);
    CHECK(tiled.flops == online.flops);
    CHECK(online.kv_bytes > 20 * tiled.kv_bytes);
    // flash reads at most what tiled reads (larger query tiles, empty tiles
    // skipped) and computes whole tiles, masked cells included.
    CHECK(flash.kv_bytes > 0);
    CHECK(flash.kv_bytes <= tiled.kv_bytes);
    CHECK(flash.flops >= online.flops * 4 / 5);
}

TEST_CASE("attention ladder: the report plab bench --attention-ladder prints", "[gpu][ladder]") {
    const LadderReport rep = run_attention_ladder(40, 2, 1, 8, 3);
    REQUIRE(rep.rows.size() == 4);
    const char* names[] = {"naive", "online", "tiled", "flash"};
    for (std::size_t i = 0; i < rep.rows.size(); ++i) {
        INFO(rep.rows[i].rung);
        CHECK(rep.rows[i].rung == names[i]);
        CHECK(rep.rows[i].within_tolerance);
        CHECK(rep.rows[i].chunk_invariant);
        CHECK(rep.rows[i].kv_bytes > 0);
        CHECK(rep.rows[i].flops > 0);
    }
    CHECK(rep.rows[0].bitwise_cpu_ref);
    CHECK(rep.rows[0].kv_bytes > rep.rows[1].kv_bytes);
    CHECK(rep.rows[1].kv_bytes > rep.rows[2].kv_bytes);
    int sum = 0;
    for (int n : rep.chunks) sum += n;
    CHECK(sum == 40);
    CHECK(rep.chunks.size() >= 2);
}

TEST_CASE(
    "plab bench --attention-ladder prints the rungs in text and JSON and refuses a bad length",
    "[gpu][ladder][cli]") {
    const CliResult r = run_cli({"bench", "--attention-ladder", "--json", "--lengths", "48"});
    REQUIRE(r.exit_code == 0);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    CHECK(j["queries"] == 48);
    CHECK(j["counted_by"].get<std::string>().find("emulator") != std::string::npos);
    REQUIRE(j["rungs"].size() == 4);
    const char* names[] = {"naive", "online", "tiled", "flash"};
    for (std::size_t i = 0; i < 4; ++i) {
        const nlohmann::json& x = j["rungs"][i];
        INFO(names[i]);
        CHECK(x["rung"] == names[i]);
        CHECK(x["within_tolerance"] == true);
        CHECK(x["chunk_invariant"] == true);
        CHECK(x.contains("native_seconds"));
        if (i > 0)
            CHECK(x["kv_bytes"].get<long long>() < j["rungs"][i - 1]["kv_bytes"].get<long long>());
    }
    CHECK(j["rungs"][0]["tolerance"] == "bitwise");
    CHECK(j["rungs"][0]["bitwise_cpu_ref"] == true);
    const CliResult text = run_cli({"bench", "--attention-ladder", "--lengths", "16"});
    REQUIRE(text.exit_code == 0);
    CHECK(text.out.find("say nothing about a GPU") != std::string::npos);
    const CliResult bad = run_cli({"bench", "--attention-ladder", "--lengths", "0"});
    CHECK(bad.exit_code == 1);
    CHECK(bad.err.find("plab: error: --lengths 0 for --attention-ladder: one length from 1 to "
                       "4096") == 0);
}

TEST_CASE("attention ladder: kernels/README.md's table shows the counts the rungs make",
          "[gpu][ladder][docs]") {
    // The table's run: the stories15M shape (6 heads of 48), 256 queries, seed 1.
    const LadderReport rep = run_attention_ladder(256, 6, 6, 48, 1);
    std::ifstream in(std::string(PLAB_TESTS_DIR) + "/../kernels/README.md");
    const std::string readme((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
    REQUIRE(!readme.empty());
    auto with_commas = [](long long n) {
        std::string s = std::to_string(n);
        for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(std::size_t(i), ",");
        return s;
    };
    for (const LadderRow& r : rep.rows) {
        INFO(r.rung);
        CHECK(readme.find("| " + r.rung + " |") != std::string::npos);
        if (r.rung != "flash") {
            // A rung is one short file (at most 150 lines), its length as the table says.
            const std::string file = "attention_" + r.rung + ".cu";
            std::ifstream cu(std::string(PLAB_TESTS_DIR) + "/../kernels/" + file);
            int lines = 0;
            for (std::string line; std::getline(cu, line);) ++lines;
            CHECK(lines > 10);
            CHECK(lines <= 150);
            CHECK(readme.find("`" + file + "` (" + std::to_string(lines) + ")") !=
                  std::string::npos);
        }
        CHECK(readme.find("| " + with_commas(r.kv_bytes)) != std::string::npos);
    }
}

}  // namespace plab::test
