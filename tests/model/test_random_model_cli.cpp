// `plab random-model` of any shape (issue 49): every flag lands in config.json
// and the model loads and runs; --shape keeps its old defaults and output; the
// vocabulary defaults to the tokenizer's; every inconsistent shape is refused
// with one line naming the flag, before anything is written; and a
// tokenizer.json that config.json does not name is refused, never ignored.
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/model_io.h"
#include "model/shapes.h"
#include "model/tokenizers/tokenizer_hf.h"
#include "model/tokenizers/tokenizer_llama2c.h"
#include "model_test_util.h"
#include "test_util.h"

using namespace plab;
using namespace plab::test;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

fs::path rm_dir(const std::string& name) {
    return process_temp_dir("plab_random_model_cli") / name;
}

std::string rm_hf_dir(const std::string& family) {
    return std::string(PLAB_TESTS_DIR) + "/golden/hf_tokenizers/" + family;
}

// `plab random-model DIR ARGS...`; requires success and returns config.json.
Json rm_write(const std::string& name, const std::vector<std::string>& args,
              std::string* out = nullptr) {
    const fs::path dir = rm_dir(name);
    fs::remove_all(dir);
    std::vector<std::string> all = {"random-model", dir.string()};
    all.insert(all.end(), args.begin(), args.end());
    const CliResult r = run_cli(all);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    if (out != nullptr) *out = r.out;
    return Json::parse(read_bytes(dir / "config.json"));
}

// The refusal's contract: one line naming the flag, exit 1, nothing written.
void rm_refused(const std::vector<std::string>& args, const std::string& fragment) {
    const fs::path dir = rm_dir("refused");
    fs::remove_all(dir);
    std::vector<std::string> all = {"random-model", dir.string()};
    all.insert(all.end(), args.begin(), args.end());
    INFO("plab random-model DIR " << Json(args).dump());
    require_one_line_cli_error(run_cli(all), fragment);
    REQUIRE(!fs::exists(dir));
}

}  // namespace

TEST_CASE("plab random-model: --shape keeps its defaults and its output line",
          "[random_model][cli]") {
    std::string out;
    Json c = rm_write("default", {"--seed", "1"}, &out);
    REQUIRE(out ==
            "wrote a random small model (D=64 L=2 H=4 Hkv=2 Dh=16 F=176 V=258 "
            "max_seq_len=256, seed 1) to " +
                rm_dir("default").string() + "\n");
    REQUIRE(c["plab_tokenizer"] == "byte");
    REQUIRE(c["tie_word_embeddings"] == false);
    REQUIRE(c["rope_theta"] == 10000.0);
    // The same bytes as before the flags existed: the shape and the seed fix them.
    const ModelConfig small = named_shape("small");
    const Weights w = load_model(rm_dir("default").string()).weights;
    REQUIRE(w.config.summary() == small.summary());
    require_bitwise_equal(w.tok_embeddings, make_random_weights(small, 1).tok_embeddings,
                          "embeddings of seed 1");
    // A flag overrides one field of the shape; the rest stay the shape's (stories15m: tied).
    c = rm_write("s15", {"--shape", "stories15m", "--dim", "96", "--layers", "1", "--hidden", "64",
                         "--vocab", "300"});
    REQUIRE(c["num_attention_heads"] == 6);
    REQUIRE(c["head_dim"] == 16);  // D / H when --dim is given
    REQUIRE(c["tie_word_embeddings"] == true);
    REQUIRE(c["max_position_embeddings"] == 2048);
}

TEST_CASE("plab random-model: every flag lands in config.json and the model runs",
          "[random_model][cli]") {
    std::string out;
    const Json c = rm_write("custom", {"--dim",      "40",       "--layers",
                                       "3",          "--heads",  "6",
                                       "--kv-heads", "3",        "--head-dim",
                                       "10",         "--hidden", "72",
                                       "--vocab",    "300",      "--max-seq-len",
                                       "96",         "--tied",   "--rope-theta",
                                       "500000",     "--seed",   "7"},
                            &out);
    REQUIRE(c["hidden_size"] == 40);
    REQUIRE(c["num_hidden_layers"] == 3);
    REQUIRE(c["num_attention_heads"] == 6);
    REQUIRE(c["num_key_value_heads"] == 3);
    REQUIRE(c["head_dim"] == 10);  // H x Dh = 60, not D: Q is wider than the residual stream
    REQUIRE(c["intermediate_size"] == 72);
    REQUIRE(c["vocab_size"] == 300);
    REQUIRE(c["max_position_embeddings"] == 96);
    REQUIRE(c["tie_word_embeddings"] == true);
    REQUIRE(c["rope_theta"] == 500000.0);
    REQUIRE(out.find("(D=40 L=3 H=6 Hkv=3 Dh=10 F=72 V=300 max_seq_len=96, tied classifier, "
                     "rope_theta 500000, seed 7)") != std::string::npos);
    // It loads and prefills; chunked equals whole on cpu-ref.
    const CliResult r = run_cli({"prefill", "--model", rm_dir("custom").string(), "--backend",
                                 "cpu-ref", "--chunks", "3", "--json", "hello there"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    REQUIRE(Json::parse(r.out)["equivalence"]["logits_bitwise"] == true);
    // --untied undoes a shape's tied classifier; another seed, other weights.
    REQUIRE(rm_write("untied", {"--shape", "stories15m", "--dim", "48", "--layers", "1", "--hidden",
                                "32", "--vocab", "258", "--untied"})["tie_word_embeddings"] ==
            false);
    rm_write("seed8", {"--seed", "8"});
    rm_write("seed1", {"--seed", "1"});
    REQUIRE(read_bytes(rm_dir("seed8") / "model.safetensors") !=
            read_bytes(rm_dir("seed1") / "model.safetensors"));
}

TEST_CASE("plab random-model --tokenizer: copied into the folder, named, and sizing the vocabulary",
          "[random_model][cli]") {
    // bpe: the shipped tokenizer.bpe, vocab 512 by default.
    Json c = rm_write("bpe", {"--tokenizer", "bpe"});
    REQUIRE(c["plab_tokenizer"] == "tokenizer.bpe");
    REQUIRE(c["vocab_size"] == 512);
    REQUIRE(read_bytes(rm_dir("bpe") / "tokenizer.bpe") ==
            read_bytes(shipped_model_dir() + "/tokenizer.bpe"));
    // --vocab larger than the tokenizer's is kept (rows no prompt uses).
    REQUIRE(rm_write("bpe_big", {"--tokenizer", "bpe", "--vocab", "600"})["vocab_size"] == 600);
    // A *.bpe path, as a file.
    REQUIRE(rm_write("bpe_path",
                     {"--tokenizer", shipped_model_dir() + "/tokenizer.bpe"})["plab_tokenizer"] ==
            "tokenizer.bpe");
    // tokenizer.json: a file or its folder; tokenizer_config.json comes along.
    for (const std::string& spec : {rm_hf_dir("llama3"), rm_hf_dir("llama2") + "/tokenizer.json"}) {
        INFO(spec);
        c = rm_write("hf", {"--tokenizer", spec});
        REQUIRE(c["plab_tokenizer"] == "tokenizer.json");
        const std::string src =
            fs::is_directory(spec) ? spec : fs::path(spec).parent_path().string();
        REQUIRE(read_bytes(rm_dir("hf") / "tokenizer.json") == read_bytes(src + "/tokenizer.json"));
        REQUIRE(read_bytes(rm_dir("hf") / "tokenizer_config.json") ==
                read_bytes(src + "/tokenizer_config.json"));
        const Model m = load_model(rm_dir("hf").string());
        REQUIRE(c["vocab_size"] == HfTokenizer::load_dir(src)->vocab_size());
        REQUIRE(m.tokenizer->kind().find("tokenizer.json") == 0);
        REQUIRE(m.tokenizer->encode("hi there", true) ==
                HfTokenizer::load_dir(src)->encode("hi there", true));
    }
    // A llama2.c tokenizer.bin: the vocabulary is exactly its token count.
    std::vector<std::string> pieces = {"<unk>", "<s>", "</s>"};
    for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        pieces.push_back(buf);
    }
    for (const char* p : {" ", "a", " a"}) pieces.push_back(p);
    const fs::path bin = rm_dir("tokenizer.bin");
    Llama2cTokenizer(pieces, std::vector<float>(pieces.size(), 1.0f)).save(bin.string());
    c = rm_write("l2c", {"--tokenizer", bin.string()});
    REQUIRE(c["plab_tokenizer"] == "tokenizer.bin");
    REQUIRE(c["vocab_size"] == int(pieces.size()));
    REQUIRE(load_model(rm_dir("l2c").string()).tokenizer->kind() == "llama2.c");
    // ids: prompts are token ids, any vocabulary.
    c = rm_write("ids", {"--tokenizer", "ids", "--vocab", "50"});
    REQUIRE(c["plab_tokenizer"] == "ids");
    REQUIRE(load_model(rm_dir("ids").string()).tokenizer->encode("3 49", false) ==
            std::vector<int32_t>{3, 49});
    // byte, said explicitly: its 258 tokens.
    REQUIRE(rm_write("byte", {"--tokenizer", "byte"})["vocab_size"] == 258);
}

TEST_CASE("plab random-model: inconsistent shapes are refused with one line naming the flag",
          "[random_model][cli]") {
    rm_refused({"--heads", "6", "--kv-heads", "4"},
               "--heads 6 is not a multiple of --kv-heads 4 (grouped-query attention");
    rm_refused({"--heads", "6", "--kv-heads", "4"}, "--kv-heads may be 1, 2, 3, 6");
    rm_refused({"--kv-heads", "8"}, "--kv-heads 8 is more than --heads 4 (the small shape's)");
    rm_refused({"--heads", "5"}, "--heads 5 is not a multiple of --kv-heads 2 (the small shape's)");
    rm_refused({"--head-dim", "7"}, "--head-dim 7 is odd; RoPE rotates pairs of dims");
    rm_refused({"--dim", "100", "--heads", "3", "--kv-heads", "1"},
               "--dim 100 is not divisible by --heads 3, so there is no head dim D/H; give "
               "--head-dim (even), or a --dim that is a multiple of 3, e.g. 99 or 102");
    rm_refused({"--dim", "60"},
               "--dim 60 / --heads 4 (the small shape's) gives head dim 15, "
               "which is odd (RoPE rotates pairs of dims); give --head-dim 16, "
               "or a --dim that is a multiple of 8, e.g. 56 or 64");
    rm_refused({"--dim", "65536"}, "gives head dim 16384, above the 1024 allowed");
    rm_refused({"--vocab", "100"},
               "--vocab 100 is smaller than the byte tokenizer's 258 tokens (a prompt would name "
               "rows the embedding does not have); give --vocab 258 or more, or --tokenizer ids");
    rm_refused({"--tokenizer", "bpe", "--vocab", "300"},
               "--vocab 300 is smaller than the bpe tokenizer's 512 tokens");
    rm_refused({"--tokenizer", rm_hf_dir("llama3"), "--vocab", "300"},
               "--vocab 300 is smaller than the tokenizer.json (byte-level BPE) tokenizer's 344");
    for (const char* flag : {"--dim", "--layers", "--heads", "--kv-heads", "--hidden", "--vocab",
                             "--head-dim", "--max-seq-len"}) {
        rm_refused({flag, "0"}, std::string(flag) + " 0 is out of range;");
        rm_refused({std::string(flag) + "=-3"}, std::string(flag) + " -3 is out of range;");
    }
    rm_refused({"--layers", "5000"},
               "--layers 5000 is out of range; the layer count L must be 1..1024");
    rm_refused({"--max-seq-len", "2000000"}, "max_seq_len must be 1..1048576");
    rm_refused({"--rope-theta", "1"}, "--rope-theta 1 must be a finite number above 1");
    rm_refused({"--rope-theta", "inf"}, "--rope-theta inf must be a finite number above 1");
    rm_refused({"--tied", "--untied"}, "--tied and --untied contradict each other");
    rm_refused({"--dim", "8192", "--layers", "64", "--heads", "64", "--hidden", "20000"},
               "parameters (161.284 GB as float32); plab random-model writes at most 1073741824");
    rm_refused({"--shape", "huge"}, "unknown model shape 'huge'; valid shapes: small");
    rm_refused({"--tokenizer", "/nonexistent/tokenizer.json"},
               "no such file or folder; valid: byte, bpe, ids, or the path of a tokenizer.json");
    rm_refused({"--tokenizer", PLAB_TESTS_DIR}, "is a folder without a tokenizer.json");
    rm_refused({"--dim", "abc"}, "random-model: --dim expects a value of type INT, got 'abc'");
    // A tokenizer.bin fixes the vocabulary exactly.
    std::vector<std::string> pieces = {"<unk>", "<s>", "</s>"};
    for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        pieces.push_back(buf);
    }
    const fs::path bin = rm_dir("exact.bin");
    Llama2cTokenizer(pieces, std::vector<float>(pieces.size(), 0.0f)).save(bin.string());
    rm_refused({"--tokenizer", bin.string(), "--vocab", "400"},
               "--vocab 400 differs from " + bin.string() + "'s 259 tokens");
    // A folder that is a file.
    const fs::path file = rm_dir("a_file");
    write_bytes(file, "x");
    require_one_line_cli_error(run_cli({"random-model", file.string()}),
                               "is a file; give a folder for the model");
}

TEST_CASE("a tokenizer.json that config.json does not name is refused, never ignored",
          "[random_model][cli]") {
    // A byte model with a tokenizer.json copied in: every command that loads it
    // says which key to set or which file to remove (issue 49).
    rm_write("stray", {"--seed", "3"});
    const fs::path dir = rm_dir("stray");
    fs::copy_file(rm_hf_dir("gpt2") + "/tokenizer.json", dir / "tokenizer.json");
    const std::string msg = dir.string() +
                            " has tokenizer.json but config.json says \"plab_tokenizer\": "
                            "\"byte\"; set plab_tokenizer to \"tokenizer.json\" to use it";
    require_one_line_cli_error(run_cli({"prefill", "--model", dir.string(), "hi"}), msg);
    require_one_line_cli_error(run_cli({"info", "--model", dir.string()}), msg);
    require_one_line_cli_error(run_cli({"tokenize", "--model", dir.string(), "hi"}), msg);
    require_error([&] { load_model(dir.string()); }, "or remove the file");
    // random-model refuses to write such a folder, and takes the file when named.
    require_one_line_cli_error(run_cli({"random-model", dir.string()}),
                               "already has a tokenizer.json, which this model (plab_tokenizer "
                               "byte) would not use; remove it, or pass --tokenizer");
    const CliResult in_place =
        run_cli({"random-model", dir.string(), "--tokenizer", (dir / "tokenizer.json").string()});
    INFO(in_place.err);
    REQUIRE(in_place.exit_code == 0);
    REQUIRE(load_model(dir.string()).tokenizer->kind() == "tokenizer.json (byte-level BPE)");
    // Following the advice works: plab_tokenizer set to tokenizer.json.
    rm_write("advice", {"--seed", "3", "--vocab", "400"});
    const fs::path advice = rm_dir("advice");
    fs::copy_file(rm_hf_dir("gpt2") + "/tokenizer.json", advice / "tokenizer.json");
    Json c = Json::parse(read_bytes(advice / "config.json"));
    c["plab_tokenizer"] = "tokenizer.json";
    write_bytes(advice / "config.json", c.dump(2));
    REQUIRE(run_cli({"prefill", "--model", advice.string(), "hi"}).exit_code == 0);
    // A stale tokenizer_config.json would be read with a new tokenizer.json: refused.
    write_bytes(advice / "tokenizer_config.json", "{}");
    fs::remove(advice / "tokenizer.json");
    const fs::path lone = rm_dir("lone");  // a tokenizer.json with no tokenizer_config.json
    fs::create_directories(lone);
    fs::copy_file(rm_hf_dir("gpt2") + "/tokenizer.json", lone / "tokenizer.json",
                  fs::copy_options::overwrite_existing);
    require_one_line_cli_error(
        run_cli({"random-model", advice.string(), "--tokenizer", lone.string()}),
        "has a tokenizer_config.json that would be read with the new tokenizer.json");
}
