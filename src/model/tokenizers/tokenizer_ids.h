// IdTokenizer: the tokenizer of a model that comes without one.
#pragma once

#include <string>
#include <vector>

#include "model/tokenizers/tokenizer.h"

namespace plab {

// Token ids in, token ids out: "1 2 3" <-> {1, 2, 3}. Used when a model comes
// without a tokenizer the engine understands (prompts are then token ids).
class IdTokenizer final : public Tokenizer {
public:
    IdTokenizer(int vocab_size, int bos, int eos) : vocab_(vocab_size), bos_(bos), eos_(eos) {}
    std::string kind() const override { return "ids"; }
    int vocab_size() const override { return vocab_; }
    int bos_id() const override { return bos_; }
    int eos_id() const override { return eos_; }
    std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;
    std::string decode(const std::vector<int32_t>& ids) const override;
    std::string token_text(int32_t id) const override;   // "#42"
    std::string token_bytes(int32_t id) const override;  // "42"

private:
    // Each id starts at its first digit; the separators after it are its own.
    std::vector<int32_t> encode_starts(std::string_view text,
                                       std::vector<std::size_t>& starts) const override;
    int vocab_, bos_, eos_;
};

}  // namespace plab
