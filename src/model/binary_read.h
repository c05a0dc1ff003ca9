// Reading the little-endian binary files of llama2.c (checkpoint and
// tokenizer.bin): the whole file into memory, then fields at byte offsets.
// Every offset is checked by the caller against the file's size first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace plab {

// The file's bytes; `expected` names what a readable file would be, for the error.
std::vector<char> read_binary_file(const std::string& path, const std::string& expected);

// The int32 at byte `off` (host order: little-endian, as llama2.c writes it).
std::int32_t i32_at(const std::vector<char>& bytes, std::size_t off);

}  // namespace plab
