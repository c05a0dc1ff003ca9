// HfTokenizer's encoding and decoding: the pipeline of tokenizer_hf.h, one
// numbered stage at a time. Reading the file is tokenizer_hf_load.cpp.
#include "model/tokenizers/tokenizer_hf.h"

#include <cstdio>

#include "core/error.h"
#include "model/tokenizers/tokenizer_hf_unicode.h"

namespace plab {
namespace {

constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581 '▁'

// Every `from` in the text replaced by `to`; each byte of a `to` comes from
// the first byte of the `from` it replaced.
void replace_all(std::string& text, std::vector<std::size_t>& origin, std::string_view from,
                 std::string_view to) {
    std::string out;
    std::vector<std::size_t> out_origin;
    const std::string_view s(text);
    std::size_t i = 0;
    for (std::size_t at; (at = s.find(from, i)) != std::string_view::npos; i = at + from.size()) {
        out.append(s.substr(i, at - i));
        out_origin.insert(out_origin.end(), origin.begin() + std::ptrdiff_t(i),
                          origin.begin() + std::ptrdiff_t(at));
        out.append(to);
        out_origin.insert(out_origin.end(), to.size(), origin[at]);
    }
    out.append(s.substr(i));
    out_origin.insert(out_origin.end(), origin.begin() + std::ptrdiff_t(i), origin.end());
    text = std::move(out);
    origin = std::move(out_origin);
}

bool starts_with(std::string_view s, std::string_view p) {
    return s.substr(0, p.size()) == p;
}

// `bytes` put before a piece's text: they stand before its first byte.
void prepend_bytes(std::string& text, std::vector<std::size_t>& origin, std::size_t offset,
                   std::string_view bytes) {
    text.insert(0, bytes);
    origin.insert(origin.begin(), bytes.size(), offset);
}

// The byte offset where the character ending at `end` starts (UTF-8 steps back
// over continuation bytes; an ill-formed byte is a character of its own).
std::size_t char_before(std::string_view s, std::size_t end) {
    for (std::size_t k = 1; k <= 4 && k <= end; ++k) {
        const hf::Utf8Char c = hf::utf8_at(s, end - k);
        if (c.valid && c.len == k) return end - k;
    }
    return end - 1;
}

}  // namespace

std::string HfTokenizer::kind() const {
    return family_ == Family::kByteLevel ? "tokenizer.json (byte-level BPE)"
                                         : "tokenizer.json (SentencePiece BPE, byte fallback)";
}

std::optional<HfTokenizer::GgufForm> HfTokenizer::gguf_form(std::string* why) const {
    using Step = PreTokenizerStep;
    GgufForm f;
    const auto& p = pre_tokenizer_;
    const bool plain_byte_level =
        !p.empty() && p.back().kind == Step::kByteLevel && !p.back().flag;  // no add_prefix_space
    if (family_ != Family::kByteLevel) {
        *why =
            "a SentencePiece-style tokenizer.json has merges, and GGUF's \"llama\" "
            "vocabulary holds scores instead";
    } else if (!normalizer_.empty()) {
        *why = "GGUF cannot name this tokenizer.json's normalizer";
    } else if (plain_byte_level && p.size() == 1 && p[0].use_regex) {
        f.pre = "gpt-2";  // ByteLevel's own split is GPT-2's regex
    } else if (plain_byte_level && p.size() == 2 && p[0].kind == Step::kSplit && !p[1].use_regex) {
        f.pre = p[0].pattern == hf::SplitPattern::kGpt2     ? "gpt-2"
                : p[0].pattern == hf::SplitPattern::kLlama3 ? "llama-bpe"
                                                            : "qwen2";
    } else {
        *why = "GGUF names only the pre-tokenizers gpt-2, llama-bpe (Llama 3) and qwen2";
    }
    for (const AddedToken& a : added_) {
        if (f.pre.empty()) break;
        if (a.lstrip || a.rstrip) {
            *why = "added token '" + a.content + "' strips spaces, which GGUF cannot say";
            f.pre.clear();
        }
    }
    if (f.pre.empty()) return std::nullopt;
    f.merges = merge_texts_;
    f.token_types.assign(tokens_.size(), 1);
    for (const AddedToken& a : added_) f.token_types[std::size_t(a.id)] = a.special ? 3 : 4;
    f.add_bos = add_bos_token_ && bos_ >= 0;
    return f;
}

const std::string& HfTokenizer::token_string(int32_t id) const {
    PLAB_CHECK(id >= 0 && id < vocab_size(),
               "token id " << id << " is outside the vocabulary 0.." << vocab_size() - 1);
    return tokens_[std::size_t(id)];
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text, bool add_bos) const {
    std::vector<int32_t> ids;
    if (add_bos && add_bos_token_ && bos_ >= 0) ids.push_back(bos_);
    std::vector<std::size_t> starts;
    const std::vector<int32_t> rest = encode_starts(text, starts);
    ids.insert(ids.end(), rest.begin(), rest.end());
    return ids;
}

std::vector<int32_t> HfTokenizer::encode_starts(std::string_view text,
                                                std::vector<std::size_t>& starts) const {
    std::vector<int32_t> ids;
    starts.clear();
    added_token_split(
        text,
        [&](std::string_view segment, bool at_text_start) {
            if (segment.empty()) return;
            const std::size_t offset = std::size_t(segment.data() - text.data());
            for (const Piece& p : pre_tokenize(normalize(segment, offset, at_text_start)))
                model_encode(p, ids, starts);
        },
        [&](const AddedToken& a, std::size_t start) {
            ids.push_back(a.id);
            starts.push_back(start);
        });
    return ids;
}

std::vector<std::string> HfTokenizer::pieces(std::string_view text) const {
    std::vector<std::string> out;
    added_token_split(
        text,
        [&](std::string_view segment, bool at_text_start) {
            if (segment.empty()) return;
            const std::size_t offset = std::size_t(segment.data() - text.data());
            for (Piece& p : pre_tokenize(normalize(segment, offset, at_text_start)))
                out.push_back(std::move(p.text));
        },
        [&](const AddedToken& a, std::size_t) { out.push_back(a.content); });
    return out;
}

// 1. Added tokens ("<|begin_of_text|>", "<s>") are cut out of the raw text
// first, leftmost match first and the longest one at a position, so that no
// later stage splits or merges them; lstrip/rstrip take the whitespace beside
// them along. The text between them is encoded segment by segment.
void HfTokenizer::added_token_split(
    std::string_view text, const std::function<void(std::string_view, bool)>& segment_fn,
    const std::function<void(const AddedToken&, std::size_t)>& added_fn) const {
    std::size_t segment = 0;
    for (std::size_t pos = 0; pos < text.size();) {
        const AddedToken* hit = nullptr;
        if (!added_first_byte_[static_cast<unsigned char>(text[pos])]) {
            ++pos;  // no added token starts with this byte (Llama 3's all start with '<')
            continue;
        }
        for (const AddedToken& a : added_) {
            if (text.compare(pos, a.content.size(), a.content) == 0) {
                hit = &a;  // longest first, so the first hit is the longest
                break;
            }
        }
        if (hit == nullptr) {
            ++pos;
            continue;
        }
        std::size_t start = pos, end = pos + hit->content.size();
        if (hit->lstrip) {
            while (start > segment) {
                const std::size_t b = char_before(text, start);
                if (!hf::is_white_space(hf::utf8_at(text, b))) break;
                start = b;
            }
        }
        if (hit->rstrip) {
            while (end < text.size() && hf::is_white_space(hf::utf8_at(text, end)))
                end += hf::utf8_at(text, end).len;
        }
        segment_fn(text.substr(segment, start - segment), segment == 0);
        added_fn(*hit, start);
        segment = pos = end;
    }
    segment_fn(text.substr(segment), segment == 0);
}

// 2. The normalizer rewrites the segment: Llama 2 prepends '▁' and turns spaces
// into '▁'; Qwen 2 asks for NFC, which plab checks rather than computes.
HfTokenizer::Piece HfTokenizer::normalize(std::string_view segment, std::size_t offset,
                                          bool at_text_start) const {
    Piece p{std::string(segment), std::vector<std::size_t>(segment.size()), offset, at_text_start};
    for (std::size_t i = 0; i < segment.size(); ++i) p.origin[i] = offset + i;
    std::string& s = p.text;
    for (const NormalizerStep& n : normalizer_) {
        if (n.kind == NormalizerStep::kPrepend) {
            if (!s.empty()) prepend_bytes(s, p.origin, p.offset, n.to);
        } else if (n.kind == NormalizerStep::kReplace) {
            replace_all(s, p.origin, n.from, n.to);
        } else {
            char32_t cp = 0;
            const hf::NfcCheck check = hf::nfc_quick_check(s, &cp);
            char hex[16];
            std::snprintf(hex, sizeof hex, "U+%04X", static_cast<unsigned>(cp));
            PLAB_CHECK(check == hf::NfcCheck::kYes,
                       "the text has " << hex << ", which this tokenizer's NFC normalizer may "
                                       << "compose or reorder; plab checks NFC but does not "
                                       << "compute it: give the text in NFC (precomposed)");
        }
    }
    return p;
}

// 3. The pre-tokenizer cuts the segment into pieces; each step cuts every
// piece the previous steps left. No merge crosses a piece boundary.
std::vector<HfTokenizer::Piece> HfTokenizer::pre_tokenize(Piece segment) const {
    std::vector<Piece> pieces{std::move(segment)};
    for (const PreTokenizerStep& step : pre_tokenizer_) {
        std::vector<Piece> next;
        // The cuts are views of from.text; each piece keeps its bytes' origins.
        auto keep = [&](const Piece& from, const std::vector<std::string_view>& cut) {
            for (std::size_t k = 0; k < cut.size(); ++k) {
                if (cut[k].empty()) continue;
                const auto at = std::ptrdiff_t(cut[k].data() - from.text.data());
                next.push_back({std::string(cut[k]),
                                std::vector<std::size_t>(
                                    from.origin.begin() + at,
                                    from.origin.begin() + at + std::ptrdiff_t(cut[k].size())),
                                from.origin[std::size_t(at)], from.at_text_start && k == 0});
            }
        };
        for (Piece& p : pieces) {
            switch (step.kind) {
                case PreTokenizerStep::kSplit:
                    keep(p, hf::split_pieces(p.text, step.pattern));
                    break;
                case PreTokenizerStep::kDigits:
                    keep(p, hf::split_digits(p.text, step.flag));
                    break;
                case PreTokenizerStep::kByteLevel:
                    // Its byte mapping happens in model_encode; here only the
                    // optional prefix space and GPT-2's split.
                    if (step.flag && !starts_with(p.text, " "))
                        prepend_bytes(p.text, p.origin, p.offset, " ");
                    if (step.use_regex) {
                        keep(p, hf::split_pieces(p.text, hf::SplitPattern::kGpt2));
                    } else {
                        next.push_back(p);
                    }
                    break;
                case PreTokenizerStep::kMetaspace: {
                    Piece m = p;
                    replace_all(m.text, m.origin, " ", kMetaspace);
                    const bool prepend_space =
                        step.scheme == PreTokenizerStep::kAlways ||
                        (step.scheme == PreTokenizerStep::kFirst && p.at_text_start);
                    if (prepend_space && !starts_with(m.text, kMetaspace))
                        prepend_bytes(m.text, m.origin, m.offset, kMetaspace);
                    if (!step.split) {
                        next.push_back(std::move(m));
                        break;
                    }
                    // split: each '▁' begins a new piece ("MergedWithNext").
                    std::vector<std::string_view> cut;
                    const std::string_view v(m.text);
                    std::size_t from = 0;
                    for (std::size_t at = v.find(kMetaspace, 1); at != std::string_view::npos;
                         at = v.find(kMetaspace, at + kMetaspace.size())) {
                        cut.push_back(v.substr(from, at - from));
                        from = at;
                    }
                    cut.push_back(v.substr(from));
                    keep(m, cut);
                    break;
                }
            }
        }
        pieces = std::move(next);
    }
    return pieces;
}

// 4. The model turns one piece into ids: its base symbols, then merges by
// rank. Each token starts where the first symbol it was merged from came from.
void HfTokenizer::model_encode(const Piece& piece, std::vector<int32_t>& ids,
                               std::vector<std::size_t>& starts) const {
    const std::string& text = piece.text;
    std::vector<int32_t> word;
    std::vector<std::size_t> origin;  // (word) where each base symbol came from
    if (family_ == Family::kByteLevel) {
        // Byte-level: one base token per byte, through GPT-2's byte characters.
        if (ignore_merges_) {  // Llama 3: a piece that is a token is taken whole
            std::string mapped;
            for (unsigned char b : text) mapped += byte_char_[b];
            if (auto it = vocab_.find(mapped); it != vocab_.end()) {
                ids.push_back(it->second);
                starts.push_back(piece.offset);
                return;
            }
        }
        for (std::size_t i = 0; i < text.size(); ++i) {
            word.push_back(byte_token_[static_cast<unsigned char>(text[i])]);
            origin.push_back(piece.origin[i]);
        }
    } else {
        if (ignore_merges_) {
            if (auto it = vocab_.find(text); it != vocab_.end()) {
                ids.push_back(it->second);
                starts.push_back(piece.offset);
                return;
            }
        }
        // SentencePiece-style: one base token per character; a character the
        // vocabulary lacks falls back to its bytes <0xNN> (each from its own
        // byte), else to <unk>.
        bool last_unk = false;
        for (std::size_t i = 0; i < text.size();) {
            const std::size_t at = i, len = hf::utf8_at(text, i).len;
            const std::string ch = text.substr(i, len);
            i += len;
            if (auto it = vocab_.find(ch); it != vocab_.end()) {
                word.push_back(it->second);
                origin.push_back(piece.origin[at]);
                last_unk = false;
                continue;
            }
            bool all_bytes = byte_fallback_;
            for (unsigned char b : ch) all_bytes = all_bytes && byte_token_[b] >= 0;
            if (all_bytes) {
                for (std::size_t k = 0; k < len; ++k) {
                    word.push_back(byte_token_[static_cast<unsigned char>(ch[k])]);
                    origin.push_back(piece.origin[at + k]);
                }
                last_unk = false;
            } else if (unk_ >= 0) {
                if (!(fuse_unk_ && last_unk)) {
                    word.push_back(unk_);
                    origin.push_back(piece.origin[at]);
                }
                last_unk = true;
            }  // no <unk> either: the character is dropped, as Hugging Face does
        }
    }
    std::vector<std::size_t> first;
    merges_.apply(word, &first);
    ids.insert(ids.end(), word.begin(), word.end());
    for (std::size_t f : first) starts.push_back(origin[f]);
}

// Decoding: each token's bytes (byte-level: mapped back through GPT-2's table;
// SentencePiece: '▁' -> ' ' and <0xNN> -> the byte), joined; BOS/EOS dropped;
// then the space the encoder prepended is stripped.
std::string HfTokenizer::decode(const std::vector<int32_t>& ids) const {
    std::string s;
    for (int32_t id : ids) {
        PLAB_CHECK(id >= 0, "token id " << id << " is negative; ids are 0, 1, 2, ...");
        if (id == bos_ || id == eos_ || id >= vocab_size())
            continue;  // past the tokenizer: dropped
        s += bytes_[std::size_t(id)];
    }
    int strip = strip_leading_spaces_;
    std::size_t cut = 0;
    while (strip-- > 0 && cut < s.size() && s[cut] == ' ') ++cut;
    return s.substr(cut);
}

std::string HfTokenizer::token_bytes(int32_t id) const {
    PLAB_CHECK(id >= 0, "token id " << id << " is negative; ids are 0, 1, 2, ...");
    return id == bos_ || id == eos_ || id >= vocab_size() ? std::string() : bytes_[std::size_t(id)];
}

std::string HfTokenizer::token_text(int32_t id) const {
    PLAB_CHECK(id >= 0, "token id " << id << " is negative; ids are 0, 1, 2, ...");
    if (id >= vocab_size())
        return "#" + std::to_string(id);  // a row of the model past the tokenizer
    if (is_added_[std::size_t(id)]) return tokens_[std::size_t(id)];
    return hf::printable_bytes(bytes_[std::size_t(id)], /*escape_tab=*/false);
}

}  // namespace plab
