// Speculative decoding (runtime/speculative.h): verification is a prefill.
//
// What it shows: with greedy sampling, verifying K guesses in one chunk and
// rolling the rejected ones back gives exactly plain decoding's tokens, for
// every K from 1 to 8, with prompt lookup and with a draft model, on cpu-ref,
// cpu (invariant kernels) and the emulated gpu; a draft equal to the target
// has every guess accepted (its decode rows and the verify chunk's rows are
// the same bits); a roll-back gives the blocks back and leaves the cache as
// if the guesses had never been made. The shipped model is the target (a
// trained model: its guesses are sometimes right).
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "mask_cases.h"
#include "model/model_io.h"
#include "runtime/generate.h"
#include "runtime/mask_grammar.h"
#include "runtime/registry.h"
#include "test_util.h"

using namespace plab;

namespace {

const Model& shipped() {
    static const Model m = load_model(std::string(PLAB_TESTS_DIR) + "/../assets/model");
    return m;
}

GenerateResult run(const DeviceModel& m, int k, const std::string& draft,
                   const DeviceModel* draft_model = nullptr, int max_new = 40) {
    GenerateOptions o;
    o.max_new_tokens = max_new;
    o.stop_at_eos = false;
    o.speculative.k = k;
    if (k > 0) {
        o.speculative.draft = parse_draft_source(draft);
        o.speculative.draft_model = draft_model;
    }
    Trace trace;
    return generate(m, *shipped().tokenizer, kDefaultPrompt, {}, o, trace);
}

// Greedy speculation on one backend: every K, both draft sources (prompt
// lookup with N = 1 and 3; a random draft model and the target itself).
void require_plain_tokens(const char* backend, const std::vector<int>& ks) {
    auto be = make_backend(backend);
    const DeviceModel target(*be, shipped().weights);
    // A draft model: a random one with the target's vocabulary (its
    // guesses mostly rejected) and the target itself (all accepted).
    ModelConfig dc = test::small_config(32, 1, 2, 1, 16, 64, 512, 512);
    auto draft_be = make_backend(backend);
    const DeviceModel random_draft(*draft_be, make_random_weights(dc, 7));
    const GenerateResult plain = run(target, 0, "");
    REQUIRE(plain.new_tokens.size() == 40);
    long long accepted = 0;
    for (int k : ks) {
        for (const char* draft : {"ngram:1", "ngram:3", "random", "self"}) {
            INFO(backend << ", K = " << k << ", draft " << draft);
            const std::string d(draft);
            const DeviceModel* dm = d == "random" ? &random_draft : d == "self" ? &target : nullptr;
            const GenerateResult r = run(target, k, dm ? "model" : d, dm);
            CHECK(r.new_tokens == plain.new_tokens);
            const SpeculativeStats& s = r.speculative;
            CHECK(s.tokens_after_first == 39);
            CHECK(s.verify_steps + s.forwards_saved() == 39);
            CHECK(s.accepted <= s.proposed);
            accepted += s.accepted;
            if (d == "self") {
                // The same model drafts: its rows are the verify chunk's
                // bits, so every guess is accepted and each verify step
                // makes K + 1 tokens (the last ones fewer, at the end).
                CHECK(s.accepted == s.proposed);
                CHECK(s.verify_steps == (39 + k) / (k + 1));
            }
        }
    }
    CHECK(accepted > 0);
}

}  // namespace

TEST_CASE("speculative: greedy verify-and-roll-back gives plain decoding's tokens on cpu-ref",
          "[speculative]") {
    require_plain_tokens("cpu-ref", {1, 2, 3, 4, 5, 6, 7, 8});
}

TEST_CASE("speculative: greedy verify-and-roll-back gives plain decoding's tokens on cpu",
          "[speculative]") {
    require_plain_tokens("cpu", {1, 2, 3, 4, 5, 6, 7, 8});
}

TEST_CASE("speculative: greedy verify-and-roll-back gives plain decoding's tokens on the gpu",
          "[speculative]") {
    // Emulated here, about 2 s a generate: K = 2 and 8 (every K runs on the
    // CPU backends; the gpu's chunk invariance is tested on every plan apart).
    require_plain_tokens("gpu", {2, 8});
}

TEST_CASE("speculative: a roll-back gives the rejected guesses' blocks back, bits as if never made",
          "[speculative]") {
    auto be = make_backend("cpu-ref");
    const DeviceModel m(*be, shipped().weights);
    SessionOptions so;
    so.block_size = 4;
    const std::vector<int32_t> prompt = shipped().tokenizer->encode(kDefaultPrompt, true);
    const int L = static_cast<int>(prompt.size());
    Session spec(m, so), plain(m, so);
    spec.prefill(prompt, parse_chunk_plan("full", L));
    plain.prefill(prompt, parse_chunk_plan("full", L));
    const int blocks_before = spec.cache().blocks().blocks_in_use();
    // Feed a token and 7 guesses (spanning two more blocks), keep the token and 1 guess.
    const std::vector<int32_t> chunk{17, 200, 201, 202, 203, 204, 205, 206};
    const std::vector<float> rows = spec.verify(chunk);
    REQUIRE(rows.size() == chunk.size() * 512);
    REQUIRE(spec.cache().blocks().blocks_in_use() > blocks_before + 1);
    spec.roll_back(L + 2);
    CHECK(spec.length() == L + 2);
    const std::vector<float> row0 = plain.decode_step(17);
    const std::vector<float> row1 = plain.decode_step(200);
    // Row i of the chunk is a decode step's row, bit for bit.
    test::require_bitwise_equal(std::vector<float>(rows.begin(), rows.begin() + 512), row0,
                                "verify row 0");
    test::require_bitwise_equal(std::vector<float>(rows.begin() + 512, rows.begin() + 1024), row1,
                                "verify row 1");
    CHECK(spec.cache().blocks().blocks_in_use() == plain.cache().blocks().blocks_in_use());
    CHECK(spec.sequence().block_table.size() == plain.sequence().block_table.size());
    for (int layer : {0, 3}) {
        test::require_bitwise_equal(spec.read_kv(layer, KvPart::K), plain.read_kv(layer, KvPart::K),
                                    "K kept");
        test::require_bitwise_equal(spec.read_kv(layer, KvPart::V), plain.read_kv(layer, KvPart::V),
                                    "V kept");
    }
    // Decoding on after the roll-back: the next rows as plain decoding's.
    test::require_bitwise_equal(spec.decode_step(9), plain.decode_step(9), "after the roll-back");
}

TEST_CASE("speculative: truncation drops blocks, references and the names of blocks no longer full",
          "[speculative]") {
    BlockManager bm(4, 8);
    Sequence seq;
    bm.reserve(seq, 10);  // blocks 0, 1, 2 (positions 8, 9 in block 2)
    seq.block_hashes = {11, 22};
    bm.retain(seq.block_table[1]);  // another sequence shares block 1
    REQUIRE(bm.blocks_in_use() == 3);
    bm.truncate(seq, 6);  // positions 0..5: block 2 goes, block 1 stays partly full
    CHECK(seq.length == 6);
    CHECK(seq.block_table.size() == 2);
    CHECK(seq.block_hashes == std::vector<std::uint64_t>{11});  // block 1 holds a guess's slot now
    CHECK(bm.blocks_in_use() == 2);
    bm.truncate(seq, 0);
    CHECK(seq.block_table.empty());
    CHECK(bm.blocks_in_use() == 1);  // the shared block keeps its other reference
}

TEST_CASE("speculative: prompt lookup proposes what followed the last n-gram's previous occurrence",
          "[speculative]") {
    NgramDrafter two(2);
    // ... 5 6 7 8 ... 5 6 | next: the tokens after the earlier "5 6".
    CHECK(two.propose({1, 5, 6, 7, 8, 9, 5, 6}, 3).guesses == std::vector<int32_t>{7, 8, 9});
    CHECK(two.propose({1, 5, 6, 7, 5, 6}, 8).guesses == std::vector<int32_t>{7, 5, 6});
    // The most recent occurrence wins.
    CHECK(two.propose({5, 6, 1, 5, 6, 2, 5, 6}, 1).guesses == std::vector<int32_t>{2});
    CHECK(two.propose({1, 2, 3, 4}, 4).guesses.empty());  // no earlier "3 4"
    CHECK(two.propose({3, 4}, 4).guesses.empty());
    CHECK(two.propose({1, 5, 6, 7, 5, 6}, 0).guesses.empty());
    CHECK(parse_draft_source("ngram").ngram == kDefaultNgram);
    CHECK(parse_draft_source("ngram:5").ngram == 5);
    CHECK(parse_draft_source("assets/draft").model == "assets/draft");
    for (const char* bad : {"ngram:", "ngram:0", "ngram:17", "ngram:x", "ngram:-1"})
        test::require_error([&] { parse_draft_source(bad); }, "ngram:N takes N from 1 to 16");
}

TEST_CASE("speculative: plab generate --speculate reports the run beside plain decoding",
          "[speculative][cli]") {
    const test::CliResult r = test::run_cli({"generate", "--speculate", "4", "--draft", "ngram:2",
                                             "-n", "24", "--repeats", "1", "--json"});
    REQUIRE(r.exit_code == 0);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    const nlohmann::json& s = j.at("speculative");
    CHECK(s.at("k") == 4);
    CHECK(s.at("draft") == "ngram:2");
    CHECK(s.at("same_tokens_as_plain") == true);
    CHECK(s.at("plain_tokens") == j.at("new_tokens"));
    const long long proposed = s.at("proposed"), accepted = s.at("accepted");
    const long long steps = s.at("verify_steps");
    CHECK(s.at("target_forwards") == steps);
    CHECK(s.at("plain_target_forwards") == 23);
    CHECK(s.at("forwards_saved") == 23 - steps);
    CHECK(s.at("acceptance_rate").get<double>() ==
          Approx(proposed > 0 ? double(accepted) / proposed : 0.0));
    CHECK(s.at("tokens_per_verify").get<double>() == Approx(23.0 / steps));
    for (const char* key : {"iid_tokens_per_verify", "decode_tokens_per_s",
                            "plain_decode_tokens_per_s", "speed_up", "accepted_per_step"})
        CHECK(s.contains(key));

    const test::CliResult text = test::run_cli(
        {"generate", "--speculate", "2", "--draft", "ngram", "-n", "8", "--repeats", "1"});
    REQUIRE(text.exit_code == 0);
    CHECK(text.out.find("speculative decoding: up to 2 guesses per verify step, draft ngram") !=
          std::string::npos);
    CHECK(text.out.find("greedy: the same tokens as plain decoding: yes") != std::string::npos);
    CHECK(text.out.find("--kernels fastest") == std::string::npos);
    // With the library's kernels a verify chunk's rows may take other kernels
    // than a decode step's: the report says what may change and why.
    const test::CliResult fastest =
        test::run_cli({"generate", "--speculate", "2", "--draft", "ngram", "-n", "8", "--repeats",
                       "1", "--kernels", "fastest"});
    REQUIRE(fastest.exit_code == 0);
    CHECK(fastest.out.find("--kernels fastest: a verify chunk's products have K+1 rows") !=
          std::string::npos);
}

TEST_CASE("speculative: under a sliding window the roll-back keeps the blocks the next query needs",
          "[speculative]") {
    // A verify chunk reaches further than the tokens kept: blocks the window
    // would forget after the chunk are still needed after the roll-back, so
    // they are forgotten only then (Session::verify, Session::roll_back).
    auto be = make_backend("cpu-ref");
    const DeviceModel target(*be, shipped().weights);
    for (const char* spec : {"window:8", "window:5+sink:2"}) {
        INFO(spec);
        GenerateOptions o;
        o.max_new_tokens = 30;
        o.stop_at_eos = false;
        o.session.block_size = 4;
        const std::vector<int32_t> prompt = shipped().tokenizer->encode(kDefaultPrompt, true);
        o.session.mask = make_mask(spec, test::mask_context(prompt, target.config().n_heads));
        Trace t0, t1;
        const GenerateResult plain = generate(target, *shipped().tokenizer, "", prompt, o, t0);
        o.speculative.k = 6;
        o.speculative.draft = parse_draft_source("ngram:1");
        const GenerateResult spec_run = generate(target, *shipped().tokenizer, "", prompt, o, t1);
        CHECK(spec_run.new_tokens == plain.new_tokens);
        CHECK(spec_run.speculative.proposed > spec_run.speculative.accepted);  // rolled back
    }
}

TEST_CASE("speculative: bad --speculate and --draft get one line each", "[speculative][cli]") {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--speculate", "0", "--draft", "ngram"},
         "--speculate 0: guesses per verify step, from 1 to 8"},
        {{"--speculate", "9", "--draft", "ngram"}, "--speculate 9: guesses per verify step"},
        {{"--speculate", "2"}, "--draft needs a source: ngram[:N] or a draft model file"},
        {{"--draft", "ngram"}, "--draft ngram names the guesses of --speculate K; give both"},
        {{"--speculate", "2", "--draft", "ngram:99"}, "ngram:N takes N from 1 to 16"},
        {{"--speculate", "2", "--draft", "ngram", "--no-kv-cache"},
         "--speculate needs the KV cache"},
        {{"--speculate", "2", "--draft", "/nonexistent/draft"}, "/nonexistent/draft"},
        {{"--speculate", "2", "--draft", "ngram", "--prompts", "p.txt", "--hardware", "h100-sxm"},
         "--hardware and --shape draw one prompt's speculative speed-up on the roofline clock"},
    };
    for (const auto& [flags, message] : cases) {
        std::vector<std::string> args{"generate", "-n", "4"};
        args.insert(args.end(), flags.begin(), flags.end());
        INFO(message);
        test::require_one_line_cli_error(test::run_cli(args), message);
    }
    static const test::CliRandomModel byte_model("spec_byte_draft", 3);  // 258 tokens
    test::require_one_line_cli_error(
        test::run_cli({"generate", "-n", "4", "--speculate", "2", "--draft", byte_model.dir}),
        "--draft model has a vocabulary of 258 tokens, the target 512");
}

TEST_CASE(
    "speculative: on the roofline clock a verify costs a decode step until the batch "
    "turns it compute-bound",
    "[speculative][cli]") {
    const test::CliResult r = test::run_cli({"generate", "--speculate", "3", "--draft", "ngram:1",
                                             "-n", "24", "--repeats", "1", "--hardware", "h100-sxm",
                                             "--shape", "llama3-8b", "--json"});
    REQUIRE(r.exit_code == 0);
    const nlohmann::json roof = nlohmann::json::parse(r.out).at("speculative").at("roofline");
    CHECK(roof.at("clock") == "llama3-8b bf16 on h100-sxm, roofline");
    CHECK(roof.at("draft_ratio") == 0.0);
    const double alpha = roof.at("acceptance_rate");
    REQUIRE(alpha > 0);
    const nlohmann::json& points = roof.at("points");
    REQUIRE(points.size() == 5 * 3);  // batches 1, 4, 16, 64, 256 x K 1..3
    for (const nlohmann::json& p : points) {
        const int k = p.at("k");
        const double decode = p.at("decode_us"), verify = p.at("verify_us");
        INFO("batch " << p.at("batch") << ", K " << k);
        CHECK(verify >= decode);                   // K+1 rows never cost less than one
        CHECK(verify <= (k + 1) * decode * 1.01);  // nor more than K+1 steps
        CHECK(p.at("tokens_per_verify").get<double>() ==
              Approx((1 - std::pow(alpha, k + 1)) / (1 - alpha)));
        CHECK(p.at("speed_up").get<double>() ==
              Approx(p.at("tokens_per_verify").get<double>() * decode / verify));
        if (p.at("batch") == 1) {
            CHECK(p.at("verify_bound") == "memory");
            CHECK(p.at("speed_up").get<double>() > 1.0);  // memory-bound: guesses are nearly free
        }
        if (p.at("batch") == 256) CHECK(p.at("verify_bound") == "compute");
    }
    test::require_one_line_cli_error(
        test::run_cli({"generate", "-n", "4", "--hardware", "h100-sxm"}),
        "--hardware and --shape draw speculative decoding's speed-up on the roofline clock");
}

TEST_CASE(
    "speculative: the shipped draft shares the target's tokenizer and is one layer of its width",
    "[speculative]") {
    const Model draft = load_model(std::string(PLAB_TESTS_DIR) + "/../assets/draft");
    const ModelConfig& d = draft.weights.config;
    const ModelConfig& t = shipped().weights.config;
    CHECK(d.n_layers == 1);
    CHECK(t.n_layers == 4);
    CHECK(d.dim == t.dim);
    CHECK(d.vocab_size == t.vocab_size);
    // The same ids for the same text: one tokenizer, learned from the same seed.
    const std::string text = kDefaultPrompt;
    CHECK(draft.tokenizer->encode(text, true) == shipped().tokenizer->encode(text, true));
    auto read = [](const std::string& path) {
        std::ifstream in(path, std::ios::binary);
        return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    const std::string assets = std::string(PLAB_TESTS_DIR) + "/../assets/";
    CHECK(read(assets + "draft/tokenizer.bpe") == read(assets + "model/tokenizer.bpe"));
    CHECK(!read(assets + "draft/tokenizer.bpe").empty());
}
