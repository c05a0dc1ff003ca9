// llama2.c's tokenizer.bin: int32 max_token_length, then for each of the model's V
// tokens: float32 score, int32 byte length, the bytes. Ids 0/1/2 are
// <unk>/<s>/</s>, ids 3..258 the byte-fallback tokens "<0x00>".."<0xFF>";
// encoding (run.c's rule, SentencePiece-like) prepends a space, looks each
// UTF-8 character up, falls back to bytes, then merges the adjacent pair whose
// joined string has the highest score, until none exists.
//
//
// What it teaches: a SentencePiece-style vocabulary is pieces with scores; the
// encoder starts from characters (falling back to bytes) and greedily merges
// the best-scoring adjacent pair.
#pragma once

#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/tokenizers/tokenizer.h"

namespace plab {

class Llama2cTokenizer final : public Tokenizer {
public:
    static constexpr int kBos = 1;
    static constexpr int kEos = 2;
    static constexpr int kFirstByteToken = 3;  // "<0x00>"
    // <unk> <s> </s> and the 256 byte tokens the encoder falls back to: the
    // fewest tokens a vocabulary of this layout can have.
    static constexpr int kMinVocab = kFirstByteToken + 256;

    // Throws plab::Error for fewer than kMinVocab pieces.
    Llama2cTokenizer(std::vector<std::string> pieces, std::vector<float> scores);
    // Reads V entries (V = the model's vocab_size, which the file does not store).
    static Llama2cTokenizer load(const std::string& path, int vocab_size);
    // The same from bytes in memory; `where` names them in errors.
    static Llama2cTokenizer parse(std::span<const char> bytes, int vocab_size,
                                  const std::string& where);
    void save(const std::string& path) const;

    std::string kind() const override { return "llama2.c"; }
    int vocab_size() const override { return static_cast<int>(pieces_.size()); }
    int bos_id() const override { return kBos; }
    int eos_id() const override { return kEos; }
    // The piece's bytes, <0xNN> as the byte; the dummy prefix space kept.
    std::string token_bytes(int32_t id) const override;
    std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;
    std::string decode(const std::vector<int32_t>& ids) const override;
    std::string token_text(int32_t id) const override;

    // A token's piece as the file stores it (' ' for SentencePiece's '▁') and its score.
    const std::string& piece(int32_t id) const { return pieces_.at(std::size_t(id)); }
    float score(int32_t id) const { return scores_.at(std::size_t(id)); }

private:
    int lookup(const std::string& piece) const;
    // run.c's encoding, each token with the offset of its first byte in the text.
    std::vector<int32_t> encode_starts(std::string_view text,
                                       std::vector<std::size_t>& starts) const override;
    std::vector<std::string> pieces_;
    std::vector<float> scores_;
    std::unordered_map<std::string, int> ids_;
};

}  // namespace plab
