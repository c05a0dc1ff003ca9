// HfTokenizer: a Hugging Face tokenizer.json of the two BPE families that
// Llama-style models ship with.
//
// What it teaches: a real model's tokenizer is a pipeline the file spells out,
//
//   text ─► added tokens cut out ─► normalizer ─► pre-tokenizer ─► BPE model ─► ids
//         (<|begin_of_text|>, <s>)  (▁ for space)  (regex split)   (merges by rank)
//
// and the two families differ in where the bytes go:
//  * byte-level BPE (GPT-2, Llama 3, SmolLM, Qwen 2): every byte of a piece is
//    first mapped to one printable character (GPT-2's bytes_to_unicode: 'Ġ' is
//    the space), so the 256 base tokens cover any input, UTF-8 or not, and
//    decoding maps them back: decode(encode(x)) == x for every byte string.
//  * SentencePiece-style BPE (Llama 2, TinyLlama): spaces become '▁', pieces
//    start from Unicode characters, and a character outside the vocabulary
//    falls back to its UTF-8 bytes as tokens <0x00>..<0xFF> (byte_fallback).
//    An ill-formed byte falls back the same way, so it survives the round trip
//    here (Python's decode would show U+FFFD instead).
// tokenizer_config.json, when beside it, names BOS/EOS and add_bos_token.
//
// Files: tokenizer_hf_load.cpp reads and checks the JSON; tokenizer_hf.cpp
// encodes and decodes; tokenizer_hf_split.h (regex splits), tokenizer_hf_bpe.h
// (merging), tokenizer_hf_unicode.h (character classes). The independent
// check is tests/reference/hf_tokenizer_reference.py.
// Left out: WordPiece/Unigram models, normalizers other than Prepend/Replace/
// NFC (NFC only as a check that the text is NFC already), added tokens with
// single_word, added tokens with normalized: true beside a Prepend/Replace
// normalizer, BPE dropout. Each is refused with a line that says so.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/tokenizers/tokenizer.h"
#include "model/tokenizers/tokenizer_hf_bpe.h"
#include "model/tokenizers/tokenizer_hf_split.h"

namespace plab {

class HfTokenizer final : public Tokenizer {
public:
    // Limits of what a file may declare (Llama 3: 128256 tokens, 280147 merges;
    // Qwen 2: 151665 tokens): far above real files, far below memory trouble.
    static constexpr int kMaxVocab = 1 << 20;
    static constexpr int kMaxMerges = 2'000'000;
    static constexpr std::size_t kMaxTokenBytes = 1024;
    static constexpr std::size_t kMaxFileBytes = std::size_t(64) << 20;

    // tokenizer.json text and tokenizer_config.json text ("" when absent);
    // `where` names them in errors. Throws plab::Error naming what is wrong.
    static std::unique_ptr<HfTokenizer> parse(const std::string& tokenizer_json,
                                              const std::string& config_json,
                                              const std::string& where);
    // DIR/tokenizer.json and, if present, DIR/tokenizer_config.json.
    static std::unique_ptr<HfTokenizer> load_dir(const std::string& dir);

    std::string kind() const override;
    int vocab_size() const override { return static_cast<int>(tokens_.size()); }
    int bos_id() const override { return bos_; }
    int eos_id() const override { return eos_; }
    // BOS first when add_bos and the tokenizer has one and add_bos_token is not false.
    std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;
    std::string decode(const std::vector<int32_t>& ids) const override;
    std::string token_text(int32_t id) const override;
    std::string token_bytes(int32_t id) const override;  // bytes_; "" for BOS, EOS, past V

    bool byte_level() const { return family_ == Family::kByteLevel; }
    // The pieces BPE merges within, in order: each added token's text, and the
    // normalized, pre-tokenized pieces between them ("▁Hello" in SentencePiece
    // files, raw bytes " world" in byte-level ones). No merge crosses a piece.
    std::vector<std::string> pieces(std::string_view text) const;
    // The vocabulary string of a token as the file writes it ("Ġthe", "▁the", "<0x0A>").
    const std::string& token_string(int32_t id) const;

    // What a GGUF "gpt2" vocabulary says of this tokenizer (model/tokenizers/
    // tokenizer_gguf.h writes it): the pre-tokenizer by llama.cpp's name, the merges
    // by rank, each token's type. nullopt, and *why, for a pipeline GGUF cannot
    // name: SentencePiece-style files (GGUF's "llama" wants scores, not merges), a
    // normalizer, another split, added tokens that strip spaces.
    struct GgufForm {
        std::string pre;                   // "gpt-2", "llama-bpe" or "qwen2"
        std::vector<std::string> merges;   // "left right", rank order
        std::vector<int32_t> token_types;  // 1 normal, 3 control (special), 4 user-defined
        bool add_bos = false;
    };
    std::optional<GgufForm> gguf_form(std::string* why) const;

private:
    HfTokenizer() = default;
    enum class Family { kByteLevel, kSentencePiece };
    struct AddedToken {
        std::string content;
        int32_t id;
        bool lstrip, rstrip;  // take the whitespace on that side along
        bool normalized;      // matched in normalized text (refused where that differs)
        bool special;         // a control token (GGUF token type 3), else user-defined (4)
    };
    struct NormalizerStep {
        enum Kind { kPrepend, kReplace, kNfc } kind;
        std::string from, to;  // Prepend: to; Replace: from -> to
    };
    struct PreTokenizerStep {
        enum Kind { kSplit, kByteLevel, kMetaspace, kDigits } kind;
        hf::SplitPattern pattern = hf::SplitPattern::kGpt2;  // kSplit
        bool flag = false;        // ByteLevel: add_prefix_space; Digits: individual_digits
        bool use_regex = false;   // ByteLevel
        std::string replacement;  // Metaspace
        enum Scheme { kAlways, kFirst, kNever } scheme = kAlways;
        bool split = false;  // Metaspace
    };
    // Text on its way through the pipeline. Each byte remembers the offset of
    // the input byte it came from (a byte a stage inserted, the offset of the
    // byte it stands before), so every token knows where it starts (tokenizer.h).
    struct Piece {
        std::string text;
        std::vector<std::size_t> origin;  // (text.size()) input offset of each byte
        std::size_t offset;               // input offset where the piece begins (origin[0] if any)
        bool at_text_start;  // begins at offset 0 of the whole input (Metaspace "first")
    };

    friend struct HfTokenizerLoader;
    // Calls segment(text, at_text_start) for the text between added tokens and
    // added(token, start) for each added token (start: its first byte in the
    // input, stripped spaces included), in order; a segment is a view of `text`.
    void added_token_split(std::string_view text,
                           const std::function<void(std::string_view, bool)>& segment,
                           const std::function<void(const AddedToken&, std::size_t)>& added) const;
    // The stages of tokenizer_hf.cpp; `offset`: where the segment lies in the input.
    Piece normalize(std::string_view segment, std::size_t offset, bool at_text_start) const;
    std::vector<Piece> pre_tokenize(Piece segment) const;
    void model_encode(const Piece& piece, std::vector<int32_t>& ids,
                      std::vector<std::size_t>& starts) const;
    std::vector<int32_t> encode_starts(std::string_view text,
                                       std::vector<std::size_t>& starts) const override;

    Family family_ = Family::kByteLevel;
    std::vector<std::string> merge_texts_;  // model.merges as "left right", rank order
    std::vector<std::string> tokens_;       // (V) vocabulary strings, as in the file
    std::vector<std::string> bytes_;        // (V) the bytes each token decodes to
    std::vector<char> is_added_;            // (V) 1 for added tokens (decoded as their content)
    std::unordered_map<std::string, int32_t> vocab_;  // model.vocab: string -> id
    hf::BpeMergeTable merges_;
    std::vector<AddedToken> added_;             // longest content first
    std::array<bool, 256> added_first_byte_{};  // some added token starts with this byte
    std::vector<NormalizerStep> normalizer_;
    std::vector<PreTokenizerStep> pre_tokenizer_;
    std::array<std::string, 256> byte_char_;  // byte-level: byte -> its UTF-8 character
    std::array<int32_t, 256> byte_token_{};   // byte-level: byte -> token; SP: <0xNN> or -1
    bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
    int32_t unk_ = -1;
    int strip_leading_spaces_ = 0;  // decoder: Strip(' ', n, 0) or Metaspace's first '▁'
    int32_t bos_ = -1, eos_ = -1;
    bool add_bos_token_ = true;
};

}  // namespace plab
