// Weights: a model's tensors in host memory, in Hugging Face Llama layout.
//
// Shapes use the letters of lessons/GLOSSARY.md; every matrix is row-major and
// stored like a torch Linear weight, (out_features, in_features), so y = x·Wᵀ.
// q/k rows follow the half-split RoPE pairing (core/rope.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace plab {

struct LayerWeights {
    std::vector<float> attn_norm;  // (D)            input_layernorm
    std::vector<float> wq;         // (H·Dh, D)      q_proj
    std::vector<float> wk;         // (Hkv·Dh, D)    k_proj
    std::vector<float> wv;         // (Hkv·Dh, D)    v_proj
    std::vector<float> wo;         // (D, H·Dh)      o_proj
    std::vector<float> ffn_norm;   // (D)            post_attention_layernorm
    std::vector<float> w_gate;     // (F, D)         mlp.gate_proj
    std::vector<float> w_up;       // (F, D)         mlp.up_proj
    std::vector<float> w_down;     // (D, F)         mlp.down_proj
};

struct Weights {
    ModelConfig config;
    std::vector<float> tok_embeddings;  // (V, D)   embed_tokens
    std::vector<LayerWeights> layers;   // L of them
    std::vector<float> final_norm;      // (D)      model.norm
    std::vector<float> classifier;      // (V, D)   lm_head; empty when tied to tok_embeddings

    const std::vector<float>& classifier_or_tied() const {
        return config.tied_embeddings ? tok_embeddings : classifier;
    }
    // Checks every tensor's size against config and that all values are finite.
    void validate() const;
};

// A tensor read from a model file has the shape its config (or GGUF
// metadata: `needed_by`) implies: one error naming the file, the tensor and
// both shapes otherwise (model_io.cpp's and gguf_model.cpp's readers).
void check_tensor_shape(const std::string& file, const std::string& name,
                        const std::vector<std::int64_t>& got, const std::vector<std::int64_t>& want,
                        const char* needed_by);

// Seeded random weights (normal, std 0.02 like GPT-2/Llama init; norms near 1),
// so that tests and benchmarks never run on zeros.
Weights make_random_weights(const ModelConfig& config, std::uint64_t seed);

}  // namespace plab
