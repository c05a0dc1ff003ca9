// GGUF (issue 49): the number formats against their definitions, the writer and
// reader as an exact pair (F32 bitwise, F16 = the weights rounded to half),
// tokenizers through the metadata, and malformed or unsupported files refused
// with one line naming what was found. The independent parse of what the writer
// writes is tests/reference/gguf_reference.py (test gguf_reference_*), and the
// files made by llama.cpp's own gguf-py are in tests/golden/gguf/ (test_gguf_fixtures).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "core/error.h"
#include "model/gguf.h"
#include "model/gguf_model.h"
#include "model/model_io.h"
#include "model/number_formats.h"
#include "model/tokenizers/tokenizer_bpe.h"
#include "model/tokenizers/tokenizer_llama2c.h"
#include "model_test_util.h"
#include "test_util.h"

using namespace plab;
using namespace plab::test;
namespace fs = std::filesystem;

namespace {

std::string tmp_gguf(const std::string& name) {
    return (test::process_temp_dir("plab_test_gguf") / name).string();
}

// A random model in memory with a tokenizer, for the writer.
Model gguf_random_model(bool tied, std::unique_ptr<Tokenizer> tok, int vocab, std::uint64_t seed) {
    Model m;
    ModelConfig c = small_config(48, 2, 6, 2, 8, 96, vocab, 64);
    c.tied_embeddings = tied;
    c.rope_theta = 500000.0;  // not the default, so the metadata must carry it
    c.norm_eps = 1e-6f;
    m.weights = make_random_weights(c, seed);
    m.tokenizer = std::move(tok);
    return m;
}

std::unique_ptr<Llama2cTokenizer> gguf_small_spm() {
    std::vector<std::string> pieces;
    std::vector<float> scores;
    llama2c_base_vocab(pieces, scores);
    for (const char* p : {" ", "a", "b", "c", "h", "t", "e", " t", "th", " th", "he", " the", "é",
                          "к", "о", "т", "ко", "кот", " кот"}) {
        pieces.push_back(p);
        scores.push_back(-float(pieces.size()));
    }
    return std::make_unique<Llama2cTokenizer>(pieces, scores);
}

}  // namespace

TEST_CASE("number formats: F16 and BF16 widen exactly, F32 -> F16 rounds to nearest even",
          "[model][gguf]") {
    // Every half: widening then narrowing gives it back (NaNs stay NaN).
    for (std::uint32_t h = 0; h < 65536; ++h) {
        const float f = f16_to_f32(std::uint16_t(h));
        if (std::isnan(f)) {
            REQUIRE(std::isnan(f16_to_f32(f32_to_f16(f))));
            continue;
        }
        INFO("half 0x" << std::hex << h);
        REQUIRE(f32_to_f16(f) == h);
    }
    // Known values from the IEEE 754 binary16 definition.
    REQUIRE(f16_to_f32(0x3C00) == 1.0f);
    REQUIRE(f16_to_f32(0xC000) == -2.0f);
    REQUIRE(f16_to_f32(0x7BFF) == 65504.0f);
    REQUIRE(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
    REQUIRE(f16_to_f32(0x0400) == std::ldexp(1.0f, -14));  // smallest normal
    REQUIRE(std::isinf(f16_to_f32(0x7C00)));
    // Halfway between two neighbours, F32 -> F16 picks the even one; just off
    // halfway, the nearer one (normal and subnormal range, both signs).
    for (std::uint16_t h : {0x3C00, 0x3C01, 0x0001, 0x0002, 0x03FF, 0x5555, 0xBC01, 0x8003}) {
        const float a = f16_to_f32(h), b = f16_to_f32(std::uint16_t(h + 1));
        const float mid = 0.5f * (a + b);  // exact in float32
        const std::uint16_t even = (h & 1) ? std::uint16_t(h + 1) : h;
        INFO("between 0x" << std::hex << h << " and 0x" << h + 1);
        REQUIRE(f32_to_f16(mid) == even);
        REQUIRE(f32_to_f16(std::nextafter(mid, a)) == h);
        REQUIRE(f32_to_f16(std::nextafter(mid, b)) == std::uint16_t(h + 1));
    }
    REQUIRE(f32_to_f16(65519.0f) == 0x7BFF);  // below the halfway point to 65536
    REQUIRE(f32_to_f16(65520.0f) == 0x7C00);  // halfway: ties to even = inf
    REQUIRE(f32_to_f16(1e-9f) == 0x0000);
    // BF16 is the top half of a float32.
    REQUIRE(bf16_to_f32(0x3F80) == 1.0f);
    REQUIRE(bf16_to_f32(0xC0A0) == -5.0f);
}

TEST_CASE("number formats: Q8_0 blocks dequantise to scale times int8, block by block",
          "[model][gguf]") {
    // Two blocks laid out as ggml's block_q8_0 { f16 d; int8 qs[32]; }.
    std::string blocks(2 * kQ8_0BlockBytes, '\0');
    const std::uint16_t d0 = 0x3800;  // 0.5
    const std::uint16_t d1 = 0x1400;  // 2^-10
    std::memcpy(&blocks[0], &d0, 2);
    std::memcpy(&blocks[kQ8_0BlockBytes], &d1, 2);
    for (int j = 0; j < 32; ++j) {
        blocks[2 + j] = static_cast<char>(static_cast<std::int8_t>(j * 8 - 128));  // -128..120
        blocks[kQ8_0BlockBytes + 2 + j] = static_cast<char>(static_cast<std::int8_t>(127 - j));
    }
    std::vector<float> out(64);
    dequantize_q8_0(blocks.data(), 2, out.data());
    for (int j = 0; j < 32; ++j) {
        REQUIRE(out[j] == 0.5f * float(j * 8 - 128));
        REQUIRE(out[32 + j] == std::ldexp(float(127 - j), -10));
    }
}

TEST_CASE("GGUF: plab writes, plab reads back the same model bit for bit (F32)", "[model][gguf]") {
    for (bool tied : {true, false}) {
        const Model m = gguf_random_model(tied, gguf_small_spm(), 300, tied ? 3 : 4);
        const std::string path = tmp_gguf(tied ? "tied.gguf" : "untied.gguf");
        REQUIRE(save_gguf_model(m, path, GgufWeightType::kF32).empty());
        REQUIRE(is_gguf_path(path));
        const Model back = load_model(path);
        INFO("tied " << tied);
        REQUIRE(back.weights.config.summary() == m.weights.config.summary());
        REQUIRE(back.weights.config.rope_theta == m.weights.config.rope_theta);
        REQUIRE(back.weights.config.norm_eps == m.weights.config.norm_eps);
        REQUIRE(back.weights.config.tied_embeddings == tied);
        require_bitwise_equal(all_weight_floats(back.weights), all_weight_floats(m.weights),
                              "every weight after GGUF F32 there and back");
        // The tokenizer travelled in the metadata: the same ids for the same texts.
        REQUIRE(back.tokenizer->kind() == "llama2.c");
        for (const std::string s : {"the cat", "кот the", "é\xff!", ""})
            REQUIRE(back.tokenizer->encode(s, true) == m.tokenizer->encode(s, true));
        const auto tokens = m.tokenizer->encode("the theca", true);
        require_bitwise_equal(all_logits(back.weights, "cpu-ref", tokens),
                              all_logits(m.weights, "cpu-ref", tokens),
                              "cpu-ref logits of the GGUF copy");
    }
}

TEST_CASE("GGUF: --outtype f16 keeps norms F32 and rounds every matrix to half", "[model][gguf]") {
    const Model m = gguf_random_model(false, gguf_small_spm(), 300, 5);
    const std::string path = tmp_gguf("f16.gguf");
    save_gguf_model(m, path, GgufWeightType::kF16);
    const FileBytes bytes(path, "the file just written");
    const gguf::File f = gguf::parse(bytes.bytes(), path);
    REQUIRE(f.find_tensor("blk.0.attn_norm.weight")->type == 0);  // F32
    REQUIRE(f.find_tensor("blk.0.attn_q.weight")->type == 1);     // F16
    REQUIRE(f.find_tensor("output.weight")->type == 1);
    REQUIRE(f.get_int("general.file_type") == 1);  // MOSTLY_F16
    const Model back = load_model(path);
    std::vector<float> rounded = all_weight_floats(m.weights);
    std::vector<float> got = all_weight_floats(back.weights);
    REQUIRE(rounded.size() == got.size());
    // The expected model: every matrix rounded to half, norms unchanged.
    Weights expect = m.weights;
    auto to_half = [](std::vector<float>& v) {
        for (float& x : v) x = f16_to_f32(f32_to_f16(x));
    };
    to_half(expect.tok_embeddings);
    to_half(expect.classifier);
    for (auto& l : expect.layers)
        for (auto* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) to_half(*t);
    require_bitwise_equal(got, all_weight_floats(expect), "F16 GGUF = matrices rounded to half");
    REQUIRE(!same_bits(got, rounded));  // and it did round something
}

TEST_CASE("GGUF: the shipped model's BPE and a byte model travel in the metadata",
          "[model][gguf]") {
    const Model shipped = load_model(shipped_model_dir());
    const std::string path = tmp_gguf("shipped.gguf");
    REQUIRE(save_gguf_model(shipped, path, GgufWeightType::kF32).empty());
    const Model back = load_model(path);
    REQUIRE(back.tokenizer->kind() == "bpe");
    for (const std::string s : {"Once upon a time, Tom and Ivy", "кот 123 \xff", ""})
        REQUIRE(back.tokenizer->encode(s, true) == shipped.tokenizer->encode(s, true));
    const auto tokens = shipped.tokenizer->encode("Emma had a red ball.", true);
    require_bitwise_equal(all_logits(back.weights, "cpu-ref", tokens),
                          all_logits(shipped.weights, "cpu-ref", tokens),
                          "shipped model logits through GGUF");

    const Model byte = gguf_random_model(true, std::make_unique<ByteTokenizer>(), 258, 6);
    const std::string bpath = tmp_gguf("byte.gguf");
    REQUIRE(save_gguf_model(byte, bpath, GgufWeightType::kF32).empty());
    REQUIRE(load_model(bpath).tokenizer->kind() == "byte");
}

namespace {

// A small valid file and helpers to break it in one place.
struct GgufBytes {
    std::string bytes;
    explicit GgufBytes(const std::string& path) : bytes(read_bytes(path)) {}
    void put_u32(std::size_t off, std::uint32_t v) { std::memcpy(&bytes[off], &v, 4); }
    void put_u64(std::size_t off, std::uint64_t v) { std::memcpy(&bytes[off], &v, 8); }
    std::size_t find(const std::string& s) const {
        const auto at = bytes.find(s);
        REQUIRE(at != std::string::npos);
        return at;
    }
    Model parse() const { return parse_gguf_model({bytes.data(), bytes.size()}, "test.gguf"); }
};

// A file whose metadata is exactly `kv`, with the tensors of a tiny model.
std::string gguf_write_with(const std::vector<std::pair<std::string, gguf::Value>>& kv,
                            bool with_tensors, const std::string& name) {
    static const Model m = gguf_random_model(true, std::make_unique<ByteTokenizer>(), 258, 7);
    const std::string path = tmp_gguf(name);
    std::vector<gguf::TensorOut> t;
    if (with_tensors) {
        const Weights& w = m.weights;
        const std::int64_t d = 48, q = 48, kvd = 16, ff = 96, v = 258;
        t.push_back({"token_embd.weight", {v, d}, &w.tok_embeddings});
        for (int i = 0; i < 2; ++i) {
            const LayerWeights& l = w.layers[std::size_t(i)];
            const std::string b = "blk." + std::to_string(i) + ".";
            t.push_back({b + "attn_norm.weight", {d}, &l.attn_norm});
            t.push_back({b + "attn_q.weight", {q, d}, &l.wq});
            t.push_back({b + "attn_k.weight", {kvd, d}, &l.wk});
            t.push_back({b + "attn_v.weight", {kvd, d}, &l.wv});
            t.push_back({b + "attn_output.weight", {d, q}, &l.wo});
            t.push_back({b + "ffn_norm.weight", {d}, &l.ffn_norm});
            t.push_back({b + "ffn_gate.weight", {ff, d}, &l.w_gate});
            t.push_back({b + "ffn_up.weight", {ff, d}, &l.w_up});
            t.push_back({b + "ffn_down.weight", {d, ff}, &l.w_down});
        }
        t.push_back({"output_norm.weight", {d}, &w.final_norm});
    }
    gguf::write(path, kv, t);
    return path;
}

std::vector<std::pair<std::string, gguf::Value>> gguf_llama_keys() {
    return {{"general.architecture", gguf::make_string("llama")},
            {"llama.context_length", gguf::make_u32(64)},
            {"llama.embedding_length", gguf::make_u32(48)},
            {"llama.block_count", gguf::make_u32(2)},
            {"llama.feed_forward_length", gguf::make_u32(96)},
            {"llama.attention.head_count", gguf::make_u32(6)},
            {"llama.attention.head_count_kv", gguf::make_u32(2)}};
}

}  // namespace

TEST_CASE("GGUF: malformed files are refused with one line, never a crash", "[model][gguf]") {
    const Model m = gguf_random_model(false, gguf_small_spm(), 300, 8);
    const std::string path = tmp_gguf("good.gguf");
    save_gguf_model(m, path, GgufWeightType::kF32);
    const GgufBytes good(path);
    REQUIRE_NOTHROW(good.parse());

    GgufBytes magic = good;
    magic.bytes[0] = 'X';
    require_error([&] { magic.parse(); }, "does not start with the magic \"GGUF\"");
    GgufBytes v1 = good;
    v1.put_u32(4, 1);
    require_error([&] { v1.parse(); }, "GGUF version 1; plab reads versions 2 and 3");
    GgufBytes counts = good;
    counts.put_u64(8, std::uint64_t(1) << 40);
    require_error([&] { counts.parse(); }, "more than its");
    // A string that claims more bytes than are left.
    GgufBytes key = good;
    key.put_u64(24, std::uint64_t(1) << 50);
    require_error([&] { key.parse(); }, "at most 65535 are allowed");
    // An array count no file could hold (the token list).
    GgufBytes arr = good;
    const std::size_t tokens_key = arr.find("tokenizer.ggml.tokens");
    arr.put_u64(tokens_key + 21 + 4 + 4, std::uint64_t(1) << 60);
    require_error([&] { arr.parse(); }, "array elements of type string");
    // A tensor type plab does not read, named.
    GgufBytes q4k = good;
    const std::size_t name = q4k.find("blk.0.attn_q.weight");
    // name, n_dims (u32), ne[2] (2 × u64), then the type.
    q4k.put_u32(name + 19 + 4 + 16, 12);
    require_error([&] { q4k.parse(); }, "is Q4_K; plab reads F32, F16, BF16 and Q8_0");
    GgufBytes misaligned = good;
    misaligned.put_u64(name + 19 + 4 + 16 + 4, 4);
    require_error([&] { misaligned.parse(); }, "is not a multiple of the alignment 32");
    GgufBytes overlap = good;
    overlap.put_u64(name + 19 + 4 + 16 + 4, 0);  // on top of token_embd
    require_error([&] { overlap.parse(); }, "overlap in the data section");
    // Every truncation of the file: a clear refusal each time.
    for (std::size_t n = 0; n < good.bytes.size(); n += 997) {
        GgufBytes cut = good;
        cut.bytes.resize(n);
        INFO("truncated to " << n << " bytes");
        REQUIRE_THROWS_AS(cut.parse(), Error);
    }
}

TEST_CASE("GGUF: unsupported architectures, tokenizers and RoPE variants are named",
          "[model][gguf]") {
    auto keys = gguf_llama_keys();
    keys[0].second = gguf::make_string("gpt2");
    require_error([&] { load_model(gguf_write_with(keys, true, "arch.gguf")); },
                  "general.architecture is 'gpt2'; plab reads \"llama\"");
    keys = gguf_llama_keys();
    keys.emplace_back("llama.rope.dimension_count", gguf::make_u32(4));
    require_error([&] { load_model(gguf_write_with(keys, true, "partial.gguf")); },
                  "rope.dimension_count 4 rotates part of each 8-component head");
    keys = gguf_llama_keys();
    keys.emplace_back("llama.rope.scaling.type", gguf::make_string("yarn"));
    require_error([&] { load_model(gguf_write_with(keys, true, "yarn.gguf")); },
                  "llama.rope.scaling.type is 'yarn'");
    keys = gguf_llama_keys();
    keys.emplace_back("tokenizer.ggml.model", gguf::make_string("bert"));
    require_error([&] { load_model(gguf_write_with(keys, true, "bert.gguf")); },
                  "tokenizer.ggml.model is 'bert'");
    keys = gguf_llama_keys();
    keys.emplace_back("tokenizer.ggml.model", gguf::make_string("none"));
    keys.emplace_back("plab.tokenizer", gguf::make_string("bpe"));
    require_error([&] { load_model(gguf_write_with(keys, true, "plab_tok.gguf")); },
                  "plab.tokenizer is 'bpe'; plab writes \"byte\" or \"ids\" there");
    keys = gguf_llama_keys();
    keys.emplace_back("tokenizer.ggml.model", gguf::make_string("gpt2"));
    keys.emplace_back("tokenizer.ggml.pre", gguf::make_string("falcon"));
    keys.emplace_back("tokenizer.ggml.tokens", gguf::make_string_array({"a", "b"}));
    require_error([&] { load_model(gguf_write_with(keys, true, "falcon.gguf")); },
                  "tokenizer.ggml.pre is 'falcon'");
    keys = gguf_llama_keys();
    require_error([&] { load_model(gguf_write_with(keys, false, "empty.gguf")); },
                  "token_embd.weight (vocabulary × D) is missing");
    keys = gguf_llama_keys();
    keys[3].second = gguf::make_u32(3);  // three blocks, tensors for two
    require_error([&] { load_model(gguf_write_with(keys, true, "blocks.gguf")); },
                  "tensor blk.2.attn_norm.weight is missing");
    keys = gguf_llama_keys();
    keys[3].second = gguf::make_u32(1);  // one block, tensors for two
    require_error([&] { load_model(gguf_write_with(keys, true, "extra.gguf")); },
                  "unexpected tensor blk.1.");
    keys = gguf_llama_keys();
    keys[4].second = gguf::make_string("ninety-six");
    require_error([&] { load_model(gguf_write_with(keys, true, "type.gguf")); },
                  "llama.feed_forward_length is string; expected an integer");
    // A vocabulary that is not Llama 2's layout.
    keys = gguf_llama_keys();
    std::vector<std::string> toks;
    for (int i = 0; i < 258; ++i) toks.push_back("t" + std::to_string(i));
    keys.emplace_back("tokenizer.ggml.model", gguf::make_string("llama"));
    keys.emplace_back("tokenizer.ggml.tokens", gguf::make_string_array(toks));
    keys.emplace_back("tokenizer.ggml.scores", gguf::make_f32_array(std::vector<float>(258, 0)));
    require_error([&] { load_model(gguf_write_with(keys, true, "layout.gguf")); },
                  "does not have Llama 2's layout");
}

TEST_CASE("plab convert --to gguf: the CLI writes F32 and F16 files that load back",
          "[model][gguf][cli]") {
    const std::string out = tmp_gguf("cli.gguf");
    auto r = run_cli({"convert", shipped_model_dir(), out, "--to", "gguf"});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    REQUIRE(r.out.find("GGUF v3, F32") != std::string::npos);
    r = run_cli({"convert", shipped_model_dir(), tmp_gguf("cli16.gguf"), "--to", "gguf",
                 "--outtype", "f16"});
    REQUIRE(r.exit_code == 0);
    REQUIRE(r.out.find("F16 matrices, F32 norms") != std::string::npos);
    r = run_cli({"generate", "--model", tmp_gguf("cli16.gguf"), "-n", "8", "Once upon"});
    REQUIRE(r.exit_code == 0);
    r = run_cli({"convert", out, tmp_gguf("back"), "--to", "safetensors"});
    REQUIRE(r.exit_code == 0);
    const Model a = load_model(shipped_model_dir()), b = load_model(tmp_gguf("back"));
    require_bitwise_equal(all_weight_floats(b.weights), all_weight_floats(a.weights),
                          "safetensors -> GGUF -> safetensors");
    require_one_line_cli_error(
        run_cli({"convert", shipped_model_dir(), tmp_gguf("x.bin"), "--to", "gguf"}),
        "should end in .gguf");
    require_one_line_cli_error(run_cli({"convert", shipped_model_dir(), tmp_gguf("y.bin"), "--to",
                                        "llama2c", "--outtype", "f16"}),
                               "--outtype applies to --to gguf only");
}
