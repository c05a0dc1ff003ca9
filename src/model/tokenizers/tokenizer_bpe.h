// BpeTokenizer: byte-level byte pair encoding, read from a "plab-bpe 1" file.
//
// What it teaches: a BPE tokenizer is a list of merges over the 256 byte
// values (Sennrich et al. 2016; byte-level as in GPT-2). Encoding cuts the
// text into pieces, then inside each piece merges the adjacent pair with the
// lowest rank until none applies. Because the base vocabulary is every byte,
// any byte string encodes, and decoding (concatenating each token's bytes)
// gives the input back exactly: UTF-8 or not.
//
// The file format and the pre-tokenization rule are defined once, in
// assets/recipe/bpe.py (the trainer); this class must match it id for id
// (tests/model/test_tokenizer.cpp checks against ids the Python wrote):
//
//   plab-bpe 1
//   vocab_size 512          = 258 + merges
//   bos 256
//   eos 257
//   merges 254
//   116 104                 merge k: "left right" -> id 258 + k
//   ...
//
// Left out: regex pre-tokenizers, Unicode normalisation, extra special tokens.
#pragma once

#include <array>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/tokenizers/tokenizer.h"

namespace plab {

class BpeTokenizer final : public Tokenizer {
public:
    static constexpr int kBos = 256;
    static constexpr int kEos = 257;
    static constexpr int kFirstMerge = 258;

    // Parses a "plab-bpe 1" file; throws plab::Error naming the line that is wrong.
    static BpeTokenizer load(const std::string& path);
    static BpeTokenizer parse(const std::string& text, const std::string& where);
    void save(const std::string& path) const;
    explicit BpeTokenizer(std::vector<std::pair<int32_t, int32_t>> merges);

    std::string kind() const override { return "bpe"; }
    int vocab_size() const override { return static_cast<int>(token_bytes_.size()); }
    int bos_id() const override { return kBos; }
    int eos_id() const override { return kEos; }
    std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;
    std::string decode(const std::vector<int32_t>& ids) const override;
    std::string token_text(int32_t id) const override;

    // The raw bytes a token stands for ("" for BOS/EOS).
    std::string token_bytes(int32_t id) const override;

    const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merges_; }

    // The pre-tokenization rule (shared with assets/recipe/bpe.py): pieces are
    // [optional space] + a run of letters (A-Z a-z or bytes >= 0x80), or
    // [optional space] + a run of digits, or any other single byte.
    static std::vector<std::string_view> pretokenize(std::string_view text);

private:
    void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
    const std::string& bytes_of(int32_t id) const;  // token_bytes without the copy

    std::vector<std::pair<int32_t, int32_t>> merges_;
    std::map<std::pair<int32_t, int32_t>, int32_t> rank_;  // pair -> merge index
    std::vector<std::string> token_bytes_;                 // (V) bytes of each token
};

}  // namespace plab
