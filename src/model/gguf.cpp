// GGUF reading and writing (format in gguf.h).
#include "model/gguf.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "model/number_formats.h"

namespace plab::gguf {
namespace {

// Far above real files (Llama 3: 128,256 tokens + 280,147 merges), far below
// the memory a lying count could otherwise make the parser allocate.
constexpr std::uint64_t kMaxMetadataItems = std::uint64_t(1) << 22;
constexpr std::uint64_t kMaxKeyBytes = 65535;  // the specification's limit
constexpr std::uint32_t kMaxDims = 4;          // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 4;

// Reads little-endian fields, each checked against the bytes left.
struct Cursor {
    std::span<const char> bytes;
    std::size_t off = 0;
    const std::string& where;
    std::uint64_t items = 0;  // metadata values read so far

    std::size_t left() const { return bytes.size() - off; }
    void need(std::uint64_t n, const char* what) {
        PLAB_CHECK(n <= left(), where << ": the file ends inside " << what << " at byte " << off
                                      << " (needs " << n << " bytes, " << left()
                                      << " left): truncated, or not a GGUF file");
    }
    template <typename T>
    T pod(const char* what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, bytes.data() + off, sizeof(T));
        off += sizeof(T);
        return v;
    }
    std::string str(const char* what, std::uint64_t max_len) {
        const auto n = pod<std::uint64_t>(what);
        PLAB_CHECK(n <= max_len, where << ": " << what << " at byte " << off - 8 << " claims " << n
                                       << " bytes; at most " << max_len << " are allowed");
        need(n, what);
        std::string s(bytes.data() + off, n);
        off += n;
        return s;
    }
};

std::size_t fixed_size(ValueType t) {
    switch (t) {
        case ValueType::kU8:
        case ValueType::kI8:
        case ValueType::kBool:
            return 1;
        case ValueType::kU16:
        case ValueType::kI16:
            return 2;
        case ValueType::kU32:
        case ValueType::kI32:
        case ValueType::kF32:
            return 4;
        case ValueType::kU64:
        case ValueType::kI64:
        case ValueType::kF64:
            return 8;
        case ValueType::kString:
            return 8;  // at least its length
        case ValueType::kArray:
            return 12;  // at least its type and count
    }
    return 0;
}

bool known_value_type(std::uint32_t t) {
    return t <= 12;
}

Value read_value(Cursor& c, ValueType type, const std::string& key, int depth) {
    PLAB_CHECK(++c.items <= kMaxMetadataItems,
               c.where << ": more than " << kMaxMetadataItems
                       << " metadata values; not a model file plab reads");
    Value v;
    v.type = type;
    switch (type) {
        case ValueType::kU8:
            v.v = std::uint64_t(c.pod<std::uint8_t>("a u8 value"));
            break;
        case ValueType::kI8:
            v.v = std::int64_t(c.pod<std::int8_t>("an i8 value"));
            break;
        case ValueType::kU16:
            v.v = std::uint64_t(c.pod<std::uint16_t>("a u16 value"));
            break;
        case ValueType::kI16:
            v.v = std::int64_t(c.pod<std::int16_t>("an i16 value"));
            break;
        case ValueType::kU32:
            v.v = std::uint64_t(c.pod<std::uint32_t>("a u32 value"));
            break;
        case ValueType::kI32:
            v.v = std::int64_t(c.pod<std::int32_t>("an i32 value"));
            break;
        case ValueType::kU64:
            v.v = c.pod<std::uint64_t>("a u64 value");
            break;
        case ValueType::kI64:
            v.v = c.pod<std::int64_t>("an i64 value");
            break;
        case ValueType::kF32:
            v.v = double(c.pod<float>("an f32 value"));
            break;
        case ValueType::kF64:
            v.v = c.pod<double>("an f64 value");
            break;
        case ValueType::kBool: {
            const auto b = c.pod<std::uint8_t>("a bool value");
            PLAB_CHECK(b <= 1, c.where << ": key " << key << " holds the bool byte " << int(b)
                                       << "; a bool is 0 or 1");
            v.v = b == 1;
            break;
        }
        case ValueType::kString:
            v.v = c.str("a string value", c.left());
            break;
        case ValueType::kArray: {
            PLAB_CHECK(depth < kMaxArrayDepth, c.where << ": key " << key
                                                       << " nests arrays deeper than "
                                                       << kMaxArrayDepth);
            const auto elem = c.pod<std::uint32_t>("an array's element type");
            PLAB_CHECK(known_value_type(elem), c.where << ": key " << key
                                                       << " is an array of value type " << elem
                                                       << "; GGUF value types are 0..12");
            v.elem = static_cast<ValueType>(elem);
            const auto n = c.pod<std::uint64_t>("an array's length");
            // Each element takes at least fixed_size bytes: a count the rest of the
            // file cannot hold is refused before anything is reserved.
            PLAB_CHECK(n <= c.left() / fixed_size(v.elem),
                       c.where << ": key " << key << " claims " << n << " array elements of type "
                               << value_type_name(v.elem) << " but only " << c.left()
                               << " bytes are left");
            Array items;
            items.reserve(n);
            for (std::uint64_t i = 0; i < n; ++i)
                items.push_back(read_value(c, v.elem, key, depth + 1));
            v.v = std::move(items);
            break;
        }
    }
    return v;
}

struct TypeTraits {
    TensorType type;
    const char* name;
    std::uint64_t block_values, block_bytes;
};
constexpr TypeTraits kReadable[] = {
    {TensorType::kF32, "F32", 1, 4},
    {TensorType::kF16, "F16", 1, 2},
    {TensorType::kQ8_0, "Q8_0", kQ8_0BlockValues, kQ8_0BlockBytes},
    {TensorType::kBF16, "BF16", 1, 2},
};

const TypeTraits* readable(std::uint32_t t) {
    for (const TypeTraits& r : kReadable)
        if (static_cast<std::uint32_t>(r.type) == t) return &r;
    return nullptr;
}

std::string dims_text(const std::vector<std::uint64_t>& ne) {
    std::ostringstream s;
    s << '[';
    for (std::size_t i = 0; i < ne.size(); ++i) s << (i ? ", " : "") << ne[i];
    s << ']';
    return s.str();
}

}  // namespace

const char* value_type_name(ValueType t) {
    static const char* const names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                        "bool", "string", "array", "u64", "i64", "f64"};
    const auto i = static_cast<std::uint32_t>(t);
    return i < 13 ? names[i] : "unknown";
}

std::string tensor_type_name(std::uint32_t t) {
    // ggml's enum ggml_type (ggml.h); gaps are types ggml has removed.
    static const char* const names[] = {
        "F32",   "F16",        "Q4_0",       "Q4_1",       "Q4_2",     "Q4_3",     "Q5_0",
        "Q5_1",  "Q8_0",       "Q8_1",       "Q2_K",       "Q3_K",     "Q4_K",     "Q5_K",
        "Q6_K",  "Q8_K",       "IQ2_XXS",    "IQ2_XS",     "IQ3_XXS",  "IQ1_S",    "IQ4_NL",
        "IQ3_S", "IQ2_S",      "IQ4_XS",     "I8",         "I16",      "I32",      "I64",
        "F64",   "IQ1_M",      "BF16",       "Q4_0_4_4",   "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",
        "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};
    if (t < sizeof names / sizeof names[0]) return names[t];
    return "type " + std::to_string(t);
}

std::vector<std::int64_t> TensorInfo::shape() const {
    std::vector<std::int64_t> s;
    for (auto it = ne.rbegin(); it != ne.rend(); ++it) s.push_back(static_cast<std::int64_t>(*it));
    return s;
}

const Value* File::find(const std::string& key) const {
    auto it = kv.find(key);
    return it == kv.end() ? nullptr : &it->second;
}

namespace {
const Value& need_key(const File& f, const std::string& key, const char* what) {
    const Value* v = f.find(key);
    PLAB_CHECK(v != nullptr, "the GGUF metadata has no key " << key << " (" << what << ")");
    return *v;
}
}  // namespace

std::string File::get_string(const std::string& key) const {
    const Value& v = need_key(*this, key, "a string");
    PLAB_CHECK(v.type == ValueType::kString,
               "GGUF key " << key << " is " << value_type_name(v.type) << "; expected a string");
    return std::get<std::string>(v.v);
}

std::int64_t File::get_int(const std::string& key) const {
    const Value& v = need_key(*this, key, "an integer");
    if (const auto* i = std::get_if<std::int64_t>(&v.v)) return *i;
    if (const auto* u = std::get_if<std::uint64_t>(&v.v)) {
        PLAB_CHECK(*u <= std::uint64_t(INT64_MAX),
                   "GGUF key " << key << " = " << *u << " is out of range");
        return static_cast<std::int64_t>(*u);
    }
    PLAB_CHECK(false,
               "GGUF key " << key << " is " << value_type_name(v.type) << "; expected an integer");
    return 0;
}

double File::get_float(const std::string& key) const {
    const Value& v = need_key(*this, key, "a number");
    if (const auto* d = std::get_if<double>(&v.v)) return *d;
    PLAB_CHECK(false,
               "GGUF key " << key << " is " << value_type_name(v.type) << "; expected f32 or f64");
    return 0;
}

bool File::get_bool(const std::string& key) const {
    const Value& v = need_key(*this, key, "true or false");
    PLAB_CHECK(v.type == ValueType::kBool,
               "GGUF key " << key << " is " << value_type_name(v.type) << "; expected a bool");
    return std::get<bool>(v.v);
}

const Array& File::get_array(const std::string& key) const {
    const Value& v = need_key(*this, key, "an array");
    PLAB_CHECK(v.type == ValueType::kArray,
               "GGUF key " << key << " is " << value_type_name(v.type) << "; expected an array");
    return std::get<Array>(v.v);
}

const TensorInfo* File::find_tensor(const std::string& name) const {
    for (const TensorInfo& t : tensors)
        if (t.name == name) return &t;
    return nullptr;
}

File parse(std::span<const char> bytes, const std::string& where, const LoadLimits& limits) {
    Cursor c{bytes, 0, where};
    PLAB_CHECK(bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0,
               where << ": does not start with the magic \"GGUF\"; not a GGUF file");
    c.off = 4;
    File f;
    f.version = c.pod<std::uint32_t>("the version");
    PLAB_CHECK(f.version == 2 || f.version == 3,
               where << ": GGUF version " << f.version
                     << "; plab reads versions 2 and 3 (version 1 is the 2023 draft)");
    const auto n_tensors = c.pod<std::uint64_t>("the tensor count");
    const auto n_kv = c.pod<std::uint64_t>("the metadata count");
    // A key/value pair takes at least 8 + 4 + 1 bytes, a tensor info 8 + 4 + 8 + 4 + 8.
    PLAB_CHECK(n_kv <= c.left() / 13 && n_tensors <= c.left() / 32,
               where << ": claims " << n_tensors << " tensors and " << n_kv
                     << " metadata keys, more than its " << bytes.size() << " bytes can hold");

    for (std::uint64_t i = 0; i < n_kv; ++i) {
        std::string key = c.str("a metadata key", kMaxKeyBytes);
        const auto type = c.pod<std::uint32_t>("a value type");
        PLAB_CHECK(known_value_type(type), where << ": key " << key << " has value type " << type
                                                 << "; GGUF value types are 0..12");
        Value v = read_value(c, static_cast<ValueType>(type), key, 0);
        PLAB_CHECK(f.kv.emplace(key, std::move(v)).second,
                   where << ": metadata key " << key << " appears twice");
    }
    if (const Value* a = f.find("general.alignment")) {
        PLAB_CHECK(a->type == ValueType::kU32, where << ": general.alignment is "
                                                     << value_type_name(a->type)
                                                     << "; the specification says u32");
        f.alignment = std::get<std::uint64_t>(a->v);
        PLAB_CHECK(f.alignment != 0 && (f.alignment & (f.alignment - 1)) == 0,
                   where << ": general.alignment " << f.alignment
                         << " is not a power of two; it must be (32 by default)");
    }

    std::uint64_t total_floats = 0;
    for (std::uint64_t i = 0; i < n_tensors; ++i) {
        TensorInfo t;
        t.name = c.str("a tensor name", kMaxTensorNameBytes);
        const std::string here = where + ": tensor " + t.name;
        const auto n_dims = c.pod<std::uint32_t>("a tensor's dimension count");
        PLAB_CHECK(n_dims >= 1 && n_dims <= kMaxDims,
                   here << " has " << n_dims << " dimensions; ggml tensors have 1 to " << kMaxDims);
        std::uint64_t numel = 1;
        const std::uint64_t max_floats = limits.max_bytes / 4;
        for (std::uint32_t d = 0; d < n_dims; ++d) {
            const auto ne = c.pod<std::uint64_t>("a tensor's dimensions");
            PLAB_CHECK(ne >= 1 && numel <= max_floats / ne,
                       here << ": dimension " << d << " = " << ne
                            << (ne == 0 ? " is empty" : " makes it larger than the ")
                            << (ne == 0 ? "" : std::to_string(limits.max_bytes))
                            << (ne == 0 ? "" : " bytes allowed as float32"));
            t.ne.push_back(ne);
            numel *= ne;
        }
        t.type = c.pod<std::uint32_t>("a tensor's type");
        const TypeTraits* tr = readable(t.type);
        PLAB_CHECK(tr != nullptr, here << " is " << tensor_type_name(t.type)
                                       << "; plab reads F32, F16, BF16 and Q8_0 tensors "
                                          "(convert or requantize the model to one of them)");
        PLAB_CHECK(t.ne[0] % tr->block_values == 0, here << ": its rows of " << t.ne[0]
                                                         << " values are not whole " << tr->name
                                                         << " blocks of " << tr->block_values);
        t.n_bytes = numel / tr->block_values * tr->block_bytes;
        t.offset = c.pod<std::uint64_t>("a tensor's offset");
        PLAB_CHECK(t.offset % f.alignment == 0, here << ": offset " << t.offset
                                                     << " is not a multiple of the alignment "
                                                     << f.alignment);
        total_floats += numel;
        PLAB_CHECK(total_floats <= max_floats,
                   where << ": the tensors need more than the " << limits.max_bytes
                         << " bytes allowed as float32 (this machine's memory)");
        PLAB_CHECK(f.find_tensor(t.name) == nullptr, here << " appears twice");
        f.tensors.push_back(std::move(t));
    }
    // The data section starts at the next multiple of the alignment.
    const std::uint64_t pad = (f.alignment - c.off % f.alignment) % f.alignment;
    PLAB_CHECK(pad <= c.left() || f.tensors.empty(),
               where << ": the file ends before its tensor data (truncated)");
    f.data_start = std::min<std::uint64_t>(c.off + pad, bytes.size());
    const std::uint64_t data_size = bytes.size() - f.data_start;

    // Every tensor inside the file, none overlapping another.
    std::vector<const TensorInfo*> by_offset;
    for (const TensorInfo& t : f.tensors) {
        PLAB_CHECK(t.offset <= data_size && t.n_bytes <= data_size - t.offset,
                   where << ": tensor " << t.name << " " << dims_text(t.ne) << " "
                         << tensor_type_name(t.type) << " needs bytes [" << t.offset << ", "
                         << t.offset + t.n_bytes << ") of a " << data_size
                         << "-byte data section (file truncated or header lies)");
        by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
    for (std::size_t i = 1; i < by_offset.size(); ++i) {
        PLAB_CHECK(by_offset[i - 1]->offset + by_offset[i - 1]->n_bytes <= by_offset[i]->offset,
                   where << ": tensors " << by_offset[i - 1]->name << " and " << by_offset[i]->name
                         << " overlap in the data section");
    }
    return f;
}

HostTensor read_tensor(const File& f, const TensorInfo& t, std::span<const char> bytes,
                       const std::string& where) {
    const TypeTraits* tr = readable(t.type);
    PLAB_CHECK(tr != nullptr, where << ": tensor " << t.name << " is " << tensor_type_name(t.type));
    PLAB_ASSERT(f.data_start + t.offset + t.n_bytes <= bytes.size());
    const char* src = bytes.data() + f.data_start + t.offset;
    HostTensor out;
    out.shape = t.shape();
    const std::uint64_t numel = t.n_bytes / tr->block_bytes * tr->block_values;
    out.data.resize(numel);
    switch (tr->type) {
        case TensorType::kF32:
            std::memcpy(out.data.data(), src, numel * 4);
            break;
        case TensorType::kF16:
        case TensorType::kBF16:
            for (std::uint64_t i = 0; i < numel; ++i) {
                std::uint16_t h;
                std::memcpy(&h, src + 2 * i, 2);
                out.data[i] = tr->type == TensorType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
            }
            break;
        case TensorType::kQ8_0:
            dequantize_q8_0(src, numel / kQ8_0BlockValues, out.data.data());
            break;
    }
    return out;
}

}  // namespace plab::gguf
