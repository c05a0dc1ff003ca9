// The viewer tests' model: tiny, seeded, random, with the byte tokenizer and
// GQA (2 query heads per K/V head) over two layers, so every backend (the
// emulated GPU ones too) answers at once and prompts are their bytes.
#pragma once

#include <memory>
#include <string>

#include "model/model_io.h"
#include "model/tokenizers/tokenizer.h"
#include "model/weights.h"
#include "test_util.h"

namespace plab::test {

inline Model tiny_viewer_model(int max_seq_len = 64, std::uint64_t seed = 2024) {
    Model m;
    m.weights = make_random_weights(small_config(32, 2, 4, 2, 8, 48, 258, max_seq_len), seed);
    m.tokenizer = std::make_unique<ByteTokenizer>();
    m.source = "tiny random model, seed " + std::to_string(seed);
    return m;
}

}  // namespace plab::test
