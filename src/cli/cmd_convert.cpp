// `plab convert IN OUT --to safetensors|llama2c`: one model, another file format.
//
// What it teaches: formats differ in more than bytes. A llama2.c .bin stores
// q/k rows for the *interleaved* RoPE pairing and implies head_dim = D/H,
// rope_theta 10000 and eps 1e-5; a Hugging Face safetensors directory stores
// the *half-split* pairing with the config spelled out. Converting permutes
// the wq/wk rows (src/model/rope_permute.h) so the logits stay the same, and
// refuses configs the target cannot express. The tokenizer travels with the
// weights when the target can hold it (tokenizer.bpe / tokenizer.bin beside
// the output).
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/common.h"
#include "core/error.h"
#include "model/llama2c.h"
#include "model/model_io.h"
#include "model/tokenizer_bpe.h"

namespace plab::cli {
namespace {
namespace fs = std::filesystem;

struct ConvertOptions {
    std::string in;
    std::string out;
    std::string to;
    int version = 1;
};

// Writes the model's tokenizer into `dir` and returns the name config.json should use.
std::string save_tokenizer(const Tokenizer& tok, const fs::path& dir) {
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

void run(const ConvertOptions& o) {
    const Model m = load_model(o.in);
    if (o.to == "safetensors") {
        fs::create_directories(o.out);
        const std::string tok_name = save_tokenizer(*m.tokenizer, o.out);
        save_model(m.weights, tok_name, o.out);
        std::printf(
            "wrote %s/config.json + model.safetensors (half-split RoPE rows, tokenizer %s)\n",
            o.out.c_str(), tok_name.c_str());
        return;
    }
    PLAB_CHECK(fs::path(o.out).extension() == ".bin",
               "llama2.c output '" << o.out << "' should end in .bin (e.g. model.bin)");
    const fs::path dir = fs::absolute(o.out).parent_path();
    fs::create_directories(dir);
    write_llama2c_checkpoint(m.weights, o.out, o.version);
    const std::string tok_name = save_tokenizer(*m.tokenizer, dir);
    std::printf(
        "wrote %s (llama2.c version %d, interleaved RoPE rows, %s classifier); tokenizer: %s\n",
        o.out.c_str(), o.version, m.weights.config.tied_embeddings ? "shared" : "separate",
        tok_name == "byte" || tok_name == "ids"
            ? "none written (load it back with prompts as token ids)"
            : (dir / tok_name).string().c_str());
}

}  // namespace

void add_convert_command(CLI::App& app) {
    auto o = std::make_shared<ConvertOptions>();
    CLI::App* cmd = app.add_subcommand(
        "convert", "convert a model between safetensors (HF Llama) and llama2.c .bin");
    cmd->add_option("in", o->in,
                    "input: a model directory, config.json/model.safetensors, or a .bin")
        ->required();
    cmd->add_option("out", o->out, "output: a directory (safetensors) or a .bin file (llama2c)")
        ->required();
    cmd->add_option("--to", o->to, "target format")
        ->required()
        ->check(CLI::IsMember({"safetensors", "llama2c"}));
    cmd->add_option("--version", o->version, "llama2.c version: 0 (legacy header) or 1 (\"ak42\")")
        ->check(CLI::IsMember({0, 1}));
    cmd->callback([o] { run(*o); });
}

}  // namespace plab::cli
