// Writing GGUF (format in gguf.h): metadata in the order given, tensors F32 or
// F16, each at an offset that is a multiple of the alignment, zero padding between.
// What plab convert --to gguf writes is read back by tests/reference/gguf_reference.py
// (test gguf_writer_check), independently of this file and of gguf.cpp.
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "model/gguf.h"
#include "model/number_formats.h"

namespace plab::gguf {

Value make_string(std::string s) {
    return {ValueType::kString, ValueType::kU8, std::move(s)};
}
Value make_u32(std::uint32_t x) {
    return {ValueType::kU32, ValueType::kU8, std::uint64_t(x)};
}
Value make_i32(std::int32_t x) {
    return {ValueType::kI32, ValueType::kU8, std::int64_t(x)};
}
Value make_f32(float x) {
    return {ValueType::kF32, ValueType::kU8, double(x)};
}
Value make_bool(bool b) {
    return {ValueType::kBool, ValueType::kU8, b};
}
Value make_string_array(std::vector<std::string> items) {
    Array a;
    for (auto& s : items) a.push_back(make_string(std::move(s)));
    return {ValueType::kArray, ValueType::kString, std::move(a)};
}
Value make_f32_array(const std::vector<float>& items) {
    Array a;
    for (float x : items) a.push_back(make_f32(x));
    return {ValueType::kArray, ValueType::kF32, std::move(a)};
}
Value make_i32_array(const std::vector<std::int32_t>& items) {
    Array a;
    for (std::int32_t x : items) a.push_back(make_i32(x));
    return {ValueType::kArray, ValueType::kI32, std::move(a)};
}

namespace {

template <typename T>
void put(std::string& out, T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.append(b, sizeof(T));
}

void put_string(std::string& out, const std::string& s) {
    put<std::uint64_t>(out, s.size());
    out += s;
}

void put_value(std::string& out, const Value& v) {
    switch (v.type) {
        case ValueType::kU8:
            put<std::uint8_t>(out, std::uint8_t(std::get<std::uint64_t>(v.v)));
            break;
        case ValueType::kI8:
            put<std::int8_t>(out, std::int8_t(std::get<std::int64_t>(v.v)));
            break;
        case ValueType::kU16:
            put<std::uint16_t>(out, std::uint16_t(std::get<std::uint64_t>(v.v)));
            break;
        case ValueType::kI16:
            put<std::int16_t>(out, std::int16_t(std::get<std::int64_t>(v.v)));
            break;
        case ValueType::kU32:
            put<std::uint32_t>(out, std::uint32_t(std::get<std::uint64_t>(v.v)));
            break;
        case ValueType::kI32:
            put<std::int32_t>(out, std::int32_t(std::get<std::int64_t>(v.v)));
            break;
        case ValueType::kU64:
            put<std::uint64_t>(out, std::get<std::uint64_t>(v.v));
            break;
        case ValueType::kI64:
            put<std::int64_t>(out, std::get<std::int64_t>(v.v));
            break;
        case ValueType::kF32:
            put<float>(out, float(std::get<double>(v.v)));
            break;
        case ValueType::kF64:
            put<double>(out, std::get<double>(v.v));
            break;
        case ValueType::kBool:
            put<std::uint8_t>(out, std::get<bool>(v.v) ? 1 : 0);
            break;
        case ValueType::kString:
            put_string(out, std::get<std::string>(v.v));
            break;
        case ValueType::kArray: {
            const Array& a = std::get<Array>(v.v);
            put<std::uint32_t>(out, static_cast<std::uint32_t>(v.elem));
            put<std::uint64_t>(out, a.size());
            for (const Value& x : a) put_value(out, x);
            break;
        }
    }
}

}  // namespace

void write(const std::string& path, const std::vector<std::pair<std::string, Value>>& kv,
           const std::vector<TensorOut>& tensors, std::uint64_t alignment) {
    PLAB_ASSERT(alignment != 0 && (alignment & (alignment - 1)) == 0);
    std::string head = "GGUF";
    put<std::uint32_t>(head, 3);
    put<std::uint64_t>(head, tensors.size());
    put<std::uint64_t>(head, kv.size() + (alignment != 32 ? 1 : 0));
    for (const auto& [key, v] : kv) {
        put_string(head, key);
        put<std::uint32_t>(head, static_cast<std::uint32_t>(v.type));
        put_value(head, v);
    }
    if (alignment != 32) {
        put_string(head, "general.alignment");
        put<std::uint32_t>(head, static_cast<std::uint32_t>(ValueType::kU32));
        put<std::uint32_t>(head, static_cast<std::uint32_t>(alignment));
    }
    auto align = [&](std::uint64_t n) { return (n + alignment - 1) / alignment * alignment; };
    std::uint64_t offset = 0;
    for (const TensorOut& t : tensors) {
        PLAB_CHECK(t.name.size() <= kMaxTensorNameBytes, "GGUF tensor names have at most "
                                                             << kMaxTensorNameBytes
                                                             << " bytes: " << t.name);
        PLAB_ASSERT(t.type == TensorType::kF32 || t.type == TensorType::kF16);
        std::uint64_t numel = 1;
        for (auto d : t.shape) numel *= static_cast<std::uint64_t>(d);
        PLAB_ASSERT(numel == t.data->size());
        put_string(head, t.name);
        put<std::uint32_t>(head, static_cast<std::uint32_t>(t.shape.size()));
        for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it)
            put<std::uint64_t>(head, static_cast<std::uint64_t>(*it));
        put<std::uint32_t>(head, static_cast<std::uint32_t>(t.type));
        put<std::uint64_t>(head, offset);
        offset = align(offset + numel * (t.type == TensorType::kF32 ? 4 : 2));
    }
    head.resize(align(head.size()), '\0');
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    PLAB_CHECK(out.good(), "cannot write " << path);
    out.write(head.data(), static_cast<std::streamsize>(head.size()));
    for (const TensorOut& t : tensors) {
        std::string data;
        if (t.type == TensorType::kF32) {
            data.assign(reinterpret_cast<const char*>(t.data->data()), t.data->size() * 4);
        } else {
            for (float x : *t.data) put<std::uint16_t>(data, f32_to_f16(x));
        }
        data.resize(align(data.size()), '\0');
        out.write(data.data(), static_cast<std::streamsize>(data.size()));
    }
    PLAB_CHECK(out.good(), "writing " << path << " failed (disk full?)");
}

}  // namespace plab::gguf
