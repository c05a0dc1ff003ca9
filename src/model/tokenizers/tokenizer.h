// Tokenizer: text <-> token ids.
//
// What it teaches: the model never sees text, only ids; tokenization is the
// first stage of a request and part of TTFT, not of prefill. The default is
// byte-level: ids 0..255 are the bytes of the UTF-8 text, 256 is BOS (begin of
// sequence) and 257 is EOS (end of sequence); every string round-trips.
//
// Tokens you can see (`plab tokenize`, lesson 5): encode_with_spans() gives
// each token the bytes of the text it was made from, so a reader sees where the
// text was cut. Built in one place (tokenizer_spans.cpp) from where each token
// starts, which each tokenizer tracks through its own encoding (encode_starts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace plab {

// One token of a text and the bytes of the text it was made from: text[start, end).
struct TokenSpan {
    int32_t id = 0;
    std::size_t start = 0;
    std::size_t end = 0;
};

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
    // How one token is shown to a person: "the", "\n", "<0xE2>", "<bos>". A
    // model may have more rows than its tokenizer has tokens (padding rows; a
    // random model's --vocab): such an id is shown "#300" by the byte, BPE and
    // tokenizer.json tokenizers, and decode() drops it.
    virtual std::string token_text(int32_t id) const = 0;
    // The bytes decode() writes for this token in the middle of a text (a
    // SentencePiece '▁' as the space, <0xE2> as the byte 0xE2); "" for a token
    // decode() drops (BOS, EOS). Default: decode({id}).
    virtual std::string token_bytes(int32_t id) const;

    // encode(text, add_bos), each token with the bytes text[start, end) it was
    // made from. The spans tile the text: in order, each starting where the one
    // before ended, from 0 to text.size(), so their concatenation is the text.
    // Covering no byte (start == end): the BOS of add_bos, and a token made
    // only of what the tokenizer inserted (SentencePiece's '▁' before a text).
    // A byte-fallback token covers its one byte, even inside a UTF-8 character;
    // an added token ("<|begin_of_text|>" typed in the text) its text and the
    // spaces it strips. Bytes the tokenizer drops (a character with no token and
    // no <unk>) belong to the token before them (to the first, at the start);
    // a text whose every character is dropped has no tokens.
    std::vector<TokenSpan> encode_with_spans(std::string_view text, bool add_bos) const;

protected:
    // encode(text, false), and in `starts` for each token the offset of the
    // first byte of `text` it was made from; a token the tokenizer inserted
    // before byte i (SentencePiece's dummy '▁') starts at i. Offsets never
    // decrease. Default: token_bytes() laid end to end, right for tokenizers
    // whose tokens' bytes are the text itself (byte, BPE; checked); a tokenizer
    // that inserts, replaces or drops bytes tracks the offsets through its own
    // encoding instead, where no later guess is needed (llama2.c, tokenizer.json).
    virtual std::vector<int32_t> encode_starts(std::string_view text,
                                               std::vector<std::size_t>& starts) const;
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
    std::string token_bytes(int32_t id) const override;
};

}  // namespace plab
