// Same request, same bits, checkable by anyone (issue 48): SHA-256 against
// FIPS 180-4's test vectors, and `plab generate --prompts --logits-digest`
// giving one request the same digest alone, beside other requests with
// another token budget, and warm from the prefix cache — on every backend.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/sha256.h"
#include "runtime/registry.h"
#include "test_util.h"

namespace plab::test {

TEST_CASE("SHA-256 gives FIPS 180-4's digests", "[digest]") {
    CHECK(sha256_hex("", 0) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_hex("abc", 3) ==
          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    CHECK(sha256_hex(two_blocks.data(), two_blocks.size()) ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    // A million 'a's, fed in uneven pieces: the buffering across blocks.
    Sha256 h;
    const std::string piece(999, 'a');
    for (int i = 0; i < 1001; ++i) h.update(piece.data(), piece.size());
    h.update(piece.data(), 1000000 - 999 * 1001);
    CHECK(h.hex() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("a request's logits digest does not depend on batch-mates, token budget or a cache hit",
          "[digest][cli]") {
    const CliRandomModel model("plab_digest_model", 6);
    const auto dir = process_temp_dir("plab_digest");
    const std::string a = "Once upon a time, a small model read a prompt.";
    std::ofstream(dir / "alone.txt") << a << "\n";
    std::ofstream(dir / "mixed.txt")
        << a << "\nSomething else entirely, longer than the first one.\n"
        << a << "\nA third.\n";
    for (const std::string& backend : backend_names()) {
        INFO("backend " << backend);
        auto run = [&](const std::string& file, const std::string& budget) {
            std::vector<std::string> args = {"generate",
                                             "--model",
                                             model.dir,
                                             "--backend",
                                             backend,
                                             "--prompts",
                                             (dir / file).string(),
                                             "-n",
                                             "6",
                                             "--no-stop",
                                             "--logits-digest",
                                             "--json"};
            if (!budget.empty()) args.insert(args.end(), {"--token-budget", budget});
            const CliResult r = run_cli(args);
            REQUIRE(r.exit_code == 0);
            return nlohmann::json::parse(r.out)["requests"];
        };
        const auto alone = run("alone.txt", "");
        const auto mixed = run("mixed.txt", "5");
        const std::string digest = alone[0]["logits_sha256"];
        CHECK(digest.size() == 64);
        CHECK(mixed[0]["logits_sha256"] == digest);  // with batch-mates, chunks of <= 5
        CHECK(mixed[2]["cached_tokens"].get<int>() > 0);
        CHECK(mixed[2]["logits_sha256"] == digest);  // warm from the prefix cache
        CHECK(mixed[1]["logits_sha256"] != digest);  // another request, other logits
        CHECK(mixed[0]["new_tokens"] == alone[0]["new_tokens"]);
    }
    require_one_line_cli_error(run_cli({"generate", "--model", model.dir, "--logits-digest", "x"}),
                               "--logits-digest and --token-budget are for requests served "
                               "together");
    require_one_line_cli_error(run_cli({"generate", "--model", model.dir, "--prompts",
                                        (dir / "alone.txt").string(), "--token-budget", "0"}),
                               "--token-budget 0 must be at least 1");
}

}  // namespace plab::test
