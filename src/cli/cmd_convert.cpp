// `plab convert IN OUT --to safetensors|llama2c|gguf`: one model, another file format.
//
// What it teaches: formats differ in more than bytes. A llama2.c .bin stores
// q/k rows for the *interleaved* RoPE pairing and implies head_dim = D/H,
// rope_theta 10000 and eps 1e-5; a Hugging Face safetensors directory stores
// the *half-split* pairing with the config spelled out. Converting permutes
// the wq/wk rows (src/model/rope_permute.h) so the logits stay the same, and
// refuses configs the target cannot express. The tokenizer travels with the
// weights when the target can hold it (tokenizer.bpe / tokenizer.bin beside
// the output).
//
// GGUF (llama.cpp's format, model/gguf_model.h) takes the weights as F32 or,
// with --outtype f16, F16 matrices beside F32 norms (as llama.cpp's converter
// writes them); the tokenizer goes into the file's metadata.
//
// llama2.c has two float32 headers: the legacy one (7 int32, what llama2.c's
// own run.c reads) and the versioned "ak42" v1 header (export.py --version 1,
// read by newer forks but not by run.c). The default is legacy, so the file
// runs in `./run model.bin` as it is; `--header v1` writes the other.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/common.h"
#include "core/error.h"
#include "model/gguf_model.h"
#include "model/llama2c.h"
#include "model/model_io.h"
#include "model/tokenizers/tokenizer_bpe.h"
#include "model/tokenizers/tokenizer_hf.h"

namespace plab::cli {
namespace {
namespace fs = std::filesystem;

struct ConvertOptions {
    std::string in;
    std::string out;
    std::string to;
    std::string header = "legacy";  // "legacy" (run.c's 7 int32) or "v1" ("ak42")
    std::string outtype = "f32";    // GGUF weight type: f32 or f16
};

// The tokenizer.json the model was loaded with: beside config.json when `in`
// is a model directory (or a file in one) that names it; "" otherwise (a
// GGUF file holds the vocabulary and merges, not the tokenizer.json).
fs::path source_tokenizer_json(const std::string& in) {
    const fs::path dir = fs::is_directory(in) ? fs::path(in) : fs::path(in).parent_path();
    const fs::path file = dir / "tokenizer.json";
    return fs::exists(dir / "config.json") && fs::exists(file) ? file : fs::path();
}

// Writes the model's tokenizer into `dir` and returns the name config.json
// should use. Called before any weights are written: a tokenizer that cannot
// go with them stops the conversion with nothing written.
std::string save_tokenizer(const Tokenizer& tok, const std::string& in, const fs::path& dir) {
    const bool json = dynamic_cast<const HfTokenizer*>(&tok) != nullptr;
    const fs::path src = json ? source_tokenizer_json(in) : fs::path();
    PLAB_CHECK(!json || !src.empty(), in << "'s tokenizer (" << tok.kind()
                                         << ") came from GGUF metadata, and plab writes no "
                                            "tokenizer.json; convert to .gguf, or copy the "
                                            "original tokenizer.json in beside the output");
    fs::create_directories(dir);
    if (json) {
        if (!fs::exists(dir / "tokenizer.json") || !fs::equivalent(src, dir / "tokenizer.json"))
            fs::copy_file(src, dir / "tokenizer.json", fs::copy_options::overwrite_existing);
        return "tokenizer.json";
    }
    if (const auto* bpe = dynamic_cast<const BpeTokenizer*>(&tok)) {
        bpe->save((dir / "tokenizer.bpe").string());
        return "tokenizer.bpe";
    }
    if (const auto* l2c = dynamic_cast<const Llama2cTokenizer*>(&tok)) {
        l2c->save((dir / "tokenizer.bin").string());
        return "tokenizer.bin";
    }
    return tok.kind();  // "byte" or "ids": nothing to write
}

// What `plab convert` wrote, for its one line of text (it has no --json):
// the file, the choices its format made, and where the tokenizer went.
struct ConvertResult {
    std::string to;                   // safetensors, gguf or llama2c
    std::string out;                  // the output as given
    bool tied = false;                // the classifier shares the embedding matrix
    std::string tokenizer;            // the tokenizer's file name ("byte" or "ids": none written)
    fs::path out_dir;                 // llama2c: the folder the tokenizer file went into
    int header_version = 0;           // llama2c: 0 legacy, 1 "ak42"
    bool f16 = false;                 // gguf: F16 matrices
    std::string tokenizer_kind;       // gguf: the kind written into the metadata
    std::string tokenizer_not_saved;  // gguf: why the tokenizer was not written ("" if it was)
};

void convert_to_safetensors(const ConvertOptions& o, const Model& m, ConvertResult& r) {
    r.tokenizer = save_tokenizer(*m.tokenizer, o.in, o.out);
    save_model(m.weights, r.tokenizer, o.out);
}

void convert_to_gguf(const ConvertOptions& o, const Model& m, ConvertResult& r) {
    PLAB_CHECK(fs::path(o.out).extension() == ".gguf",
               "GGUF output '" << o.out << "' should end in .gguf (e.g. model.gguf)");
    fs::create_directories(fs::absolute(o.out).parent_path());
    r.f16 = o.outtype == "f16";
    r.tokenizer_not_saved =
        save_gguf_model(m, o.out, r.f16 ? GgufWeightType::kF16 : GgufWeightType::kF32);
    r.tokenizer_kind = m.tokenizer->kind();
}

void convert_to_llama2c(const ConvertOptions& o, const Model& m, ConvertResult& r) {
    PLAB_CHECK(o.outtype == "f32", "--outtype applies to --to gguf only");
    PLAB_CHECK(fs::path(o.out).extension() == ".bin",
               "llama2.c output '" << o.out << "' should end in .bin (e.g. model.bin)");
    PLAB_CHECK(dynamic_cast<const HfTokenizer*>(m.tokenizer.get()) == nullptr,
               "a llama2.c checkpoint carries a tokenizer.bin or tokenizer.bpe beside it, and "
               "this model's tokenizer is a tokenizer.json ("
                   << m.tokenizer->kind() << "); convert to safetensors or .gguf instead");
    r.out_dir = fs::absolute(o.out).parent_path();
    r.header_version = o.header == "v1" ? 1 : 0;
    r.tokenizer = save_tokenizer(*m.tokenizer, o.in, r.out_dir);
    write_llama2c_checkpoint(m.weights, o.out, r.header_version);
}

ConvertResult compute_convert(const ConvertOptions& o) {
    const Model m = load_model(o.in);
    ConvertResult r;
    r.to = o.to;
    r.out = o.out;
    r.tied = m.weights.config.tied_embeddings;
    if (o.to == "safetensors") {
        convert_to_safetensors(o, m, r);
    } else if (o.to == "gguf") {
        convert_to_gguf(o, m, r);
    } else {
        convert_to_llama2c(o, m, r);
    }
    return r;
}

void print_convert_text(const ConvertResult& r) {
    if (r.to == "safetensors") {
        std::printf(
            "wrote %s/config.json + model.safetensors (half-split RoPE rows, tokenizer %s)\n",
            r.out.c_str(), r.tokenizer.c_str());
        return;
    }
    const char* classifier = r.tied ? "shared" : "separate";
    if (r.to == "gguf") {
        const std::string tokenizer = r.tokenizer_not_saved.empty()
                                          ? "in the metadata (" + r.tokenizer_kind + ")"
                                          : "not written: " + r.tokenizer_not_saved;
        std::printf("wrote %s (GGUF v3, %s, interleaved RoPE rows, %s classifier); tokenizer: %s\n",
                    r.out.c_str(), r.f16 ? "F16 matrices, F32 norms" : "F32", classifier,
                    tokenizer.c_str());
        return;
    }
    const std::string tokenizer = r.tokenizer == "byte" || r.tokenizer == "ids"
                                      ? "none written (load it back with prompts as token ids)"
                                      : (r.out_dir / r.tokenizer).string();
    std::printf("wrote %s (llama2.c %s, interleaved RoPE rows, %s classifier); tokenizer: %s\n",
                r.out.c_str(),
                r.header_version == 0 ? "legacy header, the one llama2.c's run.c reads"
                                      : "v1 \"ak42\" header, which llama2.c's run.c does not read",
                classifier, tokenizer.c_str());
}

void run(const ConvertOptions& o) {
    print_convert_text(compute_convert(o));
}

}  // namespace

void add_convert_command(CLI::App& app) {
    auto o = std::make_shared<ConvertOptions>();
    CLI::App* cmd = app.add_subcommand(
        "convert", "convert a model between safetensors (HF Llama), llama2.c .bin and GGUF");
    cmd->add_option("in", o->in,
                    "input: a model directory, config.json/model.safetensors, a .bin or a .gguf")
        ->required();
    cmd->add_option(
           "out", o->out,
           "output: a directory (safetensors), a .bin file (llama2c) or a .gguf file (gguf)")
        ->required();
    cmd->add_option("--to", o->to, "target format")
        ->required()
        ->check(CLI::IsMember({"safetensors", "llama2c", "gguf"}));
    cmd->add_option("--header", o->header,
                    "llama2.c header: legacy (7 int32, what llama2.c's run.c reads; the default) "
                    "or v1 (export.py --version 1, magic \"ak42\", 256 bytes)")
        ->check(CLI::IsMember({"legacy", "v1"}))
        ->capture_default_str();
    cmd->add_option("--outtype", o->outtype,
                    "GGUF weight type: f32, or f16 (matrices; norms stay f32, as llama.cpp's "
                    "converter writes them)")
        ->check(CLI::IsMember({"f32", "f16"}))
        ->capture_default_str();
    cmd->callback([o] { run(*o); });
}

}  // namespace plab::cli
