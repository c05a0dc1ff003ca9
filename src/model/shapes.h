// Named model shapes for random models: "small" (the quick default of tests
// and demos) and "stories15m" (llama2.c's smallest TinyStories model, the
// benchmark shape of `plab bench` and `plab compare --random`).
#pragma once

#include <string>
#include <vector>

#include "model/config.h"

namespace plab {

std::vector<std::string> shape_names();
// Throws plab::Error listing the valid names for an unknown one.
ModelConfig named_shape(const std::string& name);

}  // namespace plab
