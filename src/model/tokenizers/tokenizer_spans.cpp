// Token spans: which bytes of the text each token was made from (tokenizer.h).
//
// What it teaches: a token is not always a substring of the text. SentencePiece
// puts a '▁' before the text that the text never had; a character outside the
// vocabulary becomes several byte tokens, each one byte of it; an added token
// may take the spaces beside it along. So a span is not found by searching for
// a token's bytes in the text afterwards: for " hi" a SentencePiece tokenizer
// may give "▁" (its own inserted space) then "▁hi" (the text's space and "hi"),
// and a search would hand the text's space to the first token. Each tokenizer
// knows where every token starts while it encodes (encode_starts); the spans
// are built from those starts here, in one place, for every tokenizer:
//
//   text             " hi"             (3 bytes; SentencePiece reads "▁▁hi")
//   tokens, starts   "▁" 0, "▁hi" 0
//   spans            "▁" [0,0), "▁hi" [0,3)   each token ends where the next starts
//
// Left out: character offsets (a span is in bytes; `plab tokenize` counts the
// characters of the whole text).
#include <string>

#include "core/error.h"
#include "model/tokenizers/tokenizer.h"

namespace plab {

std::string Tokenizer::token_bytes(int32_t id) const {
    return decode({id});
}

std::vector<int32_t> Tokenizer::encode_starts(std::string_view text,
                                              std::vector<std::size_t>& starts) const {
    // Tokens whose bytes are the text itself: each starts where the one before ended.
    std::vector<int32_t> ids = encode(text, false);
    starts.clear();
    std::size_t at = 0;
    for (int32_t id : ids) {
        const std::string b = token_bytes(id);
        PLAB_ASSERT(text.compare(at, b.size(), b) == 0 && at + b.size() <= text.size());
        starts.push_back(at);
        at += b.size();
    }
    PLAB_ASSERT(at == text.size());
    return ids;
}

std::vector<TokenSpan> Tokenizer::encode_with_spans(std::string_view text, bool add_bos) const {
    std::vector<TokenSpan> spans;
    // 1. The BOS of add_bos (what encode adds to an empty text) covers no byte.
    for (int32_t id : encode(std::string_view(), add_bos)) spans.push_back({id, 0, 0});
    // 2. Each token of the text runs from its start to the next token's start;
    // the first from 0 (bytes dropped before it are its own), the last to the end.
    std::vector<std::size_t> starts;
    const std::vector<int32_t> ids = encode_starts(text, starts);
    PLAB_ASSERT(starts.size() == ids.size());
    for (std::size_t k = 0; k < ids.size(); ++k) {
        const std::size_t start = k == 0 ? 0 : starts[k];
        const std::size_t end = k + 1 < ids.size() ? starts[k + 1] : text.size();
        PLAB_ASSERT(start <= end && end <= text.size());
        spans.push_back({ids[k], start, end});
    }
    return spans;
}

}  // namespace plab
