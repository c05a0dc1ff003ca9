// Reading and checking a Hugging Face tokenizer.json (+ tokenizer_config.json)
// into an HfTokenizer (tokenizer_hf.h). Every refusal is one line: the JSON
// path of what is wrong, and what a valid file has there.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "model/tokenizers/tokenizer_hf.h"
#include "model/tokenizers/tokenizer_hf_unicode.h"

namespace plab {
namespace {

using Json = nlohmann::json;
constexpr const char* kMetaspace = "\xE2\x96\x81";  // U+2581 '▁', SentencePiece's space

std::string text_or_json(const Json& j) {
    return j.is_string() ? j.get<std::string>() : j.dump();
}

std::string shorten(const std::string& s) {
    return s.size() <= 40 ? s : s.substr(0, 40) + "...";
}

}  // namespace

// A friend of HfTokenizer: fills its private fields from the parsed JSON.
struct HfTokenizerLoader {
    HfTokenizer& t;
    std::string where;

    const Json& member(const Json& obj, const char* key, const std::string& path) {
        PLAB_CHECK(obj.is_object() && obj.contains(key),
                   where << ": " << path << " has no \"" << key << "\"");
        return obj.at(key);
    }
    bool flag(const Json& obj, const char* key, bool fallback, const std::string& path) {
        if (!obj.contains(key) || obj.at(key).is_null()) return fallback;
        PLAB_CHECK(obj.at(key).is_boolean(),
                   where << ": " << path << "." << key << " must be true or false");
        return obj.at(key).get<bool>();
    }
    std::string string_of(const Json& obj, const char* key, const std::string& path) {
        const Json& v = member(obj, key, path);
        PLAB_CHECK(v.is_string(), where << ": " << path << "." << key << " must be a string, not "
                                        << shorten(v.dump()));
        return v.get<std::string>();
    }
    std::string type_of(const Json& obj, const std::string& path) {
        PLAB_CHECK(obj.is_object(), where << ": " << path << " must be an object with a \"type\"");
        return string_of(obj, "type", path);
    }

    int32_t id_of(const std::string& token, const std::string& what) {
        auto it = t.vocab_.find(token);
        if (it != t.vocab_.end()) return it->second;
        for (const auto& a : t.added_)
            if (a.content == token) return a.id;
        PLAB_CHECK(false, where << ": " << what << " '" << shorten(token)
                                << "' is not a token of model.vocab or added_tokens");
        return -1;
    }

    void read_vocab_and_added(const Json& model, const Json& root) {
        const Json& vocab = member(model, "vocab", "model");
        PLAB_CHECK(vocab.is_object(), where << ": model.vocab must be an object {\"token\": id}");
        PLAB_CHECK(vocab.size() <= std::size_t(HfTokenizer::kMaxVocab),
                   where << ": model.vocab has " << vocab.size() << " tokens, more than the "
                         << HfTokenizer::kMaxVocab << " allowed");
        // added_tokens may name ids beyond model.vocab (Llama 3's 128000..128255).
        std::vector<HfTokenizer::AddedToken> added;
        if (root.contains("added_tokens") && !root.at("added_tokens").is_null()) {
            const Json& list = root.at("added_tokens");
            PLAB_CHECK(list.is_array() && list.size() <= std::size_t(HfTokenizer::kMaxVocab),
                       where << ": added_tokens must be a list of {\"id\", \"content\", ...}");
            for (std::size_t k = 0; k < list.size(); ++k) {
                const std::string path = "added_tokens[" + std::to_string(k) + "]";
                const Json& a = list[k];
                const Json& id = member(a, "id", path);
                PLAB_CHECK(id.is_number_integer() && id.get<std::int64_t>() >= 0 &&
                               id.get<std::int64_t>() < HfTokenizer::kMaxVocab,
                           where << ": " << path << ".id must be a whole number in 0.."
                                 << HfTokenizer::kMaxVocab - 1 << ", not " << shorten(id.dump()));
                const std::string content = string_of(a, "content", path);
                PLAB_CHECK(!content.empty() && content.size() <= HfTokenizer::kMaxTokenBytes,
                           where << ": " << path << ".content must be 1.."
                                 << HfTokenizer::kMaxTokenBytes << " bytes");
                PLAB_CHECK(!flag(a, "single_word", false, path),
                           where << ": " << path << " ('" << shorten(content)
                                 << "') has single_word: true, which plab does not implement; "
                                    "only single_word: false is read");
                added.push_back({content, static_cast<int32_t>(id.get<std::int64_t>()),
                                 flag(a, "lstrip", false, path), flag(a, "rstrip", false, path),
                                 flag(a, "normalized", false, path),
                                 flag(a, "special", false, path)});
            }
        }
        // Ids: every id 0..V-1 names exactly one token, of model.vocab or added.
        std::vector<int32_t> in_vocab;
        in_vocab.reserve(vocab.size());
        std::size_t extra = 0;
        for (const auto& a : added) {
            const bool known = vocab.contains(a.content) &&
                               vocab.at(a.content).is_number_integer() &&
                               vocab.at(a.content).get<std::int64_t>() == a.id;
            if (!known) ++extra;
        }
        const std::size_t v = vocab.size() + extra;
        PLAB_CHECK(v >= 1, where << ": model.vocab is empty; a BPE vocabulary has tokens");
        t.tokens_.assign(v, std::string());
        std::vector<char> taken(v, 0);
        for (const auto& [token, idj] : vocab.items()) {
            PLAB_CHECK(idj.is_number_integer(), where << ": model.vocab['" << shorten(token)
                                                      << "'] must be a whole-number id, not "
                                                      << shorten(idj.dump()));
            const std::int64_t id = idj.get<std::int64_t>();
            PLAB_CHECK(id >= 0 && std::size_t(id) < v, where << ": model.vocab['" << shorten(token)
                                                             << "'] = " << id
                                                             << " is out of range; with " << v
                                                             << " tokens the ids are 0.." << v - 1);
            PLAB_CHECK(!taken[std::size_t(id)],
                       where << ": model.vocab gives id " << id << " to both '"
                             << shorten(t.tokens_[std::size_t(id)]) << "' and '" << shorten(token)
                             << "'; each id must name one token");
            PLAB_CHECK(token.size() <= HfTokenizer::kMaxTokenBytes && !token.empty(),
                       where << ": model.vocab token of id " << id << " must be 1.."
                             << HfTokenizer::kMaxTokenBytes << " bytes");
            taken[std::size_t(id)] = 1;
            t.tokens_[std::size_t(id)] = token;
            t.vocab_.emplace(token, static_cast<int32_t>(id));
        }
        t.is_added_.assign(v, 0);
        for (const auto& a : added) {
            PLAB_CHECK(std::size_t(a.id) < v,
                       where << ": added token '" << shorten(a.content) << "' has id " << a.id
                             << ", out of range; with " << v << " tokens the ids are 0.." << v - 1);
            auto it = t.vocab_.find(a.content);
            if (taken[std::size_t(a.id)]) {
                PLAB_CHECK(t.tokens_[std::size_t(a.id)] == a.content && !t.is_added_[a.id],
                           where << ": added token '" << shorten(a.content) << "' has id " << a.id
                                 << ", which already names '"
                                 << shorten(t.tokens_[std::size_t(a.id)])
                                 << "'; an added token's id is new or names the same string");
            } else {
                PLAB_CHECK(it == t.vocab_.end(),
                           where << ": added token '" << shorten(a.content) << "' has id " << a.id
                                 << " but model.vocab gives it id " << it->second);
            }
            taken[std::size_t(a.id)] = 1;
            t.tokens_[std::size_t(a.id)] = a.content;
            t.is_added_[std::size_t(a.id)] = 1;
        }
        // Longest first: at one position the longest added token wins.
        std::stable_sort(added.begin(), added.end(), [](const auto& x, const auto& y) {
            return x.content.size() > y.content.size();
        });
        for (const auto& a : added)
            t.added_first_byte_[static_cast<unsigned char>(a.content[0])] = true;
        t.added_ = std::move(added);
    }

    void read_merges(const Json& model) {
        const Json& merges = member(model, "merges", "model");
        PLAB_CHECK(merges.is_array(), where << ": model.merges must be a list of \"a b\" strings");
        PLAB_CHECK(merges.size() <= std::size_t(HfTokenizer::kMaxMerges),
                   where << ": model.merges has " << merges.size() << " merges, more than the "
                         << HfTokenizer::kMaxMerges << " allowed");
        for (std::size_t k = 0; k < merges.size(); ++k) {
            const Json& m = merges[k];
            std::string a, b;
            if (m.is_string()) {  // "a b": the classic form, split at its one space
                const std::string s = m.get<std::string>();
                const std::size_t sp = s.find(' ');
                PLAB_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < s.size() &&
                               s.find(' ', sp + 1) == std::string::npos,
                           where << ": model.merges[" << k << "] is '" << shorten(s)
                                 << "'; expected two tokens separated by one space");
                a = s.substr(0, sp), b = s.substr(sp + 1);
            } else {  // ["a", "b"]: the newer form, which allows spaces inside tokens
                PLAB_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
                           where << ": model.merges[" << k << "] is " << shorten(m.dump())
                                 << "; expected \"a b\" or [\"a\", \"b\"]");
                a = m[0].get<std::string>(), b = m[1].get<std::string>();
            }
            auto need = [&](const std::string& s, const char* role) {
                auto it = t.vocab_.find(s);
                PLAB_CHECK(it != t.vocab_.end(),
                           where << ": model.merges[" << k << "] ('" << shorten(a) << "' + '"
                                 << shorten(b) << "') needs " << role << " '" << shorten(s)
                                 << "', which is not in model.vocab; every merge joins two "
                                    "tokens of the vocabulary into a third");
                return it->second;
            };
            const int32_t ia = need(a, "its left token"), ib = need(b, "its right token");
            const int32_t im = need(a + b, "the merged token");
            t.merge_texts_.push_back(a + " " + b);
            PLAB_CHECK(t.merges_.add(ia, ib, im),
                       where << ": model.merges[" << k << "] ('" << shorten(a) << "' + '"
                             << shorten(b) << "') is listed twice; each pair has one rank");
        }
    }

    void read_normalizer(const Json& n, const std::string& path) {
        if (n.is_null()) return;
        const std::string type = type_of(n, path);
        if (type == "Sequence") {
            const Json& list = member(n, "normalizers", path);
            PLAB_CHECK(list.is_array(), where << ": " << path << ".normalizers must be a list");
            for (std::size_t k = 0; k < list.size(); ++k)
                read_normalizer(list[k], path + ".normalizers[" + std::to_string(k) + "]");
        } else if (type == "Prepend") {
            t.normalizer_.push_back(
                {HfTokenizer::NormalizerStep::kPrepend, "", string_of(n, "prepend", path)});
        } else if (type == "Replace") {
            const Json& p = member(n, "pattern", path);
            PLAB_CHECK(p.is_object() && p.contains("String") && p.at("String").is_string() &&
                           !p.at("String").get<std::string>().empty(),
                       where << ": " << path << ".pattern must be {\"String\": \"...\"}; plab "
                             << "does not run Regex replacements");
            t.normalizer_.push_back({HfTokenizer::NormalizerStep::kReplace,
                                     p.at("String").get<std::string>(),
                                     string_of(n, "content", path)});
        } else if (type == "NFC") {
            t.normalizer_.push_back({HfTokenizer::NormalizerStep::kNfc, "", ""});
        } else {
            PLAB_CHECK(false, where << ": " << path << ".type is '" << shorten(type)
                                    << "'; plab reads the normalizers Sequence, Prepend, "
                                       "Replace (String) and NFC");
        }
    }

    void read_pre_tokenizer(const Json& p, const std::string& path) {
        if (p.is_null()) return;
        const std::string type = type_of(p, path);
        using Step = HfTokenizer::PreTokenizerStep;
        Step s{};
        if (type == "Sequence") {
            const Json& list = member(p, "pretokenizers", path);
            PLAB_CHECK(list.is_array(), where << ": " << path << ".pretokenizers must be a list");
            for (std::size_t k = 0; k < list.size(); ++k)
                read_pre_tokenizer(list[k], path + ".pretokenizers[" + std::to_string(k) + "]");
            return;
        } else if (type == "Split") {
            const Json& pat = member(p, "pattern", path);
            PLAB_CHECK(pat.is_object() && pat.contains("Regex") && pat.at("Regex").is_string(),
                       where << ": " << path << ".pattern must be {\"Regex\": \"...\"}");
            const std::string regex = pat.at("Regex").get<std::string>();
            const auto known = hf::split_pattern_from_regex(regex);
            PLAB_CHECK(known.has_value(),
                       where << ": " << path << " splits on the regex '" << shorten(regex)
                             << "', which plab does not know; it reads GPT-2's, Llama 3's and "
                                "Qwen 2's split patterns");
            const Json& behavior = member(p, "behavior", path);
            PLAB_CHECK(behavior == "Isolated" && !flag(p, "invert", false, path),
                       where << ": " << path << " must have \"behavior\": \"Isolated\" and "
                             << "\"invert\": false (each match its own piece), not "
                             << shorten(behavior.dump()));
            s.kind = Step::kSplit;
            s.pattern = *known;
        } else if (type == "ByteLevel") {
            s.kind = Step::kByteLevel;
            s.flag = flag(p, "add_prefix_space", false, path);
            s.use_regex = flag(p, "use_regex", true, path);
        } else if (type == "Metaspace") {
            s.kind = Step::kMetaspace;
            s.replacement = string_of(p, "replacement", path);
            PLAB_CHECK(s.replacement == kMetaspace,
                       where << ": " << path << ".replacement must be \"\u2581\" (U+2581)");
            s.split = flag(p, "split", true, path);
            if (p.contains("prepend_scheme")) {
                const std::string scheme = string_of(p, "prepend_scheme", path);
                PLAB_CHECK(scheme == "always" || scheme == "first" || scheme == "never",
                           where << ": " << path << ".prepend_scheme is '" << shorten(scheme)
                                 << "'; expected \"always\", \"first\" or \"never\"");
                s.scheme = scheme == "always"  ? Step::kAlways
                           : scheme == "first" ? Step::kFirst
                                               : Step::kNever;
            } else {  // older files: add_prefix_space true means "always"
                s.scheme = flag(p, "add_prefix_space", true, path) ? Step::kAlways : Step::kNever;
            }
        } else if (type == "Digits") {
            s.kind = Step::kDigits;
            s.flag = flag(p, "individual_digits", false, path);
        } else {
            PLAB_CHECK(false, where << ": " << path << ".type is '" << shorten(type)
                                    << "'; plab reads the pre-tokenizers Sequence, Split, "
                                       "ByteLevel, Metaspace and Digits");
        }
        t.pre_tokenizer_.push_back(s);
    }

    void read_decoder(const Json& d, const std::string& path) {
        if (d.is_null()) return;
        const std::string type = type_of(d, path);
        if (type == "Sequence") {
            const Json& list = member(d, "decoders", path);
            PLAB_CHECK(list.is_array(), where << ": " << path << ".decoders must be a list");
            for (std::size_t k = 0; k < list.size(); ++k)
                read_decoder(list[k], path + ".decoders[" + std::to_string(k) + "]");
        } else if (type == "Strip") {
            const Json& n = member(d, "start", path);
            PLAB_CHECK(string_of(d, "content", path) == " " && n.is_number_integer() &&
                           n.get<std::int64_t>() >= 0 && n.get<std::int64_t>() <= 16,
                       where << ": " << path << " must strip spaces (\"content\": \" \") "
                             << "with \"start\" in 0..16");
            t.strip_leading_spaces_ = static_cast<int>(n.get<std::int64_t>());
        } else if (type == "Metaspace") {
            const bool prepends = d.contains("prepend_scheme")
                                      ? string_of(d, "prepend_scheme", path) != "never"
                                      : flag(d, "add_prefix_space", true, path);
            t.strip_leading_spaces_ = prepends ? 1 : 0;
        } else if (type == "ByteLevel" || type == "ByteFallback" || type == "Fuse" ||
                   type == "Replace") {
            // Their effect is the family's decoding rule (decode() in tokenizer_hf.cpp).
        } else {
            PLAB_CHECK(false, where << ": " << path << ".type is '" << shorten(type)
                                    << "'; plab reads the decoders ByteLevel, Metaspace, "
                                       "Replace, ByteFallback, Fuse, Strip and Sequence");
        }
    }

    void choose_family(const Json& model) {
        using Step = HfTokenizer::PreTokenizerStep;
        bool byte_level = false, metaspace = false;
        for (std::size_t k = 0; k < t.pre_tokenizer_.size(); ++k) {
            if (t.pre_tokenizer_[k].kind == Step::kByteLevel) {
                byte_level = true;
                PLAB_CHECK(k + 1 == t.pre_tokenizer_.size(),
                           where << ": the ByteLevel pre-tokenizer must be the last one (the "
                                    "others would split its mapped characters)");
            }
            metaspace = metaspace || t.pre_tokenizer_[k].kind == Step::kMetaspace;
        }
        bool space_to_metaspace = false;
        for (const auto& n : t.normalizer_) {
            space_to_metaspace = space_to_metaspace || (n.kind == n.kReplace && n.to == kMetaspace);
            PLAB_CHECK(n.kind != n.kNfc || byte_level,
                       where << ": an NFC normalizer is read only with a ByteLevel pre-tokenizer");
        }
        // Hugging Face looks for a "normalized" added token in the normalized
        // text; plab looks in the raw text, which is the same unless a
        // normalizer rewrites it (Llama 2's files have "normalized": false).
        for (const auto& a : t.added_) {
            bool rewrites = false;
            for (const auto& n : t.normalizer_) rewrites = rewrites || n.kind != n.kNfc;
            PLAB_CHECK(!a.normalized || !rewrites,
                       where << ": added token '" << shorten(a.content)
                             << "' has \"normalized\": true beside a Prepend/Replace normalizer; "
                                "plab matches added tokens in the raw text, so it reads them only "
                                "with \"normalized\": false there");
        }
        t.byte_fallback_ = flag(model, "byte_fallback", false, "model");
        t.fuse_unk_ = flag(model, "fuse_unk", false, "model");
        t.ignore_merges_ = flag(model, "ignore_merges", false, "model");
        if (model.contains("unk_token") && !model.at("unk_token").is_null())
            t.unk_ = id_of(string_of(model, "unk_token", "model"), "model.unk_token");
        t.byte_token_.fill(-1);
        const std::size_t v = t.tokens_.size();
        t.bytes_.assign(v, std::string());
        if (byte_level) {
            PLAB_CHECK(!t.byte_fallback_ && !metaspace && !space_to_metaspace,
                       where << ": a ByteLevel pre-tokenizer with byte_fallback or Metaspace mixes "
                                "the two BPE families; a file is one or the other");
            t.family_ = HfTokenizer::Family::kByteLevel;
            read_byte_level_bytes();
        } else {
            PLAB_CHECK(t.byte_fallback_ || metaspace || space_to_metaspace,
                       where << ": model is BPE but neither byte-level (a ByteLevel "
                                "pre-tokenizer) nor SentencePiece-style (byte_fallback, "
                                "Metaspace or Replace ' ' -> '\u2581'); plab reads those two");
            t.family_ = HfTokenizer::Family::kSentencePiece;
            read_sentencepiece_bytes();
        }
    }

    // Byte-level BPE (GPT-2, Llama 3, Qwen): every byte is one of 256 printable
    // characters (bytes_to_unicode), and a token's bytes are its characters mapped back.
    void read_byte_level_bytes() {
        const std::size_t v = t.tokens_.size();
        const auto chars = hf::gpt2_byte_chars();
        std::unordered_map<std::string, unsigned char> byte_of;
        for (int b = 0; b < 256; ++b) {
            t.byte_char_[std::size_t(b)] = hf::utf8_encode(chars[std::size_t(b)]);
            byte_of.emplace(t.byte_char_[std::size_t(b)], static_cast<unsigned char>(b));
            auto it = t.vocab_.find(t.byte_char_[std::size_t(b)]);
            char hex[8];
            std::snprintf(hex, sizeof hex, "0x%02X", b);
            PLAB_CHECK(it != t.vocab_.end(),
                       where << ": model.vocab has no token for byte " << hex << " ('"
                             << t.byte_char_[std::size_t(b)]
                             << "'); a byte-level vocabulary has all 256 byte characters");
            t.byte_token_[std::size_t(b)] = it->second;
        }
        for (std::size_t id = 0; id < v; ++id) {
            if (t.is_added_[id]) {
                t.bytes_[id] = t.tokens_[id];
                continue;
            }
            const std::string& s = t.tokens_[id];
            for (std::size_t i = 0; i < s.size();) {
                const hf::Utf8Char c = hf::utf8_at(s, i);
                auto it = byte_of.find(s.substr(i, c.len));
                PLAB_CHECK(it != byte_of.end(),
                           where << ": model.vocab token " << id << " ('" << shorten(s)
                                 << "') has a character that is none of the 256 byte-level "
                                    "characters (GPT-2's bytes_to_unicode)");
                t.bytes_[id] += static_cast<char>(it->second);
                i += c.len;
            }
        }
    }

    // SentencePiece-style BPE (Llama 2, Mistral): byte tokens are spelled <0xAB>,
    // and U+2581 (the metaspace) stands for a space.
    void read_sentencepiece_bytes() {
        const std::size_t v = t.tokens_.size();
        for (std::size_t id = 0; id < v; ++id) {
            const std::string& s = t.tokens_[id];
            unsigned byte = 0;
            char tail = 0;
            if (!t.is_added_[id] && s.size() == 6 &&
                std::sscanf(s.c_str(), "<0x%2X>%c", &byte, &tail) == 1 &&
                std::isxdigit(static_cast<unsigned char>(s[3])) &&
                std::isxdigit(static_cast<unsigned char>(s[4]))) {
                t.bytes_[id] = std::string(1, static_cast<char>(byte));
                t.byte_token_[byte] = static_cast<int32_t>(id);
                continue;
            }
            std::string out;
            for (std::size_t i = 0; i < s.size();) {
                if (!t.is_added_[id] && s.compare(i, 3, kMetaspace) == 0) {
                    out += ' ';
                    i += 3;
                } else {
                    out += s[i++];
                }
            }
            t.bytes_[id] = out;
        }
    }

    void read_config(const std::string& text) {
        if (text.empty()) return;
        Json c;
        try {
            c = Json::parse(text);
        } catch (const std::exception& e) {
            PLAB_CHECK(false,
                       where << " (tokenizer_config.json): not valid JSON (" << e.what() << ")");
        }
        PLAB_CHECK(c.is_object(), where << " (tokenizer_config.json): expected a JSON object");
        auto special = [&](const char* key) -> int32_t {
            if (!c.contains(key) || c.at(key).is_null()) return -1;
            const Json& v = c.at(key);
            std::string s;
            if (v.is_string()) {
                s = v.get<std::string>();
            } else {  // {"content": "<s>", "lstrip": false, ...}
                PLAB_CHECK(v.is_object() && v.contains("content") && v.at("content").is_string(),
                           where << " (tokenizer_config.json): " << key
                                 << " must be a string or {\"content\": \"...\"}");
                s = v.at("content").get<std::string>();
            }
            return id_of(s, std::string("tokenizer_config.json's ") + key);
        };
        t.bos_ = special("bos_token");
        t.eos_ = special("eos_token");
        t.add_bos_token_ = flag(c, "add_bos_token", true, "tokenizer_config.json");
    }

    void load(const std::string& tokenizer_json, const std::string& config_json) {
        PLAB_CHECK(tokenizer_json.size() <= HfTokenizer::kMaxFileBytes,
                   where << ": " << tokenizer_json.size() << " bytes is more than the "
                         << HfTokenizer::kMaxFileBytes << " a tokenizer.json may have");
        Json root;
        try {
            root = Json::parse(tokenizer_json);
        } catch (const std::exception& e) {
            PLAB_CHECK(false, where << ": not valid JSON (" << e.what() << ")");
        }
        PLAB_CHECK(root.is_object() && root.contains("model") && root.at("model").is_object(),
                   where << ": no \"model\" object; a tokenizer.json has \"model\": {\"type\": "
                            "\"BPE\", \"vocab\": {...}, \"merges\": [...]}");
        const Json& model = root.at("model");
        // Older files leave "type" out of a BPE model; vocab + merges say what it is.
        const std::string type = model.contains("type") ? text_or_json(model.at("type")) : "BPE";
        PLAB_CHECK(type == "BPE", where << ": model.type is '" << shorten(type)
                                        << "'; plab reads \"BPE\" models (byte-level, or "
                                           "SentencePiece-style with byte_fallback)");
        PLAB_CHECK(!model.contains("dropout") || model.at("dropout").is_null() ||
                       (model.at("dropout").is_number() && model.at("dropout").get<double>() == 0),
                   where << ": model.dropout must be null (BPE dropout is for training)");
        for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
            PLAB_CHECK(!model.contains(key) || model.at(key).is_null() || model.at(key) == "",
                       where << ": model." << key << " must be null or \"\" (Llama-style BPE has "
                             << "none)");
        }
        read_vocab_and_added(model, root);
        read_merges(model);
        if (root.contains("normalizer")) read_normalizer(root.at("normalizer"), "normalizer");
        if (root.contains("pre_tokenizer"))
            read_pre_tokenizer(root.at("pre_tokenizer"), "pre_tokenizer");
        if (root.contains("decoder")) read_decoder(root.at("decoder"), "decoder");
        choose_family(model);
        read_config(config_json);
    }
};

std::unique_ptr<HfTokenizer> HfTokenizer::parse(const std::string& tokenizer_json,
                                                const std::string& config_json,
                                                const std::string& where) {
    std::unique_ptr<HfTokenizer> t(new HfTokenizer());
    HfTokenizerLoader{*t, where}.load(tokenizer_json, config_json);
    return t;
}

std::unique_ptr<HfTokenizer> HfTokenizer::load_dir(const std::string& dir) {
    namespace fs = std::filesystem;
    auto read = [](const fs::path& p) {
        std::error_code ec;
        const auto size = fs::file_size(p, ec);
        PLAB_CHECK(!ec && size <= kMaxFileBytes,
                   p.string() << ": cannot read, or larger than " << kMaxFileBytes << " bytes");
        std::ifstream f(p, std::ios::binary);
        PLAB_CHECK(f.good(), "cannot read " << p.string());
        std::stringstream ss;
        ss << f.rdbuf();
        return ss.str();
    };
    const fs::path json = fs::path(dir) / "tokenizer.json";
    const fs::path config = fs::path(dir) / "tokenizer_config.json";
    return parse(read(json), fs::exists(config) ? read(config) : std::string(), json.string());
}

}  // namespace plab
