// llama2.c checkpoints (.bin).
//
// What it teaches: a checkpoint format is a header plus tensors in an agreed
// order; everything the header does not say is a convention. llama2.c
// (Karpathy, 2023; export.py) writes float32 little-endian tensors, torch
// Linear layout (out, in), in two versions:
//
//   // clang-format off
//   legacy (v0): 7 int32 header  dim hidden_dim n_layers n_heads n_kv_heads vocab_size seq_len
//                vocab_size < 0 means "separate classifier" (|vocab_size| tokens)
//                tok_embeddings (V,D) | attn_norm (L,D) | wq (L,H·Dh,D) | wk (L,Hkv·Dh,D)
//                | wv | wo (L,D,H·Dh) | ffn_norm (L,D) | w1=gate (L,F,D) | w2=down (L,D,F)
//                | w3=up (L,F,D) | final_norm (D) | freqs_cos (T,Dh/2) | freqs_sin (T,Dh/2)
//                | [wcls (V,D)]
//   v1:          uint32 magic 0x616b3432 ("ak42") | int32 version 1 | the 7 ints (vocab > 0)
//                | uint8 shared_classifier | zeros up to byte 256
//                attn_norm (L,D) | ffn_norm (L,D) | final_norm (D) | tok_embeddings (V,D)
//                | wq | wk | wv | wo | w1 | w2 | w3 | [wcls (V,D)]
//   // clang-format on
//
// Implied by the format (not stored): head_dim = dim / n_heads, rope_theta =
// 10000, norm_eps = 1e-5, and the *interleaved* RoPE pairing (2i, 2i+1). The
// engine uses the half-split pairing, so wq/wk rows are permuted on load and
// back on save (model/rope_permute.h); a round trip is bitwise exact.
//
// tokenizer.bin, the format's tokenizer, is model/tokenizers/tokenizer_llama2c.h
// (included here: a reader of one usually wants the other); the model
// loader that pairs a .bin with the tokenizer beside it is model/model_io.cpp.
//
// Left out: the int8 "v2" (Q8_0) export, Meta's consolidated.pth.
#pragma once

#include <span>
#include <string>

#include "model/binary_read.h"
#include "model/tokenizers/tokenizer_llama2c.h"
#include "model/weights.h"

namespace plab {

struct Llama2cInfo {
    int version = 0;  // 0 = legacy header, 1 = "ak42" v1
    bool shared_classifier = true;
};

// True when the file starts with the v1 magic or looks like a legacy header.
bool looks_like_llama2c(const std::string& path);

// Reads a .bin checkpoint into engine (half-split) layout. Every size claimed
// by the header is checked against the file; errors name the file and field.
// The same for a checkpoint held in memory (what the file reader maps, what the
// fuzzer feeds); `where` names it in errors. The weights may need at most
// limits.max_bytes.
Weights parse_llama2c_checkpoint(std::span<const char> bytes, const std::string& where,
                                 Llama2cInfo* info = nullptr, const LoadLimits& limits = {});
Weights read_llama2c_checkpoint(const std::string& path, Llama2cInfo* info = nullptr,
                                const LoadLimits& limits = {});
// Writes `w` as llama2.c version 0 (legacy) or 1. The config must be one the
// format can express (head_dim = dim / n_heads, rope_theta 10000, eps 1e-5).
void write_llama2c_checkpoint(const Weights& w, const std::string& path, int version);

}  // namespace plab
