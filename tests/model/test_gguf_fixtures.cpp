// GGUF files made by llama.cpp's own code: tests/golden/gguf/*.gguf were written by
// llama.cpp's gguf-py (version 0.17.0 or later, at llama.cpp commit 0024aa74: its
// GGUFWriter, its quants for BF16/Q8_0, its SpecialVocab), driven by
// tests/golden/gguf/make_fixtures.py the way convert_hf_to_gguf.py's LlamaModel drives
// it (convert itself needs transformers, which Debian 12 lacks; the folder's README says
// which of its steps are reproduced and how to regenerate the files byte for byte):
//  * plab's reader agrees with an independent one: every tensor's name, type, shape,
//    offset and size, and the sha256 of its values widened to float32, equal the
//    *.dump.txt that tests/reference/gguf_reference.py (numpy, written from ggml's
//    docs/gguf.md) printed for the file;
//  * a GGUF and the file it was converted from give the same tokens for the same
//    text and the same logits: bitwise for F32; for F16/BF16/Q8_0 the same top token
//    within a tolerance stated below;
//  * plab's writer writes what llama.cpp's writes: the tensors of `plab convert
//    spm/model.bin --to gguf` are byte-identical to the fixture's, and so are the
//    tokenizer arrays.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "core/sha256.h"
#include "model/gguf.h"
#include "model/gguf_model.h"
#include "model/model_io.h"
#include "model_test_util.h"
#include "test_util.h"

using namespace plab;
using namespace plab::test;

namespace {

std::string fixture(const std::string& rel) {
    return repo_path("tests/golden/gguf/" + rel);
}

struct DumpTensor {
    std::string type, ne;
    std::uint64_t offset = 0, nbytes = 0;
    std::string f32_sha;
};

// The tensor lines of a gguf_reference.py dump:
// tensor NAME TYPE ne=[a,b] offset=N nbytes=N sha256=H f32.sha256=H first4=[...]
std::map<std::string, DumpTensor> read_dump(const std::string& path) {
    std::ifstream in(path);
    REQUIRE(in.good());
    std::map<std::string, DumpTensor> out;
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("tensor ", 0) != 0) continue;
        std::istringstream s(line);
        std::string tag, name, field;
        DumpTensor t;
        s >> tag >> name >> t.type;
        while (s >> field) {
            const auto eq = field.find('=');
            const std::string key = field.substr(0, eq), value = field.substr(eq + 1);
            if (key == "ne") t.ne = value;
            if (key == "offset") t.offset = std::stoull(value);
            if (key == "nbytes") t.nbytes = std::stoull(value);
            if (key == "f32.sha256") t.f32_sha = value;
        }
        out[name] = t;
    }
    return out;
}

std::string ne_text(const gguf::TensorInfo& t) {
    std::string s = "[";
    for (std::size_t i = 0; i < t.ne.size(); ++i) s += (i ? "," : "") + std::to_string(t.ne[i]);
    return s + "]";
}

std::vector<int> top_k(const std::vector<float>& logits, int k) {
    std::vector<int> idx(logits.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = int(i);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [&](int a, int b) { return logits[a] > logits[b]; });
    idx.resize(std::size_t(k));
    return idx;
}

// Two metadata arrays of strings, integers or floats: the same entries, same types.
void require_same_array(const gguf::Array& a, const gguf::Array& b) {
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        INFO("entry " << i);
        REQUIRE(a[i].type == b[i].type);
        if (const auto* s = std::get_if<std::string>(&a[i].v))
            REQUIRE(*s == std::get<std::string>(b[i].v));
        else if (const auto* d = std::get_if<double>(&a[i].v))
            REQUIRE(*d == std::get<double>(b[i].v));
        else
            REQUIRE(std::get<std::int64_t>(a[i].v) == std::get<std::int64_t>(b[i].v));
    }
}

double spread(const std::vector<float>& v) {
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return double(*hi) - double(*lo);
}

// Texts with merges, Cyrillic (byte fallback where no piece), punctuation, digits.
const std::vector<std::string> kTexts = {"Once upon a time there was a little cat.",
                                         "the cat sat on the mat",
                                         "кот и собака",
                                         "Hello, world! 123",
                                         "",
                                         "a\nb  c",
                                         "\xff odd byte"};

}  // namespace

TEST_CASE("GGUF fixtures: plab's reader agrees with the independent reader's dump",
          "[model][gguf][fixtures]") {
    for (const std::string f : {"spm/model-f32", "spm/model-f16", "spm/model-bf16",
                                "spm/model-q8_0", "bpe/model-f32", "bpe/model-q8_0"}) {
        INFO(f);
        const auto expect = read_dump(fixture(f + ".dump.txt"));
        const FileBytes bytes(fixture(f + ".gguf"), "a fixture");
        const gguf::File file = gguf::parse(bytes.bytes(), f);
        REQUIRE(file.tensors.size() == expect.size());
        for (const gguf::TensorInfo& t : file.tensors) {
            INFO(t.name);
            REQUIRE(expect.count(t.name) == 1);
            const DumpTensor& e = expect.at(t.name);
            REQUIRE(gguf::tensor_type_name(t.type) == e.type);
            REQUIRE(ne_text(t) == e.ne);
            REQUIRE(t.offset == e.offset);
            REQUIRE(t.n_bytes == e.nbytes);
            // The values widened to float32 (F16, BF16, Q8_0 dequantised): bit for bit.
            const HostTensor h = gguf::read_tensor(file, t, bytes.bytes(), f);
            Sha256 sha;
            sha.update(h.data.data(), h.data.size() * sizeof(float));
            REQUIRE(sha.hex() == e.f32_sha);
        }
    }
}

TEST_CASE("GGUF fixtures: same tokens and logits as the llama2.c model they came from",
          "[model][gguf][fixtures]") {
    const Model bin = load_model(fixture("spm/model.bin"));
    REQUIRE(bin.tokenizer->kind() == "llama2.c");
    const auto prompt = bin.tokenizer->encode("Once upon a time the cat", true);
    const auto expect = all_logits(bin.weights, "cpu-ref", prompt);
    const int V = bin.weights.config.vocab_size;
    for (const std::string f : {"f32", "f16", "bf16", "q8_0"}) {
        INFO("spm/model-" << f << ".gguf");
        const Model g = load_model(fixture("spm/model-" + f + ".gguf"));
        REQUIRE(g.weights.config.summary() == bin.weights.config.summary());
        for (const std::string& text : kTexts)
            REQUIRE(g.tokenizer->encode(text, true) == bin.tokenizer->encode(text, true));
        const auto got = all_logits(g.weights, "cpu-ref", prompt);
        if (f == "f32") {
            require_bitwise_equal(got, expect, "F32 GGUF vs the .bin it was converted from");
            continue;
        }
        // Rounded weights move the logits by a fraction of their spread (max - min over
        // every position, 57 here): F16 keeps 11 significant bits, BF16 8, Q8_0 about 8
        // per block of 32 (a step of max|x|/127). Measured: 0.015 (F16), 0.099 (BF16),
        // 0.33 (Q8_0); allowed: 0.1 %, 0.5 %, 1 % of the spread (0.057, 0.29, 0.57).
        // The top token at the last position (what generation takes) must not change.
        const double share = f == "f16" ? 0.001 : f == "bf16" ? 0.005 : 0.01;
        require_allclose(got, expect, share * spread(expect), 0.0,
                         "logits of weights rounded to " + f);
        const std::vector<float> last_got(got.end() - V, got.end()),
            last_expect(expect.end() - V, expect.end());
        REQUIRE(top_k(last_got, 1) == top_k(last_expect, 1));
    }
}

TEST_CASE("GGUF fixtures: same tokens and logits as the Hugging Face folder they came from",
          "[model][gguf][fixtures]") {
    const Model hf = load_model(fixture("bpe"));
    const Model g = load_model(fixture("bpe/model-f32.gguf"));
    REQUIRE(g.weights.config.summary() == hf.weights.config.summary());
    REQUIRE(!g.weights.config.tied_embeddings);
    for (std::string text : kTexts) {
        for (const std::string extra : {"", " <|endoftext|> after"}) {
            INFO(text + extra);
            REQUIRE(g.tokenizer->encode(text + extra, false) ==
                    hf.tokenizer->encode(text + extra, false));
        }
    }
    const auto prompt = hf.tokenizer->encode("the cat sat on the mat", false);
    const auto expect = all_logits(hf.weights, "cpu-ref", prompt);
    require_bitwise_equal(all_logits(g.weights, "cpu-ref", prompt), expect,
                          "F32 GGUF vs the safetensors it was converted from (q/k permuted "
                          "to interleaved by gguf-py and back by plab)");
    const Model q = load_model(fixture("bpe/model-q8_0.gguf"));
    const auto got = all_logits(q.weights, "cpu-ref", prompt);
    // Q8_0 as above, 1 % of the spread (8.1 here: 0.081); measured 0.066.
    require_allclose(got, expect, 0.01 * spread(expect), 0.0, "logits of weights rounded to Q8_0");
}

TEST_CASE("GGUF fixtures: plab's writer writes the tensors and vocabulary llama.cpp's does",
          "[model][gguf][fixtures]") {
    const std::string out =
        (test::process_temp_dir("plab_test_gguf_fixtures") / "spm.gguf").string();
    auto r = run_cli({"convert", fixture("spm/model.bin"), out, "--to", "gguf"});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const FileBytes mine_bytes(out, "plab's file"), ref_bytes(fixture("spm/model-f32.gguf"), "x");
    const gguf::File mine = gguf::parse(mine_bytes.bytes(), out);
    const gguf::File ref = gguf::parse(ref_bytes.bytes(), "fixture");
    REQUIRE(mine.tensors.size() == ref.tensors.size());
    for (const gguf::TensorInfo& t : ref.tensors) {
        INFO(t.name);
        const gguf::TensorInfo* m = mine.find_tensor(t.name);
        REQUIRE(m != nullptr);
        REQUIRE(m->ne == t.ne);
        REQUIRE(m->type == t.type);
        REQUIRE(m->n_bytes == t.n_bytes);
        REQUIRE(std::memcmp(mine_bytes.bytes().data() + mine.data_start + m->offset,
                            ref_bytes.bytes().data() + ref.data_start + t.offset, t.n_bytes) == 0);
    }
    for (const std::string key :
         {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"}) {
        INFO(key);
        require_same_array(mine.get_array(key), ref.get_array(key));
    }
    for (const std::string key :
         {"llama.embedding_length", "llama.block_count", "llama.feed_forward_length",
          "llama.attention.head_count", "llama.attention.head_count_kv", "llama.context_length",
          "llama.rope.dimension_count", "tokenizer.ggml.bos_token_id",
          "tokenizer.ggml.eos_token_id", "general.file_type"}) {
        INFO(key);
        REQUIRE(mine.get_int(key) == ref.get_int(key));
    }
}

TEST_CASE("GGUF fixtures: a byte-level tokenizer.json goes into GGUF as llama.cpp writes it",
          "[model][gguf][fixtures]") {
    const std::string out =
        (test::process_temp_dir("plab_test_gguf_fixtures") / "bpe.gguf").string();
    auto r = run_cli({"convert", fixture("bpe"), out, "--to", "gguf"});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    REQUIRE(r.out.find("tokenizer: in the metadata") != std::string::npos);
    const FileBytes mine_bytes(out, "plab's file"), ref_bytes(fixture("bpe/model-f32.gguf"), "x");
    const gguf::File mine = gguf::parse(mine_bytes.bytes(), out);
    const gguf::File ref = gguf::parse(ref_bytes.bytes(), "fixture");
    for (const std::string key :
         {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"}) {
        INFO(key);
        require_same_array(mine.get_array(key), ref.get_array(key));
    }
    for (const std::string key : {"tokenizer.ggml.model", "tokenizer.ggml.pre"})
        REQUIRE(mine.get_string(key) == ref.get_string(key));
    for (const std::string key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"})
        REQUIRE(mine.get_int(key) == ref.get_int(key));
    REQUIRE(mine.get_bool("tokenizer.ggml.add_bos_token") ==
            ref.get_bool("tokenizer.ggml.add_bos_token"));
    // Read back, it encodes as the folder does.
    const Model hf = load_model(fixture("bpe")), back = load_model(out);
    for (const std::string& text : kTexts)
        REQUIRE(back.tokenizer->encode(text + "<|endoftext|>", false) ==
                hf.tokenizer->encode(text + "<|endoftext|>", false));
    // A SentencePiece-style tokenizer.json has merges, GGUF's "llama" scores: said, not hidden.
    const auto dir = test::process_temp_dir("plab_test_gguf_fixtures") / "sp";
    REQUIRE(run_cli({"random-model", dir.string(), "--tokenizer",
                     repo_path("tests/golden/hf_tokenizers/llama2/tokenizer.json")})
                .exit_code == 0);
    r = run_cli({"convert", dir.string(), (dir / "m.gguf").string(), "--to", "gguf"});
    REQUIRE(r.exit_code == 0);
    REQUIRE(r.out.find("tokenizer: not written: a SentencePiece-style tokenizer.json has merges") !=
            std::string::npos);
}
