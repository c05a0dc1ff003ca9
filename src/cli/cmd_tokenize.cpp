// `plab tokenize "text"`: the tokens a model reads for a text, each with its
// id, its bytes and the bytes of the text it was made from (lesson 5: how many
// tokens a prompt is; why a Russian word costs more tokens than an English one).
//
// What it teaches: the model never sees the text. A tokenizer trained on
// English keeps English words whole and falls back to single bytes for what it
// never saw: two tokens for each Cyrillic letter of a byte-level BPE trained on
// English stories. The spans come from Tokenizer::encode_with_spans (one place,
// model/tokenizers/tokenizer_spans.cpp); this file only prints them.
// Left out: display width of wide characters (CJK, emoji take two columns in
// a terminal; the table counts characters).
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli/common.h"
#include "core/error.h"
#include "model/tokenizers/tokenizer_hf_unicode.h"
#include "model/tokenizers/tokenizer_source.h"

namespace plab::cli {
namespace {

struct TokenizeOptions {
    std::string model;
    std::string tokenizer;
    std::string text;
    std::string file;
    bool no_bos = false;
    bool json = false;
    CLI::Option* text_option = nullptr;
};

// Bytes as a reader sees them (a tab as \t too): tokenizer_hf_unicode.h.
std::string printable_bytes(std::string_view s) {
    return hf::printable_bytes(s, true);
}

// Characters of a text (an ill-formed byte counts as one, as tokenizer.json reads it).
std::size_t count_chars(std::string_view s) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < s.size(); i += hf::utf8_at(s, i).len) ++n;
    return n;
}

// `s` padded with spaces to `width` characters.
std::string pad(const std::string& s, std::size_t width) {
    const std::size_t n = count_chars(s);
    return n >= width ? s : s + std::string(width - n, ' ');
}

// One token of the text: its id, how the tokenizer shows it, the bytes it
// decodes to, and the bytes [start, end) of the text it was made from.
struct TokenizeToken {
    TokenSpan span;
    std::string text;   // Tokenizer::token_text
    std::string bytes;  // Tokenizer::token_bytes
};

// Everything `plab tokenize` shows, text or JSON.
struct TokenizeResult {
    std::string tokenizer;  // Tokenizer::kind()
    int vocab_size = 0;
    std::string text;  // what was tokenized
    std::vector<TokenizeToken> tokens;
    std::size_t bos = 0;  // tokens put before the text (a BOS is no part of it)
};

// The text: given, or read from --prompt-file.
std::string tokenize_input_text(const TokenizeOptions& o) {
    const bool text_given = o.text_option != nullptr && o.text_option->count() > 0;
    PLAB_CHECK(text_given != !o.file.empty(),
               (text_given ? "give the text one way: as text or --prompt-file, not both"
                           : "give the text to tokenize, e.g. plab tokenize \"Once upon a "
                             "time\" (or --prompt-file FILE)"));
    PLAB_CHECK(o.model.empty() || o.tokenizer.empty(),
               "give --model or --tokenizer, not both (a model folder names its tokenizer)");
    return text_given ? o.text : read_text_file(o.file, "prompt file");
}

TokenizeResult compute_tokenize(const TokenizeOptions& o) {
    TokenizeResult r;
    r.text = tokenize_input_text(o);

    // The tokenizer: a model folder's, or one named alone (no weights read).
    Model model;
    std::unique_ptr<Tokenizer> named;
    if (!o.tokenizer.empty())
        named = open_tokenizer_source(o.tokenizer, 0).tokenizer;
    else
        model = load_model_or_default(o.model);
    const Tokenizer& tok = named ? *named : *model.tokenizer;

    r.tokenizer = tok.kind();
    r.vocab_size = tok.vocab_size();
    for (const TokenSpan& s : tok.encode_with_spans(r.text, !o.no_bos))
        r.tokens.push_back({s, tok.token_text(s.id), tok.token_bytes(s.id)});
    r.bos = tok.encode("", !o.no_bos).size();
    return r;
}

nlohmann::ordered_json tokenize_json(const TokenizeResult& r) {
    // Keys in the documented order: {"id", "text", "bytes", "start", "end"}.
    nlohmann::ordered_json tokens = nlohmann::ordered_json::array();
    for (const TokenizeToken& t : r.tokens) {
        nlohmann::ordered_json bytes = nlohmann::ordered_json::array();
        for (unsigned char b : t.bytes) bytes.push_back(int(b));
        tokens.push_back({{"id", t.span.id},
                          {"text", t.text},
                          {"bytes", bytes},
                          {"start", t.span.start},
                          {"end", t.span.end}});
    }
    return {{"tokens", tokens}};
}

// One row of the table: span, the token as shown, its bytes in hex.
std::string tokenize_row(const TokenizeToken& t, const std::string& text) {
    const TokenSpan& s = t.span;
    const std::string_view covered = std::string_view(text).substr(s.start, s.end - s.start);
    std::string hex;
    for (unsigned char b : t.bytes) {
        char buf[4];
        std::snprintf(buf, sizeof buf, "%s%02X", hex.empty() ? "" : " ", b);
        hex += buf;
    }
    const std::string span = "[" + std::to_string(s.start) + "," + std::to_string(s.end) + ")";
    std::string line =
        pad(span, 9) + " " + pad("'" + printable_bytes(t.text) + "'", 16) + " " + hex;
    // Where the token's bytes are not the text it covers, that text too:
    // SentencePiece's inserted '▁', an added token's stripped spaces, a
    // special token typed in the text (decode() drops it: no bytes).
    if (t.bytes != covered) line += "  (covers '" + printable_bytes(covered) + "')";
    while (!line.empty() && line.back() == ' ') line.pop_back();  // no bytes: no hex
    return line;
}

void print_tokenize_text(const TokenizeResult& r) {
    std::printf("Tokenizer: %s, vocabulary of %d tokens\n", r.tokenizer.c_str(), r.vocab_size);
    std::printf("%6s %7s  %-9s %-16s %s\n", "token", "id", "span", "text", "bytes");
    for (std::size_t k = 0; k < r.tokens.size(); ++k)
        std::printf("%6zu %7d  %s\n", k, r.tokens[k].span.id,
                    tokenize_row(r.tokens[k], r.text).c_str());
    // The summary: tokens for bytes and characters; a BOS is no part of the text.
    const std::size_t n = r.tokens.size();
    const std::size_t from_text = n - r.bos;
    std::printf("%zu %s", n, n == 1 ? "token" : "tokens");
    if (r.bos > 0) std::printf(" (BOS + %zu from the text)", from_text);
    std::printf(" for %zu bytes, %zu characters", r.text.size(), count_chars(r.text));
    if (from_text > 0)
        std::printf(": %.2f bytes a token", double(r.text.size()) / double(from_text));
    std::printf("\n");
}

void run(const TokenizeOptions& o) {
    const TokenizeResult r = compute_tokenize(o);
    if (o.json) {
        // Ill-formed UTF-8 in a token's text (a llama2.c piece) is replaced, not fatal.
        std::cout << tokenize_json(r).dump(2, ' ', false,
                                           nlohmann::ordered_json::error_handler_t::replace)
                  << "\n";
    } else {
        print_tokenize_text(r);
    }
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
    auto o = std::make_shared<TokenizeOptions>();
    CLI::App* cmd = app.add_subcommand(
        "tokenize", "show the tokens of a text: id, bytes and the bytes of the text each covers");
    o->text_option = cmd->add_option("text", o->text, "the text to tokenize");
    cmd->add_option("--prompt-file", o->file, "read the text from this file (at most 16 MiB)");
    add_model_option(cmd, o->model);
    cmd->add_option("--tokenizer", o->tokenizer,
                    "a tokenizer without a model: byte, bpe (the shipped one), or the path of a "
                    "tokenizer.json (or its folder), a *.bpe file or a llama2.c tokenizer.bin");
    cmd->add_flag("--no-bos", o->no_bos, "do not put the BOS token first");
    cmd->add_flag("--json", o->json,
                  "machine-readable: {\"tokens\": [{\"id\", \"text\", \"bytes\", \"start\", "
                  "\"end\"}]}; text: the token as shown, bytes: the byte values it decodes to "
                  "(an array of numbers), [start, end): the bytes of the text it covers");
    cmd->callback([o] { run(*o); });
}

}  // namespace plab::cli
