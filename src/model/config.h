// ModelConfig: the shape of a tiny Llama-style decoder.
//
// What it teaches: a handful of integers fixes every tensor's shape and the
// cost of prefill. Letters as in lessons/GLOSSARY.md.
#pragma once

#include <cstddef>
#include <string>

namespace plab {

struct ModelConfig {
    int dim = 0;          // D: width of the residual stream
    int n_layers = 0;     // L
    int n_heads = 0;      // H: query heads
    int n_kv_heads = 0;   // Hkv: key/value heads (< H means grouped-query attention)
    int head_dim = 0;     // Dh: usually D / H, must be even (RoPE rotates pairs)
    int hidden_dim = 0;   // F: SwiGLU hidden width
    int vocab_size = 0;   // V
    int max_seq_len = 0;  // longest prompt + generation the model accepts
    double rope_theta = 10000.0;
    float norm_eps = 1e-5f;
    bool tied_embeddings = false;  // classifier shares the token-embedding matrix

    // The largest value validate() accepts for each integer field (the smallest is 1).
    static constexpr int kMaxDim = 1 << 16, kMaxLayers = 1024, kMaxHeads = 1024, kMaxHeadDim = 1024,
                         kMaxHidden = 1 << 18, kMaxVocab = 1 << 22, kMaxSeqLen = 1 << 20;

    // Throws plab::Error naming the first invalid field and the valid range.
    void validate() const;

    // Parameter count (tied classifier counted once).
    std::size_t n_params() const;
    // K and V floats stored per token across all layers: 2 · L · Hkv · Dh.
    std::size_t kv_floats_per_token() const;
    std::string summary() const;  // one line: "D=64 L=2 H=4 Hkv=2 Dh=16 F=176 V=258 T=256"
};

}  // namespace plab
