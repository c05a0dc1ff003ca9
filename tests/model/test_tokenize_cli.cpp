// `plab tokenize` (issue 49): the table and the summary line, the JSON format
// ({"tokens": [{"id", "text", "bytes", "start", "end"}]}), every tokenizer the
// project reads through the command line (byte, the shipped BPE, llama2.c's
// tokenizer.bin, tokenizer.json byte-level and SentencePiece-style, ids), and
// bad input answered with one line and exit 1.
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/model_io.h"
#include "model/tokenizers/tokenizer_bpe.h"
#include "model/tokenizers/tokenizer_hf.h"
#include "model/tokenizers/tokenizer_llama2c.h"
#include "model_test_util.h"
#include "test_util.h"

using namespace plab;
using namespace plab::test;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

std::string tokenize_hf_dir(const std::string& family) {
    return std::string(PLAB_TESTS_DIR) + "/golden/hf_tokenizers/" + family;
}

// `plab tokenize --json ARGS... TEXT`, checked against the format and the
// text: keys in order, bytes as numbers, spans tiling the text. Returns the ids.
std::vector<int32_t> tokenize_json(const std::vector<std::string>& args, const std::string& text) {
    std::vector<std::string> all = {"tokenize", "--json"};
    all.insert(all.end(), args.begin(), args.end());
    all.push_back(text);
    const CliResult r = run_cli(all);
    INFO("plab " << all[2] << "...: " << r.err);
    REQUIRE(r.exit_code == 0);
    const Json j = Json::parse(r.out);
    REQUIRE(j.size() == 1);
    REQUIRE(j.contains("tokens"));
    std::vector<int32_t> ids;
    std::size_t at = 0;
    for (const Json& t : j["tokens"]) {
        std::vector<std::string> keys;
        for (auto it = t.begin(); it != t.end(); ++it) keys.push_back(it.key());
        REQUIRE(keys.size() == 5);
        for (const char* k : {"id", "text", "bytes", "start", "end"}) REQUIRE(t.contains(k));
        REQUIRE(t["text"].is_string());
        REQUIRE(t["bytes"].is_array());
        for (const Json& b : t["bytes"]) REQUIRE((b.is_number_integer() && b >= 0 && b <= 255));
        REQUIRE(t["start"].get<std::size_t>() == at);
        at = t["end"].get<std::size_t>();
        ids.push_back(t["id"].get<int32_t>());
    }
    REQUIRE(at == text.size());
    return ids;
}

// A model folder written by `plab random-model` with these extra flags.
fs::path tokenize_model(const std::string& name, const std::vector<std::string>& flags) {
    const fs::path dir = process_temp_dir("plab_tokenize_cli") / name;
    std::vector<std::string> args = {"random-model", dir.string(), "--dim",      "16",
                                     "--heads",      "2",          "--kv-heads", "1",
                                     "--layers",     "1",          "--hidden",   "24"};
    args.insert(args.end(), flags.begin(), flags.end());
    const CliResult r = run_cli(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return dir;
}

}  // namespace

TEST_CASE("plab tokenize: the table of tokens, their spans and the summary line",
          "[tokenize][cli]") {
    const CliResult r = run_cli({"tokenize", "Once upon a time"});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    REQUIRE(r.out.find("Tokenizer: bpe, vocabulary of 512 tokens\n") == 0);
    REQUIRE(r.out.find(" token      id  span      text             bytes\n") != std::string::npos);
    // ' time' is one token of the shipped BPE: 5 bytes, the last of the text.
    REQUIRE(r.out.find("[11,16)   ' time'          20 74 69 6D 65\n") != std::string::npos);
    REQUIRE(r.out.find("5 tokens (BOS + 4 from the text) for 16 bytes, 16 characters: 4.00 "
                       "bytes a token\n") != std::string::npos);
    // --no-bos: the text's tokens alone; --prompt-file: the same text from a file.
    const CliResult no_bos = run_cli({"tokenize", "--no-bos", "Once upon a time"});
    REQUIRE(no_bos.out.find("\n4 tokens for 16 bytes, 16 characters") != std::string::npos);
    const fs::path file = process_temp_dir("plab_tokenize_cli") / "prompt.txt";
    write_bytes(file, "Once upon a time");
    REQUIRE(run_cli({"tokenize", "--prompt-file", file.string()}).out == r.out);
    // A SentencePiece token whose bytes are not the text it covers says so:
    // the '▁' the normalizer put before "hi" covers no byte of it.
    const CliResult sp = run_cli({"tokenize", "--tokenizer", tokenize_hf_dir("llama2"), "hi"});
    INFO(sp.out);
    REQUIRE(sp.exit_code == 0);
    REQUIRE(sp.out.find("[0,0)     ' '              20  (covers '')\n") != std::string::npos);
}

TEST_CASE("plab tokenize: a Russian word costs a token per byte of the shipped BPE",
          "[tokenize][cli]") {
    // The shipped BPE learned English stories: " time" is one token; " время"
    // (the same word in Russian, 5 letters of 2 bytes) falls back to its bytes.
    const std::vector<int32_t> en = tokenize_json({"--no-bos"}, " time");
    const std::vector<int32_t> ru =
        tokenize_json({"--no-bos"}, " \xd0\xb2\xd1\x80\xd0\xb5\xd0\xbc\xd1\x8f");
    REQUIRE(en.size() == 1);
    REQUIRE(ru.size() == 11);  // the space, then 10 byte tokens
    const CliResult r =
        run_cli({"tokenize", "--no-bos", " \xd0\xb2\xd1\x80\xd0\xb5\xd0\xbc\xd1\x8f"});
    REQUIRE(r.out.find("11 tokens for 11 bytes, 6 characters: 1.00 bytes a token") !=
            std::string::npos);
    REQUIRE(r.out.find("'<0xD0>'") != std::string::npos);
}

TEST_CASE("plab tokenize: every tokenizer the project reads, ids as the tokenizer gives them",
          "[tokenize][cli]") {
    const std::string text = "Blåbærgrød 🦀, they're время 12345!  \xff";
    // byte: every byte a token.
    std::vector<int32_t> ids = tokenize_json({"--tokenizer", "byte", "--no-bos"}, text);
    REQUIRE(ids.size() == text.size());
    // The shipped BPE, as the default model's and named alone.
    const BpeTokenizer bpe = BpeTokenizer::load(shipped_model_dir() + "/tokenizer.bpe");
    REQUIRE(tokenize_json({}, text) == bpe.encode(text, true));
    REQUIRE(tokenize_json({"--tokenizer", "bpe"}, text) == bpe.encode(text, true));
    REQUIRE(tokenize_json({"--model", shipped_model_dir()}, text) == bpe.encode(text, true));
    // tokenizer.json, byte-level and SentencePiece-style: a folder, a file, a model's.
    for (const char* family : {"llama3", "llama2", "metaspace", "qwen2"}) {
        INFO(family);
        const auto tok = HfTokenizer::load_dir(tokenize_hf_dir(family));
        REQUIRE(tokenize_json({"--tokenizer", tokenize_hf_dir(family)}, text) ==
                tok->encode(text, true));
        REQUIRE(tokenize_json({"--tokenizer", tokenize_hf_dir(family) + "/tokenizer.json"}, text) ==
                tok->encode(text, true));
    }
    const fs::path hf = tokenize_model("hf", {"--tokenizer", tokenize_hf_dir("llama2")});
    REQUIRE(tokenize_json({"--model", hf.string()}, text) ==
            HfTokenizer::load_dir(tokenize_hf_dir("llama2"))->encode(text, true));
    // llama2.c's tokenizer.bin: written here, copied into a model, read both ways.
    std::vector<std::string> pieces = {"<unk>", "<s>", "</s>"};
    std::vector<float> scores(3, 0.0f);
    for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        pieces.push_back(buf);
        scores.push_back(0);
    }
    for (const char* p : {" ", "t", "h", "e", "th", " th", " the", "r", "y"}) {
        pieces.push_back(p);
        scores.push_back(float(pieces.size()));
    }
    const Llama2cTokenizer l2c(pieces, scores);
    const fs::path bin = process_temp_dir("plab_tokenize_cli") / "tokenizer.bin";
    l2c.save(bin.string());
    REQUIRE(tokenize_json({"--tokenizer", bin.string()}, text) == l2c.encode(text, true));
    const fs::path l2c_model = tokenize_model("l2c", {"--tokenizer", bin.string()});
    REQUIRE(tokenize_json({"--model", l2c_model.string()}, text) == l2c.encode(text, true));
    ids = tokenize_json({"--model", l2c_model.string(), "--no-bos"}, " the");
    REQUIRE(ids.size() == 2);  // the dummy '▁' (no byte), then " the"
    // A GGUF file's tokenizer (SentencePiece-style "llama" and byte-level "gpt2").
    for (const char* f : {"spm/model-f32.gguf", "bpe/model-q8_0.gguf"}) {
        const std::string path = std::string(PLAB_TESTS_DIR) + "/golden/gguf/" + f;
        REQUIRE(tokenize_json({"--model", path}, text) ==
                load_model(path).tokenizer->encode(text, true));
    }
    // ids: a model without a tokenizer reads token ids.
    const fs::path id_model = tokenize_model("ids", {"--tokenizer", "ids", "--vocab", "300"});
    REQUIRE(tokenize_json({"--model", id_model.string(), "--no-bos"}, " 7, 299 1") ==
            std::vector<int32_t>{7, 299, 1});
}

TEST_CASE("plab tokenize: bad input is one line and exit 1", "[tokenize][cli]") {
    require_one_line_cli_error(run_cli({"tokenize"}), "give the text to tokenize");
    require_one_line_cli_error(run_cli({"tokenize", "--model", "/nonexistent", "x"}),
                               "does not exist");
    require_one_line_cli_error(
        run_cli({"tokenize", "--model", shipped_model_dir(), "--tokenizer", "byte", "x"}),
        "give --model or --tokenizer, not both");
    require_one_line_cli_error(run_cli({"tokenize", "--tokenizer", "nope.txt", "x"}),
                               "--tokenizer nope.txt: no such file or folder; valid: byte, bpe");
    require_one_line_cli_error(run_cli({"tokenize", "--tokenizer", "ids", "x"}),
                               "--tokenizer ids has no vocabulary of its own");
    const fs::path odd = process_temp_dir("plab_tokenize_cli") / "vocab.txt";
    write_bytes(odd, "hello");
    require_one_line_cli_error(run_cli({"tokenize", "--tokenizer", odd.string(), "x"}),
                               "is no tokenizer plab reads");
    require_one_line_cli_error(run_cli({"tokenize", "--prompt-file", "/nonexistent/p.txt"}),
                               "no such file");
    require_one_line_cli_error(run_cli({"tokenize", "--prompt-file", odd.string(), "x"}),
                               "give the text one way");
    const fs::path ids = tokenize_model("ids_bad", {"--tokenizer", "ids", "--vocab", "300"});
    require_one_line_cli_error(run_cli({"tokenize", "--model", ids.string(), "hello"}),
                               "must be token ids 0..299");
}
