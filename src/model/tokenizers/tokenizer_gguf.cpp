// Tokenizers from and to GGUF metadata (tokenizer_gguf.h).
#include "model/tokenizers/tokenizer_gguf.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/error.h"
#include "model/tokenizers/tokenizer_bpe.h"
#include "model/tokenizers/tokenizer_hf.h"
#include "model/tokenizers/tokenizer_hf_split.h"
#include "model/tokenizers/tokenizer_hf_unicode.h"
#include "model/tokenizers/tokenizer_ids.h"
#include "model/tokenizers/tokenizer_llama2c.h"

namespace plab {
namespace {

constexpr const char* kSpace = "\xE2\x96\x81";  // U+2581 '▁', SentencePiece's space
enum TokenType {
    kNormal = 1,
    kUnknown = 2,
    kControl = 3,
    kUserDefined = 4,
    kUnused = 5,
    kByte = 6
};

std::vector<std::string> strings_of(const gguf::File& f, const std::string& key,
                                    const std::string& where) {
    const gguf::Array& a = f.get_array(key);
    std::vector<std::string> out;
    out.reserve(a.size());
    for (const gguf::Value& v : a) {
        PLAB_CHECK(v.type == gguf::ValueType::kString,
                   where << ": " << key << " must be an array of strings");
        out.push_back(std::get<std::string>(v.v));
    }
    return out;
}

// Optional per-token numbers (scores, token types): empty when the key is absent.
template <typename T>
std::vector<T> numbers_of(const gguf::File& f, const std::string& key, std::size_t n,
                          const std::string& where) {
    if (f.find(key) == nullptr) return {};
    const gguf::Array& a = f.get_array(key);
    PLAB_CHECK(a.size() == n, where << ": " << key << " has " << a.size() << " entries for " << n
                                    << " tokens; there must be one per token");
    std::vector<T> out;
    out.reserve(n);
    for (const gguf::Value& v : a) {
        if (const auto* d = std::get_if<double>(&v.v))
            out.push_back(static_cast<T>(*d));
        else if (const auto* i = std::get_if<std::int64_t>(&v.v))
            out.push_back(static_cast<T>(*i));
        else if (const auto* u = std::get_if<std::uint64_t>(&v.v))
            out.push_back(static_cast<T>(*u));
        else
            PLAB_CHECK(false, where << ": " << key << " must be an array of numbers");
    }
    return out;
}

int optional_id(const gguf::File& f, const std::string& key, int fallback, std::size_t n,
                const std::string& where) {
    if (f.find(key) == nullptr) return fallback;
    const std::int64_t id = f.get_int(key);
    PLAB_CHECK(id >= 0 && std::uint64_t(id) < n,
               where << ": " << key << " = " << id << " is not a token id (0.." << n - 1 << ")");
    return static_cast<int>(id);
}

bool optional_bool(const gguf::File& f, const std::string& key, bool fallback) {
    return f.find(key) == nullptr ? fallback : f.get_bool(key);
}

std::string byte_token(int b) {
    char s[8];
    std::snprintf(s, sizeof s, "<0x%02X>", b);
    return s;
}

std::unique_ptr<Tokenizer> llama_spm(const gguf::File& f, const std::string& where) {
    std::vector<std::string> tokens = strings_of(f, "tokenizer.ggml.tokens", where);
    PLAB_CHECK(f.find("tokenizer.ggml.scores") != nullptr,
               where << ": tokenizer.ggml.model is \"llama\" but tokenizer.ggml.scores is "
                        "missing; a SentencePiece vocabulary has a score per token");
    std::vector<float> scores = numbers_of<float>(f, "tokenizer.ggml.scores", tokens.size(), where);
    const std::size_t n = tokens.size();
    // llama2.c's rule (Llama2cTokenizer) assumes Llama 2's layout; say so when it differs.
    const bool layout = n >= std::size_t(Llama2cTokenizer::kMinVocab) &&
                        optional_id(f, "tokenizer.ggml.bos_token_id", 1, n, where) == 1 &&
                        optional_id(f, "tokenizer.ggml.eos_token_id", 2, n, where) == 2;
    std::size_t first_bad_byte = 256;
    for (int b = 0; b < 256 && layout; ++b) {
        if (tokens[std::size_t(Llama2cTokenizer::kFirstByteToken + b)] != byte_token(b)) {
            first_bad_byte = std::size_t(b);
            break;
        }
    }
    PLAB_CHECK(layout && first_bad_byte == 256,
               where << ": this \"llama\" vocabulary does not have Llama 2's layout (<unk> <s> "
                        "</s> at 0, 1, 2, then <0x00>..<0xFF> at 3..258"
                     << (first_bad_byte < 256 ? ", but id " + std::to_string(3 + first_bad_byte) +
                                                    " is '" + tokens[3 + first_bad_byte] + "'"
                                              : std::string())
                     << "); plab's SentencePiece encoder (llama2.c's rule) needs it");
    PLAB_CHECK(optional_bool(f, "tokenizer.ggml.add_space_prefix", true),
               where << ": tokenizer.ggml.add_space_prefix is false; plab's SentencePiece "
                        "encoder always adds the dummy-prefix space (llama2.c's rule)");
    // llama2.c spells <s> and </s> "\n<s>\n" and "\n</s>\n" in tokenizer.bin, so no
    // merge of typed text ever reaches them; GGUF spells them "<s>", "</s>". Read
    // back in llama2.c's spelling, a GGUF and the .bin it came from encode alike.
    for (int id : {Llama2cTokenizer::kBos, Llama2cTokenizer::kEos}) {
        std::string& t = tokens[std::size_t(id)];
        if (t == "<s>" || t == "</s>") t = "\n" + t + "\n";
    }
    // llama2.c stores SentencePiece's '▁' as a plain space; byte tokens stay as they are.
    for (std::string& t : tokens) {
        std::string out;
        for (std::size_t i = 0; i < t.size();) {
            if (t.compare(i, 3, kSpace) == 0) {
                out += ' ';
                i += 3;
            } else {
                out += t[i++];
            }
        }
        t = std::move(out);
    }
    return std::make_unique<Llama2cTokenizer>(std::move(tokens), std::move(scores));
}

// GGUF strings are UTF-8 (docs/gguf.md); a byte-level vocabulary spells every
// byte with a printable character, so an ill-formed one is a broken file.
void require_utf8(const std::vector<std::string>& items, const char* key,
                  const std::string& where) {
    for (std::size_t i = 0; i < items.size(); ++i) {
        for (std::size_t at = 0; at < items[i].size();) {
            const hf::Utf8Char c = hf::utf8_at(items[i], at);
            PLAB_CHECK(c.valid, where << ": " << key << "[" << i << "] is not valid UTF-8 (byte "
                                      << at << "); GGUF strings are UTF-8");
            at += c.len;
        }
    }
}

// The tokenizer.json that a byte-level "gpt2" vocabulary means, for HfTokenizer.
std::unique_ptr<Tokenizer> gpt2_bpe(const gguf::File& f, const std::string& pre,
                                    const std::string& where) {
    using Json = nlohmann::ordered_json;
    const std::vector<std::string> tokens = strings_of(f, "tokenizer.ggml.tokens", where);
    require_utf8(tokens, "tokenizer.ggml.tokens", where);
    std::vector<std::string> merges;
    if (f.find("tokenizer.ggml.merges") != nullptr)
        merges = strings_of(f, "tokenizer.ggml.merges", where);
    require_utf8(merges, "tokenizer.ggml.merges", where);
    const std::vector<int> types =
        numbers_of<int>(f, "tokenizer.ggml.token_type", tokens.size(), where);
    Json vocab = Json::object(), added = Json::array();
    for (std::size_t id = 0; id < tokens.size(); ++id) {
        const int type = types.empty() ? kNormal : types[id];
        if (type == kControl || type == kUserDefined) {
            added.push_back({{"id", id},
                             {"content", tokens[id]},
                             {"single_word", false},
                             {"lstrip", false},
                             {"rstrip", false},
                             {"normalized", false},
                             {"special", type == kControl}});
        } else {
            vocab[tokens[id]] = id;
        }
    }
    Json pre_tokenizer;
    const Json byte_level = {{"type", "ByteLevel"},
                             {"add_prefix_space", false},
                             {"trim_offsets", true},
                             {"use_regex", pre == "gpt-2"}};
    if (pre == "gpt-2") {
        pre_tokenizer = byte_level;
    } else {
        const auto pattern = pre == "qwen2" ? hf::SplitPattern::kQwen2 : hf::SplitPattern::kLlama3;
        pre_tokenizer = {{"type", "Sequence"},
                         {"pretokenizers",
                          {{{"type", "Split"},
                            {"pattern", {{"Regex", hf::split_pattern_regex(pattern)}}},
                            {"behavior", "Isolated"},
                            {"invert", false}},
                           byte_level}}};
    }
    const Json json = {{"added_tokens", added},
                       {"pre_tokenizer", pre_tokenizer},
                       {"decoder", {{"type", "ByteLevel"}}},
                       {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", Json(merges)}}}};
    Json config = Json::object();
    const int bos = optional_id(f, "tokenizer.ggml.bos_token_id", -1, tokens.size(), where);
    const int eos = optional_id(f, "tokenizer.ggml.eos_token_id", -1, tokens.size(), where);
    if (bos >= 0) config["bos_token"] = tokens[std::size_t(bos)];
    if (eos >= 0) config["eos_token"] = tokens[std::size_t(eos)];
    config["add_bos_token"] = optional_bool(f, "tokenizer.ggml.add_bos_token", false);
    return HfTokenizer::parse(json.dump(), config.dump(), where + " (GGUF tokenizer.ggml.*)");
}

// The shipped model's BPE: byte-level tokens, merges by rank, plab's own split.
std::unique_ptr<Tokenizer> plab_bpe(const gguf::File& f, const std::string& where) {
    const std::vector<std::string> tokens = strings_of(f, "tokenizer.ggml.tokens", where);
    const std::vector<std::string> merges = strings_of(f, "tokenizer.ggml.merges", where);
    std::unordered_map<std::string, int32_t> id_of;
    for (std::size_t i = 0; i < tokens.size(); ++i)
        id_of.emplace(tokens[i], static_cast<int32_t>(i));
    std::vector<std::pair<int32_t, int32_t>> pairs;
    for (const std::string& m : merges) {
        const auto sp = m.find(' ');
        auto l = id_of.find(m.substr(0, sp)), r = id_of.find(sp == m.npos ? "" : m.substr(sp + 1));
        PLAB_CHECK(sp != m.npos && l != id_of.end() && r != id_of.end(),
                   where << ": merge '" << m << "' does not name two tokens of the vocabulary");
        pairs.emplace_back(l->second, r->second);
    }
    auto t = std::make_unique<BpeTokenizer>(std::move(pairs));
    PLAB_CHECK(t->vocab_size() == static_cast<int>(tokens.size()),
               where << ": a plab-bpe vocabulary is 258 + merges tokens; this one has "
                     << tokens.size() << " tokens and " << merges.size() << " merges");
    return t;
}

// GPT-2's byte characters for a token's bytes ("Ġthe" for " the").
std::string byte_level_text(const std::string& bytes) {
    static const auto chars = hf::gpt2_byte_chars();
    std::string s;
    for (unsigned char b : bytes) s += hf::utf8_encode(chars[b]);
    return s;
}

// GGUF's "none" says only that the file has no vocabulary; this key, which
// llama.cpp ignores, says which of plab's vocabulary-free tokenizers it was.
constexpr const char* kPlabTokenizerKey = "plab.tokenizer";

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_from_gguf(const gguf::File& f, int vocab_size,
                                               const std::string& where) {
    const std::string model = f.find("tokenizer.ggml.model") != nullptr
                                  ? f.get_string("tokenizer.ggml.model")
                                  : std::string("none");
    std::unique_ptr<Tokenizer> t;
    if (model == "none" || model == "no_vocab") {
        // No vocabulary in the file. plab writes which of its two tokenizers
        // without one it was (kPlabTokenizerKey); a file from elsewhere gets
        // bytes when its vocabulary is exactly the byte tokenizer's, else ids.
        const std::string plab_kind =
            f.find(kPlabTokenizerKey) != nullptr ? f.get_string(kPlabTokenizerKey) : std::string();
        PLAB_CHECK(plab_kind.empty() || plab_kind == "byte" || plab_kind == "ids",
                   where << ": " << kPlabTokenizerKey << " is '" << plab_kind
                         << "'; plab writes \"byte\" or \"ids\" there");
        const bool bytes = plab_kind == "byte" ||
                           (plab_kind.empty() && vocab_size == ByteTokenizer().vocab_size());
        if (!bytes) return std::make_unique<IdTokenizer>(vocab_size, -1, -1);
        PLAB_CHECK(vocab_size >= ByteTokenizer().vocab_size(),
                   where << ": the byte tokenizer needs " << ByteTokenizer().vocab_size()
                         << " tokens but the model's vocabulary is " << vocab_size);
        return std::make_unique<ByteTokenizer>();
    } else if (model == "llama") {
        t = llama_spm(f, where);
    } else if (model == "gpt2") {
        const std::string pre = f.find("tokenizer.ggml.pre") != nullptr
                                    ? f.get_string("tokenizer.ggml.pre")
                                    : std::string("default");
        if (pre == "plab-bpe") {
            t = plab_bpe(f, where);
        } else {
            PLAB_CHECK(pre == "gpt-2" || pre == "llama-bpe" || pre == "llama3" || pre == "qwen2",
                       where << ": tokenizer.ggml.pre is '" << pre
                             << "'; plab reads the byte-level pre-tokenizers gpt-2, llama-bpe "
                                "(Llama 3), qwen2 and plab-bpe");
            t = gpt2_bpe(f, pre, where);
        }
    } else {
        PLAB_CHECK(false, where << ": tokenizer.ggml.model is '" << model
                                << "'; plab reads \"llama\" (SentencePiece), \"gpt2\" "
                                   "(byte-level BPE) and \"none\"");
    }
    PLAB_CHECK(t->vocab_size() <= vocab_size, where << ": the tokenizer has " << t->vocab_size()
                                                    << " tokens but the model's "
                                                    << "vocabulary is " << vocab_size);
    return t;
}

std::vector<std::pair<std::string, gguf::Value>> tokenizer_to_gguf(const Tokenizer& tok,
                                                                   std::string* why) {
    std::vector<std::pair<std::string, gguf::Value>> kv;
    if (const auto* l2c = dynamic_cast<const Llama2cTokenizer*>(&tok)) {
        std::vector<std::string> tokens;
        std::vector<float> scores;
        std::vector<std::int32_t> types;
        for (int id = 0; id < l2c->vocab_size(); ++id) {
            std::string s;
            const std::string& piece = l2c->piece(id);
            // <s> and </s> as SentencePiece and llama.cpp spell them (not llama2.c's "\n<s>\n").
            const bool special = id == Llama2cTokenizer::kBos || id == Llama2cTokenizer::kEos;
            if (special && piece.size() > 2 && piece.front() == '\n' && piece.back() == '\n') {
                s = piece.substr(1, piece.size() - 2);
            } else {
                for (char c : piece) s += c == ' ' ? std::string(kSpace) : std::string(1, c);
            }
            tokens.push_back(std::move(s));
            scores.push_back(l2c->score(id));
            types.push_back(id == 0                                        ? kUnknown
                            : id < Llama2cTokenizer::kFirstByteToken       ? kControl
                            : id < Llama2cTokenizer::kFirstByteToken + 256 ? kByte
                                                                           : kNormal);
        }
        kv.emplace_back("tokenizer.ggml.model", gguf::make_string("llama"));
        kv.emplace_back("tokenizer.ggml.tokens", gguf::make_string_array(std::move(tokens)));
        kv.emplace_back("tokenizer.ggml.scores", gguf::make_f32_array(scores));
        kv.emplace_back("tokenizer.ggml.token_type", gguf::make_i32_array(types));
        kv.emplace_back("tokenizer.ggml.bos_token_id", gguf::make_u32(Llama2cTokenizer::kBos));
        kv.emplace_back("tokenizer.ggml.eos_token_id", gguf::make_u32(Llama2cTokenizer::kEos));
        kv.emplace_back("tokenizer.ggml.unknown_token_id", gguf::make_u32(0));
        kv.emplace_back("tokenizer.ggml.add_bos_token", gguf::make_bool(true));
        return kv;
    }
    if (const auto* bpe = dynamic_cast<const BpeTokenizer*>(&tok)) {
        std::vector<std::string> tokens, merges;
        std::vector<std::int32_t> types;
        for (int id = 0; id < bpe->vocab_size(); ++id) {
            const bool special = id == BpeTokenizer::kBos || id == BpeTokenizer::kEos;
            tokens.push_back(special ? (id == BpeTokenizer::kBos ? "<bos>" : "<eos>")
                                     : byte_level_text(bpe->token_bytes(id)));
            types.push_back(special ? kControl : kNormal);
        }
        for (const auto& [l, r] : bpe->merges())
            merges.push_back(tokens[std::size_t(l)] + " " + tokens[std::size_t(r)]);
        kv.emplace_back("tokenizer.ggml.model", gguf::make_string("gpt2"));
        // Not a pre-tokenizer llama.cpp knows: its loader refuses the tokenizer
        // (the weights still load there); plab reads it back as the same BpeTokenizer.
        kv.emplace_back("tokenizer.ggml.pre", gguf::make_string("plab-bpe"));
        kv.emplace_back("tokenizer.ggml.tokens", gguf::make_string_array(std::move(tokens)));
        kv.emplace_back("tokenizer.ggml.token_type", gguf::make_i32_array(types));
        kv.emplace_back("tokenizer.ggml.merges", gguf::make_string_array(std::move(merges)));
        kv.emplace_back("tokenizer.ggml.bos_token_id", gguf::make_u32(BpeTokenizer::kBos));
        kv.emplace_back("tokenizer.ggml.eos_token_id", gguf::make_u32(BpeTokenizer::kEos));
        kv.emplace_back("tokenizer.ggml.add_bos_token", gguf::make_bool(true));
        return kv;
    }
    if (const auto* hf = dynamic_cast<const HfTokenizer*>(&tok)) {
        // The keys convert_hf_to_gguf.py's _set_vocab_gpt2 writes.
        const std::optional<HfTokenizer::GgufForm> form = hf->gguf_form(why);
        if (!form) return {};
        std::vector<std::string> tokens;
        for (int id = 0; id < hf->vocab_size(); ++id) tokens.push_back(hf->token_string(id));
        kv.emplace_back("tokenizer.ggml.model", gguf::make_string("gpt2"));
        kv.emplace_back("tokenizer.ggml.pre", gguf::make_string(form->pre));
        kv.emplace_back("tokenizer.ggml.tokens", gguf::make_string_array(std::move(tokens)));
        kv.emplace_back("tokenizer.ggml.token_type", gguf::make_i32_array(form->token_types));
        kv.emplace_back("tokenizer.ggml.merges", gguf::make_string_array(form->merges));
        if (hf->bos_id() >= 0)
            kv.emplace_back("tokenizer.ggml.bos_token_id", gguf::make_u32(hf->bos_id()));
        if (hf->eos_id() >= 0)
            kv.emplace_back("tokenizer.ggml.eos_token_id", gguf::make_u32(hf->eos_id()));
        kv.emplace_back("tokenizer.ggml.add_bos_token", gguf::make_bool(form->add_bos));
        return kv;
    }
    if (tok.kind() == "byte" || tok.kind() == "ids") {
        kv.emplace_back("tokenizer.ggml.model", gguf::make_string("none"));
        kv.emplace_back(kPlabTokenizerKey, gguf::make_string(tok.kind()));  // read back as it was
        return kv;
    }
    *why = "a " + tok.kind() +
           " tokenizer is not written to GGUF by plab (llama2.c, plab-bpe, byte and ids are)";
    return {};
}

}  // namespace plab
