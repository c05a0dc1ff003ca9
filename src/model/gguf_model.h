// A Llama model as a GGUF file: llama.cpp's tensor names and metadata keys,
// mapped to the engine's Weights and back.
//
// What it teaches: the same model under another format's names.
//   GGUF (llama.cpp)                 Hugging Face / this engine
//   token_embd.weight                model.embed_tokens.weight
//   blk.N.attn_norm.weight           model.layers.N.input_layernorm.weight
//   blk.N.attn_q/k/v.weight          ...self_attn.q/k/v_proj.weight  (q, k rows permuted)
//   blk.N.attn_output.weight         ...self_attn.o_proj.weight
//   blk.N.ffn_norm.weight            ...post_attention_layernorm.weight
//   blk.N.ffn_gate/up/down.weight    ...mlp.gate/up/down_proj.weight
//   output_norm.weight               model.norm.weight
//   output.weight                    lm_head.weight (absent: tied to token_embd)
// and the config from llama.* keys (embedding_length, block_count,
// feed_forward_length, attention.head_count(_kv), attention.key_length,
// rope.freq_base, attention.layer_norm_rms_epsilon, context_length). llama.cpp
// rotates RoPE pairs interleaved, (2i, 2i+1), as Meta's and llama2.c's files
// do, so q/k rows are permuted on the way in and out (model/rope_permute.h)
// and the logits stay bit for bit the same.
// Refused by name: other architectures, partial rotary (rope.dimension_count <
// key_length), RoPE scaling (rope.scaling.type other than none, rope_freqs),
// tensors it does not expect. Writing: F32, or F16 with 1-D norms kept F32 (as
// llama.cpp's convert_hf_to_gguf.py does).
#pragma once

#include <span>
#include <string>

#include "model/binary_read.h"
#include "model/model.h"

namespace plab {

bool is_gguf_path(const std::string& path);  // a regular file whose first bytes are "GGUF"
Model load_gguf_model(const std::string& path, const LoadLimits& limits = {});
// Parses a GGUF model held in memory (what the fuzzer drives).
Model parse_gguf_model(std::span<const char> bytes, const std::string& where,
                       const LoadLimits& limits = {});

enum class GgufWeightType { kF32, kF16 };
// Writes `m` (weights and, where GGUF can hold it, tokenizer) to `path`. Returns
// "" or a sentence saying why the tokenizer was not written.
std::string save_gguf_model(const Model& m, const std::string& path, GgufWeightType type);

}  // namespace plab
