// GGUF: the model file format of llama.cpp (and Ollama, LM Studio), read and
// written by hand.
//
// Layout (version 3; version 2 is the same; all little-endian):
//   "GGUF"  u32 version  u64 tensor_count  u64 kv_count
//   kv_count × (string key, u32 value_type, value)      the metadata
//   tensor_count × (string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type,
//                   u64 offset)                          the tensor infos
//   zero padding to general.alignment (default 32), then the tensor data;
//   each tensor at data_start + offset, offset a multiple of the alignment.
// A string is u64 length + bytes (no terminator). ne[0] is the fastest-varying
// dimension: a (rows, cols) row-major matrix has ne = [cols, rows].
//
// What it teaches: a GGUF file is self-describing — the shape, the RoPE
// base, the tokenizer's vocabulary and merges all travel in typed key/value
// metadata beside the tensors, so one file is the whole model. Parsing treats
// it as untrusted input: every count and size is checked against the bytes
// still unread and against LoadLimits before anything is allocated.
// Source: ggml's docs/gguf.md (the specification) and gguf.cpp (its reader).
// Left out: big-endian files, tensor types other than F32, F16, BF16 and
// Q8_0 (refused by name), version 1 (32-bit counts, 2023).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "model/binary_read.h"
#include "model/safetensors.h"

namespace plab::gguf {

// Value types of metadata, numbered as the file numbers them.
enum class ValueType : std::uint32_t {
    kU8 = 0,
    kI8 = 1,
    kU16 = 2,
    kI16 = 3,
    kU32 = 4,
    kI32 = 5,
    kF32 = 6,
    kBool = 7,
    kString = 8,
    kArray = 9,
    kU64 = 10,
    kI64 = 11,
    kF64 = 12,
};
const char* value_type_name(ValueType t);

// The longest tensor name ggml reads (GGML_MAX_NAME - 1); longer ones are refused.
constexpr std::uint64_t kMaxTensorNameBytes = 64;

// ggml tensor types this reader widens to float32 (ggml's numbering).
enum class TensorType : std::uint32_t { kF32 = 0, kF16 = 1, kQ8_0 = 8, kBF16 = 30 };
// The name of any ggml type number ("Q4_K", "IQ2_XS", ...), for refusals.
std::string tensor_type_name(std::uint32_t t);

struct Value;
using Array = std::vector<Value>;
// One metadata value: integers of every width as int64/uint64, floats as double.
struct Value {
    ValueType type = ValueType::kU8;
    ValueType elem = ValueType::kU8;  // element type when type == kArray
    std::variant<std::int64_t, std::uint64_t, double, bool, std::string, Array> v;
};

struct TensorInfo {
    std::string name;
    std::vector<std::uint64_t> ne;  // GGUF order: ne[0] fastest
    std::uint32_t type = 0;
    std::uint64_t offset = 0;   // from the start of the data section
    std::uint64_t n_bytes = 0;  // what its type and ne take
    // Row-major shape (ne reversed), as the engine's weights are written.
    std::vector<std::int64_t> shape() const;
};

struct File {
    std::uint32_t version = 3;
    std::map<std::string, Value> kv;
    std::vector<TensorInfo> tensors;  // in file order
    std::uint64_t alignment = 32;
    std::uint64_t data_start = 0;  // byte offset of the data section

    const Value* find(const std::string& key) const;
    // Typed getters: throw plab::Error naming the key and the type it has.
    std::string get_string(const std::string& key) const;
    std::int64_t get_int(const std::string& key) const;  // any integer type, range-checked
    double get_float(const std::string& key) const;      // F32 or F64
    bool get_bool(const std::string& key) const;
    const Array& get_array(const std::string& key) const;
    const TensorInfo* find_tensor(const std::string& name) const;
};

// Parses a whole GGUF file held in memory; `where` names it in errors. Every
// tensor's bytes are checked to lie inside `bytes`, not to overlap another,
// and to need at most limits.max_bytes as float32 in all.
File parse(std::span<const char> bytes, const std::string& where, const LoadLimits& limits = {});
// A tensor of a parsed file, widened to float32 (row-major shape). Refuses a
// type other than F32, F16, BF16 and Q8_0, naming it.
HostTensor read_tensor(const File& file, const TensorInfo& t, std::span<const char> bytes,
                       const std::string& where);

// Writing (gguf_write.cpp): metadata in insertion order, tensors F32 or F16.
struct TensorOut {
    std::string name;
    std::vector<std::int64_t> shape;  // row-major
    const std::vector<float>* data;
    TensorType type = TensorType::kF32;  // kF32 or kF16
};
Value make_string(std::string s);
Value make_u32(std::uint32_t x);
Value make_i32(std::int32_t x);
Value make_f32(float x);
Value make_bool(bool b);
Value make_string_array(std::vector<std::string> items);
Value make_f32_array(const std::vector<float>& items);
Value make_i32_array(const std::vector<std::int32_t>& items);
void write(const std::string& path, const std::vector<std::pair<std::string, Value>>& kv,
           const std::vector<TensorOut>& tensors, std::uint64_t alignment = 32);

}  // namespace plab::gguf
