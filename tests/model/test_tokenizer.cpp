// Tokenizers: the shipped BPE round-trips any bytes and matches the Python
// trainer id for id; llama2.c tokenizer.bin files load, encode and decode;
// malformed tokenizer files are rejected with a one-line reason.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "core/error.h"
#include "model/llama2c.h"
#include "model/tokenizers/tokenizer_bpe.h"
#include "model/tokenizers/tokenizer_hf_unicode.h"
#include "model_test_util.h"
#include "test_util.h"

using namespace plab;
using namespace plab::test;

namespace {

BpeTokenizer shipped_bpe() {
    return BpeTokenizer::load(shipped_model_dir() + "/tokenizer.bpe");
}

// A random valid UTF-8 string: code points from all four encoded lengths.
std::string random_utf8(std::mt19937_64& rng, int n_chars) {
    std::string s;
    std::uniform_int_distribution<int> kind(0, 9);
    for (int i = 0; i < n_chars; ++i) {
        std::uint32_t cp;
        switch (kind(rng)) {
            case 0:
                cp = std::uniform_int_distribution<std::uint32_t>(0x80, 0x7FF)(rng);
                break;
            case 1:
                cp = std::uniform_int_distribution<std::uint32_t>(0x800, 0xD7FF)(rng);
                break;
            case 2:
                cp = std::uniform_int_distribution<std::uint32_t>(0x10000, 0x10FFFF)(rng);
                break;
            case 3:
                cp = " \n\t.,!?"[std::uniform_int_distribution<int>(0, 6)(rng)];
                break;
            default:
                cp = std::uniform_int_distribution<std::uint32_t>(0x01, 0x7F)(rng);
                break;
        }
        s += hf::utf8_encode(char32_t(cp));  // model/tokenizers/tokenizer_hf_unicode.h
    }
    return s;
}

}  // namespace

TEST_CASE("bpe: shipped tokenizer round-trips random UTF-8 and random bytes",
          "[model][tokenizer]") {
    const BpeTokenizer tok = shipped_bpe();
    REQUIRE(tok.vocab_size() == 512);
    std::mt19937_64 rng(2024);
    for (int trial = 0; trial < 300; ++trial) {
        const std::string s = random_utf8(rng, trial % 40);
        const auto ids = tok.encode(s, trial % 2 == 0);
        REQUIRE(tok.decode(ids) == s);
    }
    for (int trial = 0; trial < 300; ++trial) {  // arbitrary bytes, invalid UTF-8 included
        std::string s(std::size_t(trial % 50), '\0');
        for (auto& c : s) c = char(std::uniform_int_distribution<int>(0, 255)(rng));
        REQUIRE(tok.decode(tok.encode(s, false)) == s);
    }
}

TEST_CASE("bpe: shipped tokenizer round-trips the held-out corpus and compresses it",
          "[model][tokenizer]") {
    const BpeTokenizer tok = shipped_bpe();
    std::ifstream f(shipped_model_dir() + "/eval/heldout.txt");
    REQUIRE(f.good());
    std::string line;
    std::size_t bytes = 0, ids = 0, lines = 0;
    while (std::getline(f, line)) {
        const auto enc = tok.encode(line, false);
        REQUIRE(tok.decode(enc) == line);
        bytes += line.size();
        ids += enc.size();
        ++lines;
    }
    REQUIRE(lines >= 100);
    // Merges must earn their keep: the synthetic stories compress to < 1 token per 2 bytes.
    REQUIRE(double(ids) < 0.5 * double(bytes));
}

TEST_CASE("bpe: C++ encoding equals the Python trainer's ids", "[model][tokenizer]") {
    const BpeTokenizer tok = shipped_bpe();
    const auto j = nlohmann::json::parse(read_bytes(repo_path("tests/golden/tokenizer_bpe.json")));
    REQUIRE(j.at("magic") == "PLABTOKGOLD");
    REQUIRE(j.at("version") == 1);
    REQUIRE(j.at("cases").size() >= 5);
    for (const auto& c : j.at("cases")) {
        const std::string text = c.at("text").get<std::string>();
        INFO("text: " << text);
        REQUIRE(tok.encode(text, false) == c.at("ids").get<std::vector<int32_t>>());
    }
}

TEST_CASE("bpe: save then load gives the same merges", "[model][tokenizer]") {
    const BpeTokenizer tok = shipped_bpe();
    const std::string path = "/tmp/plab_test_tok.bpe";
    tok.save(path);
    REQUIRE(BpeTokenizer::load(path).merges() == tok.merges());
}

TEST_CASE("bpe: malformed tokenizer files are rejected clearly", "[model][tokenizer][errors]") {
    const std::string good = read_bytes(shipped_model_dir() + "/tokenizer.bpe");
    require_error([] { BpeTokenizer::parse("plab-bpe 2\n", "t"); }, "expected 'plab-bpe 1'");
    require_error([] { BpeTokenizer::parse("GPT2 merges\n", "t"); }, "expected 'plab-bpe 1'");
    const std::string half = good.substr(0, good.rfind('\n', good.size() / 2) + 1);  // whole lines
    require_error([&] { BpeTokenizer::parse(half, "t"); }, "truncated");
    require_error(
        [] {
            BpeTokenizer::parse("plab-bpe 1\nvocab_size 300\nbos 256\neos 257\nmerges 1\n1 2\n",
                                "t");
        },
        "must equal 258 + merges");
    require_error(
        [] {
            BpeTokenizer::parse("plab-bpe 1\nvocab_size 259\nbos 256\neos 257\nmerges 1\n1 999\n",
                                "t");
        },
        "earlier tokens");
    require_error(
        [] {
            BpeTokenizer::parse("plab-bpe 1\nvocab_size 259\nbos 1\neos 2\nmerges 1\n1 2\n", "t");
        },
        "expected 256/257");
    require_error([] { BpeTokenizer::load("/nonexistent/tokenizer.bpe"); }, "cannot read");
}

TEST_CASE("llama2.c tokenizer: save/load, byte fallback, merges by score",
          "[model][tokenizer][llama2c]") {
    // A tiny vocabulary in llama2.c's layout: <unk> <s> </s>, 256 byte tokens, then pieces.
    std::vector<std::string> pieces;
    std::vector<float> scores;
    llama2c_base_vocab(pieces, scores);
    for (const char* p :
         {" ", "a", "b", "c", "h", "t", "e", " t", "th", " th", "he", " the", "é"}) {
        pieces.push_back(p);
        scores.push_back(float(pieces.size()));  // later pieces merge first
    }
    const Llama2cTokenizer tok(pieces, scores);
    const std::string path = "/tmp/plab_test_tokenizer.bin";
    tok.save(path);
    const Llama2cTokenizer back = Llama2cTokenizer::load(path, int(pieces.size()));
    for (const std::string s : {"the", "the cab", "é!", "tea\xff"}) {
        const auto ids = back.encode(s, true);
        REQUIRE(ids.front() == Llama2cTokenizer::kBos);
        REQUIRE(back.decode(ids) == s);
        REQUIRE(ids == tok.encode(s, true));
    }
    const auto the = back.encode("the", false);
    REQUIRE(the.size() == 1);  // " the" after the dummy-prefix space, merged by score
    REQUIRE(back.token_text(the[0]) == " the");
    // Vocabulary size mismatches are caught both ways.
    require_error([&] { Llama2cTokenizer::load(path, int(pieces.size()) + 5); }, "do not match");
    require_error([&] { Llama2cTokenizer::load(path, int(pieces.size()) - 5); }, "do not match");
    const std::string data = read_bytes(path);
    std::ofstream(path, std::ios::binary) << data.substr(0, data.size() - 3);
    require_error([&] { Llama2cTokenizer::load(path, int(pieces.size())); }, "ends after");
}
