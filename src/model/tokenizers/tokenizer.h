// Tokenizer: text <-> token ids.
//
// What it teaches: the model never sees text, only ids; tokenization is the
// first stage of a request and part of TTFT, not of prefill. The default is
// byte-level: ids 0..255 are the bytes of the UTF-8 text, 256 is BOS (begin of
// sequence) and 257 is EOS (end of sequence); every string round-trips.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace plab {

class Tokenizer {
public:
    virtual ~Tokenizer() = default;
    virtual std::string kind() const = 0;  // "byte", "bpe", "llama2.c"
    virtual int vocab_size() const = 0;
    virtual int bos_id() const = 0;
    virtual int eos_id() const = 0;
    // Text to ids, BOS first when add_bos.
    virtual std::vector<int32_t> encode(std::string_view text, bool add_bos) const = 0;
    // Ids to text; BOS/EOS are dropped, bytes are joined back into UTF-8.
    virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
    // How one token is shown to a person: "the", "\n", "<0xE2>", "<bos>".
    virtual std::string token_text(int32_t id) const = 0;
};

class ByteTokenizer final : public Tokenizer {
public:
    static constexpr int kBos = 256;
    static constexpr int kEos = 257;
    std::string kind() const override { return "byte"; }
    int vocab_size() const override { return 258; }
    int bos_id() const override { return kBos; }
    int eos_id() const override { return kEos; }
    std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;
    std::string decode(const std::vector<int32_t>& ids) const override;
    std::string token_text(int32_t id) const override;
};

}  // namespace plab
