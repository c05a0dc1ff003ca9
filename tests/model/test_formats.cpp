// File formats: llama2.c .bin (legacy and v1, shared or separate classifier)
// and safetensors round trips give bitwise identical logits; the RoPE row
// permutation is a true inverse pair; malformed files (wrong magic, truncated,
// shape/vocab mismatch, headers that lie about sizes) are rejected with one
// clear line.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "core/error.h"
#include "model/llama2c.h"
#include "model/model_io.h"
#include "model/rope_permute.h"
#include "model/safetensors.h"
#include "model_test_util.h"
#include "test_util.h"

using namespace plab;
using namespace plab::test;
namespace fs = std::filesystem;

namespace {

// One scratch directory per test process, removed at exit: ctest -j (and other
// checkouts on the same machine) run these cases at once, and a file another
// process is rewriting would fail a case with the wrong error message.
std::string tmp_path(const std::string& name) {
    return (test::process_temp_dir("plab_test_formats") / name).string();
}

ModelConfig l2c_config(bool tied) {
    // llama2.c can express: head_dim = D/H, theta 1e4, eps 1e-5. GQA 6 -> 2 heads.
    ModelConfig c = small_config(48, 2, 6, 2, 8, 96, 300, 64);
    c.tied_embeddings = tied;
    return c;
}

void require_same_weights(const Weights& a, const Weights& b) {
    require_bitwise_equal(a.tok_embeddings, b.tok_embeddings, "tok_embeddings");
    require_bitwise_equal(a.final_norm, b.final_norm, "final_norm");
    require_bitwise_equal(a.classifier, b.classifier, "classifier");
    REQUIRE(a.layers.size() == b.layers.size());
    for (std::size_t l = 0; l < a.layers.size(); ++l) {
        require_bitwise_equal(a.layers[l].wq, b.layers[l].wq, "wq");
        require_bitwise_equal(a.layers[l].wk, b.layers[l].wk, "wk");
        require_bitwise_equal(a.layers[l].wv, b.layers[l].wv, "wv");
        require_bitwise_equal(a.layers[l].wo, b.layers[l].wo, "wo");
        require_bitwise_equal(a.layers[l].w_gate, b.layers[l].w_gate, "w_gate");
        require_bitwise_equal(a.layers[l].w_up, b.layers[l].w_up, "w_up");
        require_bitwise_equal(a.layers[l].w_down, b.layers[l].w_down, "w_down");
        require_bitwise_equal(a.layers[l].attn_norm, b.layers[l].attn_norm, "attn_norm");
        require_bitwise_equal(a.layers[l].ffn_norm, b.layers[l].ffn_norm, "ffn_norm");
    }
}

}  // namespace

TEST_CASE("rope permutation: half-split <-> interleaved are inverses and move rows as documented",
          "[model][llama2c]") {
    const int H = 3, Dh = 6, D = 5;
    const std::vector<float> w = random_floats(std::size_t(H) * Dh * D, 3);
    const auto il = rope_rows_half_to_interleaved(w, H, Dh, D);
    require_bitwise_equal(rope_rows_interleaved_to_half(il, H, Dh, D), w, "round trip");
    // Head 1, pair i = 2: half-split rows 1*6+2 and 1*6+5 become interleaved rows 1*6+4, 1*6+5.
    for (int k = 0; k < D; ++k) {
        REQUIRE(il[(6 + 4) * D + k] == w[(6 + 2) * D + k]);
        REQUIRE(il[(6 + 5) * D + k] == w[(6 + 5) * D + k]);
    }
}

TEST_CASE("llama2.c: export -> import gives bitwise identical weights and logits",
          "[model][llama2c]") {
    const std::vector<int32_t> tokens = random_tokens(19, 300, 5);
    for (int version : {0, 1}) {
        for (bool tied : {true, false}) {
            INFO("version " << version << ", " << (tied ? "shared" : "separate") << " classifier");
            const Weights w = make_random_weights(l2c_config(tied), 100 + version * 2 + tied);
            const std::string path =
                tmp_path("rt_v" + std::to_string(version) + (tied ? "s" : "u") + ".bin");
            write_llama2c_checkpoint(w, path, version);
            REQUIRE(looks_like_llama2c(path));
            Llama2cInfo info;
            const Weights back = read_llama2c_checkpoint(path, &info);
            REQUIRE(info.version == version);
            REQUIRE(info.shared_classifier == tied);
            REQUIRE(back.config.tied_embeddings == tied);
            require_same_weights(back, w);
            const auto before = all_logits(w, "cpu-ref", tokens);
            require_not_all_zero(before, "logits");
            require_bitwise_equal(all_logits(back, "cpu-ref", tokens), before,
                                  "logits after a llama2.c round trip");
        }
    }
}

TEST_CASE("llama2.c: the writer refuses configs the format cannot express",
          "[model][llama2c][errors]") {
    ModelConfig c = l2c_config(true);
    c.rope_theta = 500000.0;
    require_error(
        [&] { write_llama2c_checkpoint(make_random_weights(c, 1), tmp_path("x.bin"), 1); },
        "rope_theta");
    c = small_config(40, 1, 3, 1, 10, 64, 260, 32);  // head_dim 10 != 40 / 3
    require_error(
        [&] { write_llama2c_checkpoint(make_random_weights(c, 1), tmp_path("x.bin"), 1); },
        "head_dim = dim / n_heads");
    require_error(
        [&] {
            write_llama2c_checkpoint(make_random_weights(l2c_config(true), 1), tmp_path("x.bin"),
                                     2);
        },
        "use 0 (legacy) or 1");
}

TEST_CASE("safetensors: save -> load gives bitwise identical weights and logits",
          "[model][safetensors]") {
    const std::vector<int32_t> tokens = random_tokens(23, 258, 9);
    for (bool tied : {true, false}) {
        ModelConfig c = small_config(30, 2, 3, 1, 10, 70, 258, 64);  // GQA, head_dim 10
        c.rope_theta = 500000.0;
        c.tied_embeddings = tied;
        const Weights w = make_random_weights(c, 40 + tied);
        const std::string dir = tmp_path(tied ? "st_tied" : "st_sep");
        save_model(w, "byte", dir);
        const Model back = load_model(dir);
        REQUIRE(back.weights.config.rope_theta == c.rope_theta);
        REQUIRE(back.weights.config.head_dim == 10);
        require_same_weights(back.weights, w);
        const auto before = all_logits(w, "cpu-ref", tokens);
        require_not_all_zero(before, "logits");
        require_bitwise_equal(all_logits(back.weights, "cpu-ref", tokens), before,
                              "logits after a safetensors round trip");
    }
}

TEST_CASE("the shipped model survives safetensors -> llama2.c v0/v1 -> safetensors",
          "[model][llama2c][shipped]") {
    const Model m = load_model(shipped_model_dir());
    REQUIRE(m.tokenizer->kind() == "bpe");
    const std::vector<int32_t> tokens =
        m.tokenizer->encode("Once upon a time, Mia and Leo went to the lake.", true);
    const auto before = all_logits(m.weights, "cpu-ref", tokens);
    for (int version : {0, 1}) {
        const std::string bin = tmp_path("shipped_v" + std::to_string(version) + ".bin");
        write_llama2c_checkpoint(m.weights, bin, version);
        const Weights mid = read_llama2c_checkpoint(bin);
        const std::string dir = tmp_path("shipped_back_v" + std::to_string(version));
        save_model(mid, "byte", dir);
        const Model back = load_model(dir);
        require_bitwise_equal(all_logits(back.weights, "cpu-ref", tokens), before,
                              "shipped model logits after safetensors -> llama2.c -> safetensors");
    }
}

TEST_CASE("plab convert: both directions through the CLI keep the logits and the tokenizer",
          "[model][llama2c][cli]") {
    const std::string bin = tmp_path("cli_model.bin");
    const std::string dir = tmp_path("cli_back");
    auto r = run_cli({"convert", shipped_model_dir(), bin, "--to", "llama2c"});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    REQUIRE(fs::exists(tmp_path("tokenizer.bpe")));
    r = run_cli({"convert", bin, dir, "--to", "safetensors"});
    REQUIRE(r.exit_code == 0);
    const Model a = load_model(shipped_model_dir());
    const Model b = load_model(dir);
    REQUIRE(b.tokenizer->kind() == "bpe");
    const auto tokens = a.tokenizer->encode("Tom had a red ball.", true);
    REQUIRE(b.tokenizer->encode("Tom had a red ball.", true) == tokens);
    require_bitwise_equal(all_logits(b.weights, "cpu-ref", tokens),
                          all_logits(a.weights, "cpu-ref", tokens),
                          "logits after plab convert there and back");
    r = run_cli({"convert", shipped_model_dir(), tmp_path("x.txt"), "--to", "llama2c"});
    REQUIRE(r.exit_code != 0);
    REQUIRE(r.err.find("should end in .bin") != std::string::npos);
}

TEST_CASE("plab convert: every tokenizer kind survives a trip through GGUF and back",
          "[model][gguf][cli]") {
    // Issue 61: a byte-tokenizer model written to GGUF came back with the ids
    // tokenizer (GGUF's "none" says only that there is no vocabulary), so
    // `plab prefill --model out.gguf` refused text.
    const std::string golden = std::string(PLAB_TESTS_DIR) + "/golden/";
    const std::pair<std::string, std::string> kinds[] = {
        {"byte", "byte"},
        {"ids", "ids"},
        {"bpe", "bpe"},
        {golden + "gguf/spm/tokenizer.bin", "llama2c"},
        {golden + "hf_tokenizers/gpt2/tokenizer.json", "hf"},
    };
    const std::string text = "Tom had a red ball.";
    for (const auto& [spec, kind] : kinds) {
        INFO("tokenizer " << spec);
        const std::string dir = tmp_path("tok_" + kind), gguf = tmp_path("tok_" + kind + ".gguf"),
                          back = tmp_path("tok_" + kind + "_back");
        auto r = run_cli({"random-model", dir, "--seed", "3", "--tokenizer", spec});
        INFO(r.out << r.err);
        REQUIRE(r.exit_code == 0);
        REQUIRE(run_cli({"convert", dir, gguf, "--to", "gguf"}).exit_code == 0);
        if (kind == "hf") {
            // GGUF keeps the vocabulary and merges, not the tokenizer.json: back to a
            // directory it goes from the directory (the file copied), and from the
            // GGUF file it is refused with nothing written.
            require_one_line_cli_error(
                run_cli({"convert", gguf, back, "--to", "safetensors"}),
                "came from GGUF metadata, and plab writes no tokenizer.json");
            CHECK_FALSE(fs::exists(back));
            require_one_line_cli_error(
                run_cli({"convert", dir, tmp_path("tok_hf.bin"), "--to", "llama2c"}),
                "this model's tokenizer is a tokenizer.json");
            REQUIRE(run_cli({"convert", dir, back, "--to", "safetensors"}).exit_code == 0);
        } else {
            REQUIRE(run_cli({"convert", gguf, back, "--to", "safetensors"}).exit_code == 0);
        }
        const Model a = load_model(dir), b = load_model(gguf), c = load_model(back);
        CHECK(b.tokenizer->kind() == a.tokenizer->kind());
        CHECK(c.tokenizer->kind() == a.tokenizer->kind());
        if (kind == "ids") continue;  // prompts are ids: no text to encode
        const auto tokens = a.tokenizer->encode(text, true);
        CHECK(b.tokenizer->encode(text, true) == tokens);
        CHECK(c.tokenizer->encode(text, true) == tokens);
        // And the CLI takes text for the GGUF file, as for the directory.
        CHECK(run_cli({"prefill", "--model", gguf, text, "--json"}).exit_code == 0);
    }
}

TEST_CASE("plab convert --to llama2c writes the legacy header run.c reads by default",
          "[model][llama2c][cli]") {
    // A separate classifier (negative vocab in the legacy header) and a shared one.
    for (const bool tied : {false, true}) {
        INFO("tied " << tied);
        const Weights w = make_random_weights(l2c_config(tied), tied ? 31 : 32);
        const std::string dir = tmp_path(tied ? "legacy_src_tied" : "legacy_src_sep");
        save_model(w, "ids", dir);
        const std::string bin = tmp_path(tied ? "legacy_tied.bin" : "legacy_sep.bin");
        const auto r = run_cli({"convert", dir, bin, "--to", "llama2c"});
        INFO(r.out << r.err);
        REQUIRE(r.exit_code == 0);

        // The first 28 bytes are run.c's Config: 7 int32, vocab negative when unshared.
        const std::string bytes = read_bytes(bin);
        REQUIRE(bytes.size() > 28);
        std::int32_t h[7];
        std::memcpy(h, bytes.data(), sizeof h);
        const ModelConfig& c = w.config;
        CHECK(h[0] == c.dim);
        CHECK(h[1] == c.hidden_dim);
        CHECK(h[2] == c.n_layers);
        CHECK(h[3] == c.n_heads);
        CHECK(h[4] == c.n_kv_heads);
        CHECK(h[5] == (tied ? c.vocab_size : -c.vocab_size));
        CHECK(h[6] == c.max_seq_len);
        REQUIRE(r.out.find("legacy header, the one llama2.c's run.c reads") != std::string::npos);

        // Round trip: the same floats, bit for bit, read back as version 0.
        Llama2cInfo info;
        const Weights back = read_llama2c_checkpoint(bin, &info);
        REQUIRE(info.version == 0);
        REQUIRE(info.shared_classifier == tied);
        require_bitwise_equal(all_weight_floats(back), all_weight_floats(w),
                              "weights after convert to legacy");
    }
    // The other header, by name: "ak42" magic then version 1.
    const std::string dir = tmp_path("legacy_src_sep");
    const std::string v1 = tmp_path("v1.bin");
    auto r = run_cli({"convert", dir, v1, "--to", "llama2c", "--header", "v1"});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    REQUIRE(r.out.find("v1 \"ak42\" header") != std::string::npos);
    REQUIRE(read_bytes(v1).substr(0, 4) == "24ka");  // 0x616b3432 ("ak42") little-endian
    Llama2cInfo info;
    const Weights back = read_llama2c_checkpoint(v1, &info);
    REQUIRE(info.version == 1);
    require_bitwise_equal(all_weight_floats(back),
                          all_weight_floats(make_random_weights(l2c_config(false), 32)),
                          "weights after convert to v1");
    r = run_cli({"convert", dir, v1, "--to", "llama2c", "--header", "v2"});
    REQUIRE(r.exit_code != 0);
}

TEST_CASE("llama2.c: malformed checkpoints are rejected with a clear reason",
          "[model][llama2c][errors]") {
    const Weights w = make_random_weights(l2c_config(false), 77);
    const std::string v0 = tmp_path("good_v0.bin"), v1 = tmp_path("good_v1.bin");
    write_llama2c_checkpoint(w, v0, 0);
    write_llama2c_checkpoint(w, v1, 1);
    const std::string d0 = read_bytes(v0), d1 = read_bytes(v1);
    const std::string bad = tmp_path("bad.bin");

    write_bytes(bad, d0.substr(0, d0.size() - 100));  // truncated
    require_error([&] { read_llama2c_checkpoint(bad); }, "truncated");
    write_bytes(bad, d1.substr(0, 100));  // v1 magic, header cut short
    require_error([&] { read_llama2c_checkpoint(bad); }, "v1 header alone is 256 bytes");
    write_bytes(bad, d0 + std::string(64, '\0'));  // extra bytes: the header undersells the file
    require_error([&] { read_llama2c_checkpoint(bad); }, "header lies");

    std::string lie = d0;  // header claims a larger vocabulary than the tensors hold
    std::int32_t vocab = -400;
    std::memcpy(lie.data() + 20, &vocab, 4);
    write_bytes(bad, lie);
    require_error([&] { read_llama2c_checkpoint(bad); }, "implies");

    std::string v2 = d1;  // the int8 export
    std::int32_t version = 2;
    std::memcpy(v2.data() + 4, &version, 4);
    write_bytes(bad, v2);
    require_error([&] { read_llama2c_checkpoint(bad); }, "version 2 is not supported");

    write_bytes(bad, std::string("not a checkpoint at all, just some text here"));
    require_error([&] { read_llama2c_checkpoint(bad); }, "not a llama2.c checkpoint");
    write_bytes(bad, "abc");
    require_error([&] { read_llama2c_checkpoint(bad); }, "too short");
}

TEST_CASE("safetensors model dirs: malformed files are rejected with a clear reason",
          "[model][safetensors][errors]") {
    const std::string good = repo_path("tests/golden/models/rand_gqa_h3_dh10");
    const std::string st = read_bytes(good + "/model.safetensors");
    const std::string cfg = read_bytes(good + "/config.json");
    const std::string dir = tmp_path("bad_st");
    fs::create_directories(dir);
    auto with = [&](const std::string& tensors, const std::string& config) {
        write_bytes(dir + "/model.safetensors", tensors);
        write_bytes(dir + "/config.json", config);
    };
    auto load = [&] { load_model(dir); };

    // Each case names what is wrong, with the numbers that show it: a load that
    // failed for some other reason would not pass.
    with(std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + st.substr(8),
         cfg);  // wrong magic/length
    require_error(load, "header length 9223372036854775807 does not fit a " +
                            std::to_string(st.size()) + "-byte file");

    std::uint64_t n;  // the JSON header's length, little-endian (x86)
    std::memcpy(&n, st.data(), 8);
    const std::string header = st.substr(8, n);
    with(st.substr(0, st.size() / 2), cfg);  // truncated data: the header survives, data does not
    REQUIRE(8 + n < st.size() / 2);
    require_error(load, "lie outside the " + std::to_string(st.size() / 2 - 8 - n) +
                            " data bytes (file truncated or header lies)");

    // Header lies: the tensor stored first now claims to start 9 bytes late,
    // so its byte range no longer holds its shape.
    const auto pos = header.find("\"data_offsets\":[0,");
    REQUIRE(pos != std::string::npos);
    const auto name_end = header.rfind("\":{", pos);
    const auto name_begin = header.rfind('"', name_end - 1) + 1;
    const std::string first = header.substr(name_begin, name_end - name_begin);
    const std::uint64_t first_end = std::stoull(header.substr(pos + 18));
    std::string lied = header;
    lied.replace(pos, 18, "\"data_offsets\":[9,");
    with(st.substr(0, 8) + lied + st.substr(8 + n), cfg);
    require_error(load, "tensor " + first + ": " + std::to_string(first_end - 9) +
                            " bytes do not match its shape (" + std::to_string(first_end / 4) +
                            " values of 4 bytes)");

    std::string cfg_vocab = cfg;  // vocab mismatch between config and tensors
    const auto vp = cfg_vocab.find("\"vocab_size\": 258");
    REQUIRE(vp != std::string::npos);
    cfg_vocab.replace(vp, 17, "\"vocab_size\": 300");
    with(st, cfg_vocab);
    require_error(load, "needs [");

    // Vocab smaller than the byte tokenizer's 258, tensors consistent with it:
    // only the tokenizer check can object.
    const std::string small_dir = tmp_path("bad_st_small_vocab");
    save_model(make_random_weights(small_config(32, 1, 4, 2, 8, 48, 200, 32), 9), "byte",
               small_dir);
    require_error([&] { load_model(small_dir); },
                  "config.json: tokenizer has 258 tokens but vocab_size is 200");

    std::string cfg_tok = cfg;  // a tokenizer file that does not exist / is not known
    const auto tp = cfg_tok.find("\"plab_tokenizer\": \"byte\"");
    REQUIRE(tp != std::string::npos);
    cfg_tok.replace(tp, 24, "\"plab_tokenizer\": \"nope.bpe\"");
    with(st, cfg_tok);
    require_error(load, "does not exist");
    cfg_tok = cfg;
    cfg_tok.replace(tp, 24, "\"plab_tokenizer\": \"sp.model\"");
    with(st, cfg_tok);
    require_error(load, "is not known");

    // The CLI turns each of these into one line on stderr and a non-zero exit.
    with(st.substr(0, st.size() / 2), cfg);
    const auto r = run_cli({"info", "--model", dir});
    REQUIRE(r.exit_code != 0);
    REQUIRE(r.err.rfind("plab: error: ", 0) == 0);
    REQUIRE(r.err.find('\n') == r.err.size() - 1);
}

TEST_CASE("a Hugging Face directory without plab_tokenizer takes prompts as token ids",
          "[model][safetensors]") {
    ModelConfig c = small_config(32, 1, 4, 2, 8, 48, 300, 32);
    const Weights w = make_random_weights(c, 5);
    const std::string dir = tmp_path("hf_no_tokenizer");
    save_model(w, "byte", dir);
    std::string cfg = read_bytes(dir + "/config.json");
    const auto at = cfg.find("\"plab_tokenizer\"");
    REQUIRE(at != std::string::npos);
    cfg.erase(at, cfg.find('\n', at) - at);
    cfg.erase(cfg.rfind(',', at), 1);  // the comma before the removed last key
    write_bytes(dir + "/config.json", cfg);
    const Model m = load_model(dir);
    REQUIRE(m.tokenizer->kind() == "ids");
    REQUIRE(m.tokenizer->encode("1, 2 299", false) == std::vector<int32_t>{1, 2, 299});
    require_error([&] { m.tokenizer->encode("hello", false); }, "token ids 0..299");
}
