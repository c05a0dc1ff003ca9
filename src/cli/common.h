// Helpers shared by the `plab` commands: options every command takes, prompt
// resolution, number lists, printing.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model_io.h"
#include "runtime/mask_grammar.h"

namespace plab::cli {

// The largest prompt file read (16 MiB). A prompt is at most max_seq_len tokens,
// and ModelConfig allows at most 2^20; 16 MiB over 2^20 tokens is 16 bytes per
// token, several times what tokenizers average on text (about 4 bytes per BPE
// token on English). Refusing a larger file up front keeps a 1 GB file from being
// read into memory only to fail the length check after tokenizing.
inline constexpr std::uint64_t kMaxPromptFileBytes = std::uint64_t(16) << 20;

// The whole of a text file of at most kMaxPromptFileBytes; `what` names it in
// the one-line errors ("prompt file", "prompts file"): a directory, a missing
// or unreadable file, a file over the limit.
std::string read_text_file(const std::string& path, const std::string& what);

// Where the prompt comes from: text, a file, or explicit token ids.
struct PromptOptions {
    std::string text;
    std::string file;
    std::string tokens;  // "1,2,3"
    bool no_bos = false;
    // Set by add_to: was each form given, even empty ("" is a mistake to
    // report, never a request for the default prompt)?
    CLI::Option* text_option = nullptr;
    CLI::Option* file_option = nullptr;
    CLI::Option* tokens_option = nullptr;
    void add_to(CLI::App* cmd);
    // Whether any form of the prompt was given on the command line (even empty).
    bool given() const;
    // The token ids, validated against the model (empty or out-of-range ids
    // and prompts longer than max_seq_len are rejected with a clear message).
    std::vector<int32_t> resolve(const Model& model) const;
};

void add_model_option(CLI::App* cmd, std::string& path);

// --mask SPEC (runtime/mask_grammar.h grammar; `plab mask --help`), default causal.
void add_mask_option(CLI::App* cmd, std::string& spec);
// The spec bound to this prompt and model (BOS id for docs:bos, heads for ALiBi).
BoundMask resolve_mask(const std::string& spec, const std::vector<int32_t>& tokens,
                       const Model& model);

// "a,b,c" -> {"a", "b", "c"} (empty parts kept, so callers can reject them).
std::vector<std::string> split_list(const std::string& text);
std::vector<int> parse_int_list(const std::string& text, const std::string& what);
std::vector<float> parse_float_list(const std::string& text, const std::string& what);

// A float with enough digits to identify it exactly (%.9g).
std::string exact(float x);
// Token text for display, quoted: "'the'".
std::string quoted_token(const Tokenizer& tok, int32_t id);

void print_json(const nlohmann::json& j);

// Each command adds itself to the app (src/cli/cmd_*.cpp): its add function is
// declared in the table of commands (commands.cpp), the one list of them.

}  // namespace plab::cli
