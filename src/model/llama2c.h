// llama2.c checkpoints (.bin) and tokenizers (tokenizer.bin).
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
// tokenizer.bin: int32 max_token_length, then for each of the model's V
// tokens: float32 score, int32 byte length, the bytes. Ids 0/1/2 are
// <unk>/<s>/</s>, ids 3..258 the byte-fallback tokens "<0x00>".."<0xFF>";
// encoding (run.c's rule, SentencePiece-like) prepends a space, looks each
// UTF-8 character up, falls back to bytes, then merges the adjacent pair whose
// joined string has the highest score, until none exists.
//
// Left out: the int8 "v2" (Q8_0) export, Meta's consolidated.pth.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "model/model_io.h"
#include "model/tokenizer.h"
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
Weights read_llama2c_checkpoint(const std::string& path, Llama2cInfo* info = nullptr);
// Writes `w` as llama2.c version 0 (legacy) or 1. The config must be one the
// format can express (head_dim = dim / n_heads, rope_theta 10000, eps 1e-5).
void write_llama2c_checkpoint(const Weights& w, const std::string& path, int version);

// A .bin checkpoint plus, when present beside it, tokenizer.bin (or the
// tokenizer.bpe that `plab convert` writes for BPE models); without one, an
// IdTokenizer (prompts given as token ids).
Model load_llama2c_model(const std::string& path);

class Llama2cTokenizer final : public Tokenizer {
public:
    static constexpr int kBos = 1;
    static constexpr int kEos = 2;
    static constexpr int kFirstByteToken = 3;  // "<0x00>"

    Llama2cTokenizer(std::vector<std::string> pieces, std::vector<float> scores);
    // Reads V entries (V = the model's vocab_size, which the file does not store).
    static Llama2cTokenizer load(const std::string& path, int vocab_size);
    void save(const std::string& path) const;

    std::string kind() const override { return "llama2.c"; }
    int vocab_size() const override { return static_cast<int>(pieces_.size()); }
    int bos_id() const override { return kBos; }
    int eos_id() const override { return kEos; }
    std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;
    std::string decode(const std::vector<int32_t>& ids) const override;
    std::string token_text(int32_t id) const override;

private:
    int lookup(const std::string& piece) const;
    std::vector<std::string> pieces_;
    std::vector<float> scores_;
    std::unordered_map<std::string, int> ids_;
};

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
    std::string token_text(int32_t id) const override;  // "#42"

private:
    int vocab_, bos_, eos_;
};

}  // namespace plab
