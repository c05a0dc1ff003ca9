// Loading and saving a model: Hugging Face style safetensors + config.json.
//
// A model directory holds
//   config.json          Llama config keys (hidden_size, num_hidden_layers, ...)
//                        plus "plab_tokenizer": "byte" | a tokenizer file name
//   model.safetensors    F32 tensors under Hugging Face Llama names
// Every failure (missing file, truncated data, wrong header, shapes that do
// not match the config, NaN weights) is a plab::Error naming the file and
// what would be valid.
#pragma once

#include <memory>
#include <string>

#include "model/model.h"

namespace plab {

// The directory used when no --model is given: $PLAB_MODEL, else assets/model.
std::string default_model_path();

// Loads a model directory (or its model.safetensors / config.json path). A
// path "assets/NAME" that does not exist here names the shipped assets
// (assets/model, assets/draft) wherever plab runs.
Model load_model(const std::string& path);
// load_model(path), or with "" the default model named as the user knows it
// ($PLAB_MODEL as set, else "assets/model") rather than by this checkout's
// absolute path: what a command prints then reads the same on every machine.
Model load_model_or_default(const std::string& path);
// Writes config.json + model.safetensors into `dir` (created if missing).
void save_model(const Weights& weights, const std::string& tokenizer_name, const std::string& dir);

// Config <-> Hugging Face config.json text.
ModelConfig config_from_json(const std::string& json_text, const std::string& where);
std::string config_to_json(const ModelConfig& config, const std::string& tokenizer_name);

}  // namespace plab
