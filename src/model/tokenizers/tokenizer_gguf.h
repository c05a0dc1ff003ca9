// A GGUF file's tokenizer: read from its metadata into the tokenizer classes
// the engine already has, and written back.
//
// What it teaches: GGUF stores a tokenizer as data, not code — the vocabulary
// (tokenizer.ggml.tokens), a score per token or a merge list, each token's
// type (normal, control, byte, ...) and the special ids — and the encoding
// rule is named by tokenizer.ggml.model (and .pre for the split regex). So the
// same encoders serve every format:
//   "llama" (SentencePiece-style, scores)  -> Llama2cTokenizer (llama2.c's rule:
//            greedy best-score merges, byte fallback; '▁' is stored as ' ')
//   "gpt2"  (byte-level BPE, merges)       -> HfTokenizer, from the tokenizer.json
//            the metadata spells (pre "gpt-2", "llama-bpe", "qwen2"), or
//            BpeTokenizer for pre "plab-bpe" (the shipped model's own rule)
//   "none"  (no vocabulary)                -> ByteTokenizer when V = 258, else ids
// Refused with one line: other models (bert, t5, rwkv, ...), other pre-tokenizers,
// and "llama" vocabularies whose byte tokens are not at ids 3..258 with <s> = 1,
// </s> = 2 (Llama 2's layout, which llama2.c's rule assumes).
// Sources: ggml's docs/gguf.md (tokenizer.ggml.* keys); llama.cpp's llama-vocab.cpp
// (token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/gguf.h"
#include "model/tokenizers/tokenizer.h"

namespace plab {

// The tokenizer of a parsed GGUF file for a model of `vocab_size` tokens.
std::unique_ptr<Tokenizer> tokenizer_from_gguf(const gguf::File& file, int vocab_size,
                                               const std::string& where);

// tokenizer.ggml.* metadata for `tok` (llama2.c, plab BPE, byte, ids, and a
// byte-level tokenizer.json whose split GGUF names). A tokenizer GGUF cannot hold
// (a SentencePiece-style tokenizer.json, say) returns an empty list and sets *why
// to a sentence saying so.
std::vector<std::pair<std::string, gguf::Value>> tokenizer_to_gguf(const Tokenizer& tok,
                                                                   std::string* why);

}  // namespace plab
