#include "cli/common.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "runtime/generate.h"

namespace plab::cli {

void PromptOptions::add_to(CLI::App* cmd) {
    // Positional or --prompt TEXT (the viewer's spelling): one option, two names.
    text_option =
        cmd->add_option("prompt,--prompt", text, "prompt text (default: a built-in story opening)");
    file_option = cmd->add_option("--prompt-file", file,
                                  "read the prompt text from this file (at most 16 MiB)");
    tokens_option =
        cmd->add_option("--tokens", tokens, "token ids instead of text, e.g. 256,72,105");
    cmd->add_flag("--no-bos", no_bos, "do not put the BOS token first");
}

std::string read_text_file(const std::string& path, const std::string& what) {
    PLAB_CHECK(!std::filesystem::is_directory(path),
               what << " " << path << " is a directory; give a text file");
    PLAB_CHECK(std::filesystem::exists(path),
               "cannot read " << what << " " << path << ": no such file; check the path");
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    PLAB_CHECK(f.good(), "cannot read " << what << " " << path);
    // Size first, then one buffer of exactly that size: a huge file is refused
    // before any of it is read (kMaxPromptFileBytes says why the limit is safe).
    const std::streamoff size = f.tellg();
    PLAB_CHECK(size >= 0 && static_cast<std::uint64_t>(size) <= kMaxPromptFileBytes,
               what << " " << path << " is " << size << " bytes; prompt files are "
                    << "limited to " << kMaxPromptFileBytes
                    << " bytes (16 MiB: 16 bytes for each of the 2^20 tokens of the "
                    << "longest max_seq_len a model may have)");
    std::string t(static_cast<std::size_t>(size), '\0');
    f.seekg(0);
    f.read(t.data(), size);
    PLAB_CHECK(f.good() || size == 0, "could not read " << what << " " << path);
    return t;
}

namespace {

bool was_given(const CLI::Option* o) {
    return o != nullptr && o->count() > 0;
}

}  // namespace

bool PromptOptions::given() const {
    return was_given(text_option) || was_given(file_option) || was_given(tokens_option) ||
           !file.empty() || !tokens.empty();
}

std::vector<int32_t> PromptOptions::resolve(const Model& model) const {
    const bool text_given = was_given(text_option);
    const bool file_given = was_given(file_option) || !file.empty();
    const bool tokens_given = was_given(tokens_option) || !tokens.empty();
    PLAB_CHECK(text_given + file_given + tokens_given <= 1,
               "give the prompt one way: text, --prompt-file or --tokens");
    // An empty prompt typed on purpose ("" or --prompt "", e.g. a shell
    // variable that was not set) is a mistake to report, not a request for
    // the built-in prompt: only a prompt left out gets the default.
    PLAB_CHECK(!text_given || !text.empty(),
               "the prompt is empty; give some text, or leave the prompt out for the built-in "
               "story opening");
    PLAB_CHECK(!tokens_given || !tokens.empty(),
               "--tokens is empty; give token ids like 256,72,105, or leave --tokens out for "
               "the built-in story opening");
    PLAB_CHECK(!file_given || !file.empty(),
               "--prompt-file is empty; give the path of a text file");
    std::vector<int32_t> ids;
    const ModelConfig& c = model.weights.config;
    if (tokens_given) {
        for (int id : parse_int_list(tokens, "--tokens")) {
            PLAB_CHECK(id >= 0 && id < c.vocab_size,
                       "--tokens: token id " << id << " is out of range; valid ids are 0.."
                                             << c.vocab_size - 1);
            ids.push_back(id);
        }
    } else {
        std::string t = text;
        if (file_given) {
            t = read_text_file(file, "prompt file");
            PLAB_CHECK(!t.empty(), "prompt file " << file << " is empty; a prompt needs text");
        } else if (t.empty()) {
            t = kDefaultPrompt;
        }
        ids = model.tokenizer->encode(t, !no_bos);
    }
    PLAB_CHECK(!ids.empty(), "empty prompt: prefill needs at least one token");
    PLAB_CHECK(static_cast<int>(ids.size()) <= c.max_seq_len,
               "prompt of " << ids.size() << " tokens is longer than the model's max_seq_len "
                            << c.max_seq_len << "; shorten it");
    return ids;
}

void add_model_option(CLI::App* cmd, std::string& path) {
    cmd->add_option("--model", path,
                    "model: a directory (config.json + model.safetensors), a llama2.c .bin or a "
                    ".gguf file; default: "
                    "$PLAB_MODEL or assets/model");
}

void add_mask_option(CLI::App* cmd, std::string& spec) {
    cmd->add_option("--mask", spec,
                    "attention mask, e.g. causal, window:8, window:8+sink:2, prefix:6, docs:5,7, "
                    "file:m.txt, +alibi, +softcap:30 (grammar: plab mask --help)")
        ->capture_default_str();
}

BoundMask resolve_mask(const std::string& spec, const std::vector<int32_t>& tokens,
                       const Model& model) {
    return make_mask(spec,
                     MaskContext{tokens, model.tokenizer->bos_id(), model.weights.config.n_heads});
}

std::vector<std::string> split_list(const std::string& text) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = text.find(',', start);
        out.push_back(text.substr(start, comma == std::string::npos ? comma : comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

std::vector<int> parse_int_list(const std::string& text, const std::string& what) {
    PLAB_CHECK(!text.empty(), what << ": empty list; expected e.g. 1,2,3");
    std::vector<int> out;
    // split_list keeps empty items ("1,,2", "1,2,"), so a stray comma is
    // reported rather than silently dropped.
    for (const std::string& part : split_list(text)) {
        PLAB_CHECK(!part.empty(), what << ": empty entry in '" << text << "'; expected e.g. 1,2,3");
        int v = 0;
        const auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
        PLAB_CHECK(!part.empty() && ec == std::errc() && p == part.data() + part.size(),
                   what << ": '" << part << "' is not a whole number; expected e.g. 1,2,3");
        out.push_back(v);
    }
    return out;
}

std::vector<float> parse_float_list(const std::string& text, const std::string& what) {
    PLAB_CHECK(!text.empty(), what << ": empty list; expected e.g. 2,4,8,10");
    std::vector<float> out;
    for (const std::string& part : split_list(text)) {
        PLAB_CHECK(!part.empty(),
                   what << ": empty entry in '" << text << "'; expected e.g. 2,4,8,10");
        std::size_t used = 0;
        float v = 0;
        try {
            v = std::stof(part, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        PLAB_CHECK(!part.empty() && used == part.size() && std::isfinite(v),
                   what << ": '" << part << "' is not a finite number; expected e.g. 2,4,8,10");
        out.push_back(v);
    }
    return out;
}

std::string exact(float x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(x));
    return buf;
}

std::string quoted_token(const Tokenizer& tok, int32_t id) {
    return "'" + tok.token_text(id) + "'";
}

// Invalid UTF-8 (a byte-level model can emit half a character) is replaced, not fatal.
void print_json(const nlohmann::json& j) {
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace plab::cli
