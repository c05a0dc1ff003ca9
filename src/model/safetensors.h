// safetensors: the Hugging Face tensor file format, read and written by hand.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {...}}, then the raw little-endian tensor bytes. Reading
// checks every claim of the header against the file (lengths, offsets, shapes)
// so that a truncated or lying file is rejected with a clear message.
// F16 and BF16 tensors are widened to float on load; writing is F32 only.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "model/binary_read.h"

namespace plab {

struct HostTensor {
    std::vector<std::int64_t> shape;
    std::vector<float> data;
};

using TensorMap = std::map<std::string, HostTensor>;

// Parses a whole safetensors file held in memory; `where` names it in errors.
// Every claim of the header is checked before anything is allocated, and the
// float32 tensors may not need more than limits.max_bytes.
TensorMap parse_safetensors(std::span<const char> bytes, const std::string& where,
                            const LoadLimits& limits = {});
// Maps the file into memory and parses it (one copy of the data: the floats).
TensorMap read_safetensors(const std::string& path, const LoadLimits& limits = {});
void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace plab
