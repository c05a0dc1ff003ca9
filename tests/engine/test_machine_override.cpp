// Another machine, seen on this one (core/machine_override.h): PLAB_CPU_CACHES
// and PLAB_CPU_THREADS change how the fast kernels' library products block and
// split, which is how `--kernels fastest` follows the CPU; the invariant
// kernels and the reference do not follow them. A malformed value gets one line.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.h"

using namespace plab::test;

namespace {

// The logits digest of one request decoded on `backend`, under `env`.
std::string digest(const std::string& env, const std::string& backend, const std::string& kernels) {
    const std::filesystem::path prompts = process_temp_dir("machine_override") / "p.txt";
    write_bytes(prompts, "Once upon a time there was a little girl named Lily who liked\n");
    std::vector<std::string> args = {
        "generate", "--prompts", prompts.string(), "--backend",       backend,
        "-n",       "12",        "--no-stop",      "--logits-digest", "--json"};
    if (!kernels.empty()) args.insert(args.end(), {"--kernels", kernels});
    const CliResult r = run_cli_env(env, args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out)["requests"][0]["logits_sha256"];
}

}  // namespace

TEST_CASE("plab info reports the caches and CPU count the fast kernels plan with",
          "[machine][cli]") {
    const CliResult r =
        run_cli_env("PLAB_CPU_CACHES=16K,512K,8M PLAB_CPU_THREADS=3", {"info", "--json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["cpu_threads"] == 3);
    CHECK(j["cpu_caches"]["l1_bytes"] == 16 * 1024);
    CHECK(j["cpu_caches"]["l2_bytes"] == 512 * 1024);
    CHECK(j["cpu_caches"]["l3_bytes"] == 8 * 1024 * 1024);
    CHECK(j["cpu_caches"]["from"] == "PLAB_CPU_CACHES");
    // Unset (or empty): what this machine has, whatever its numbers.
    const auto own = nlohmann::json::parse(run_cli_env("PLAB_CPU_CACHES=", {"info", "--json"}).out);
    CHECK(own["cpu_caches"]["from"] == "detected");
    CHECK(own["cpu_caches"]["l1_bytes"].get<long long>() > 0);
}

TEST_CASE("a malformed PLAB_CPU_CACHES or PLAB_CPU_THREADS is refused with one line",
          "[machine][cli]") {
    for (const std::string bad : {"abc", "32K,1M", "32K,1M,8M,9M", "1M,32K,8M", "0,1M,8M",
                                  "32K,,8M", "32Q,1M,8M", "512,1M,8M", "8192M,8192M,8192M"}) {
        INFO("PLAB_CPU_CACHES=" << bad);
        require_one_line_cli_error(run_cli_env("PLAB_CPU_CACHES=" + bad, {"info"}),
                                   "PLAB_CPU_CACHES='" + bad +
                                       "' is not valid: PLAB_CPU_CACHES "
                                       "takes three sizes L1,L2,L3");
    }
    for (const std::string bad : {"0", "x", "2.5", "257", "-1"}) {
        INFO("PLAB_CPU_THREADS=" << bad);
        require_one_line_cli_error(run_cli_env("PLAB_CPU_THREADS=" + bad, {"info"}),
                                   "PLAB_CPU_THREADS='" + bad + "' is not valid");
    }
}

TEST_CASE(
    "the fastest kernels' bits follow the caches, the invariant kernels' and the "
    "reference's do not",
    "[machine][cli]") {
    // A small-cache CPU, where Eigen splits a product's k loop into short blocks (another
    // order of the adds), against a large-cache one; then one CPU against three (another
    // column slicing of each product). Each knob alone changes the fastest kernels' bits.
    const std::string small = "PLAB_CPU_CACHES=1K,4K,16K PLAB_CPU_THREADS=2";
    const std::string large = "PLAB_CPU_CACHES=1M,16M,64M PLAB_CPU_THREADS=2";
    const std::string one = "PLAB_CPU_CACHES=1M,16M,64M PLAB_CPU_THREADS=1";
    const std::string three = "PLAB_CPU_CACHES=1M,16M,64M PLAB_CPU_THREADS=3";
    CHECK(digest(small, "cpu", "fastest") != digest(large, "cpu", "fastest"));
    CHECK(digest(one, "cpu", "fastest") != digest(three, "cpu", "fastest"));
    for (const std::string& env : {small, one, three}) {
        INFO(env);
        CHECK(digest(env, "cpu", "invariant") == digest(large, "cpu", "invariant"));
        CHECK(digest(env, "cpu-ref", "") == digest(large, "cpu-ref", ""));
    }
}
