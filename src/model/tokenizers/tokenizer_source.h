// A tokenizer named on the command line (`--tokenizer` of `plab tokenize` and
// `plab random-model`), with the files a model folder needs to use it.
//
// What it teaches: a model folder says which tokenizer its ids mean
// (config.json's "plab_tokenizer"); the same weights read through another
// tokenizer read other rows of the embedding. So a tokenizer is copied into
// the folder with the model, never looked up elsewhere later.
//
//   byte         the byte tokenizer: 256 bytes + BOS + EOS
//   bpe          the shipped model's byte-level BPE (assets/model/tokenizer.bpe)
//   ids          none: prompts are token ids (needs the model's vocabulary size)
//   PATH         a Hugging Face tokenizer.json (or a folder holding one; a
//                tokenizer_config.json beside it comes along), a plab-bpe
//                *.bpe file, or a llama2.c tokenizer.bin
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/tokenizers/tokenizer.h"

namespace plab {

struct TokenizerSource {
    std::unique_ptr<Tokenizer> tokenizer;
    std::string config_name;  // config.json's "plab_tokenizer": "byte", "tokenizer.json", ...
    // (file to copy, its name in the model folder), in order.
    std::vector<std::pair<std::string, std::string>> files;
    // A llama2.c tokenizer.bin holds no vocabulary size: the model's must be
    // exactly its token count (else only at least it).
    bool exact_vocab = false;
};

// `ids_vocab`: the vocabulary of an "ids" tokenizer (0: refused, no model to size it).
// Throws plab::Error naming the spec and what is valid.
TokenizerSource open_tokenizer_source(const std::string& spec, int ids_vocab);

}  // namespace plab
