// Model: what a loaded model file gives the engine — its weights, its
// tokenizer, and where it came from. Every format's loader (model_io.h,
// gguf_model.h) returns one; it is a header of its own so that the loaders
// sit below model_io.h, which chooses among them.
#pragma once

#include <memory>
#include <string>

#include "model/tokenizers/tokenizer.h"
#include "model/weights.h"

namespace plab {

struct Model {
    Weights weights;
    std::unique_ptr<Tokenizer> tokenizer;
    std::string source;  // where it came from, for `plab info`
};

}  // namespace plab
