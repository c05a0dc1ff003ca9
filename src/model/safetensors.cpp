#include "model/safetensors.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "model/binary_read.h"
#include "model/number_formats.h"

namespace plab {

TensorMap parse_safetensors(std::span<const char> bytes, const std::string& where,
                            const LoadLimits& limits) {
    const std::uint64_t file_size = bytes.size();
    PLAB_CHECK(file_size >= 8, where << ": " << file_size
                                     << " bytes is too short for a safetensors file (an 8-byte "
                                        "header length comes first)");
    std::uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i)
        header_len = header_len << 8 | static_cast<unsigned char>(bytes[i]);
    PLAB_CHECK(header_len >= 2 && header_len <= file_size - 8 && header_len <= (100u << 20),
               where << ": header length " << header_len << " does not fit a " << file_size
                     << "-byte file; not a safetensors file, or truncated");
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + header_len);
    } catch (const std::exception& e) {
        PLAB_CHECK(false,
                   where << ": the safetensors header is not valid JSON (" << e.what() << ")");
    }
    PLAB_CHECK(j.is_object(), where << ": the safetensors header must be a JSON object");
    const std::span<const char> data = bytes.subspan(8 + header_len);

    // 1. Every entry's claims against the bytes that are there, nothing allocated yet.
    struct Entry {
        std::string name;
        std::vector<std::int64_t> shape;
        std::uint64_t begin, numel;
        std::size_t elem;
        bool f16;
    };
    std::vector<Entry> entries;
    std::uint64_t total_floats = 0;
    for (auto it = j.begin(); it != j.end(); ++it) {
        if (it.key() == "__metadata__") continue;
        const auto& e = it.value();
        const std::string here = where + ": tensor " + it.key();
        PLAB_CHECK(e.is_object() && e.contains("dtype") && e.contains("shape") &&
                       e.contains("data_offsets"),
                   here << " needs dtype, shape and data_offsets");
        const std::string dtype = e["dtype"].is_string() ? e["dtype"].get<std::string>() : "";
        std::size_t elem = 0;
        if (dtype == "F32") elem = 4;
        if (dtype == "F16" || dtype == "BF16") elem = 2;
        PLAB_CHECK(elem != 0,
                   here << " has dtype '" << dtype << "'; supported dtypes are F32, F16 and BF16");
        Entry entry{it.key(), {}, 0, 1, elem, dtype == "F16"};
        PLAB_CHECK(e["shape"].is_array(), here << ": shape must be an array");
        // The shape alone may ask for any amount of memory: refuse more than the
        // limit before multiplying further (so the product cannot overflow either).
        const std::uint64_t max_floats = limits.max_bytes / 4;
        for (const auto& d : e["shape"]) {
            PLAB_CHECK(d.is_number_integer() && d.get<std::int64_t>() >= 0,
                       here << ": shape entries must be non-negative integers");
            const auto dim = static_cast<std::uint64_t>(d.get<std::int64_t>());
            PLAB_CHECK(dim == 0 || entry.numel <= max_floats / dim,
                       here << ": its shape " << e["shape"].dump() << " needs more than the "
                            << limits.max_bytes
                            << " bytes allowed as float32 (this machine's memory)");
            entry.shape.push_back(static_cast<std::int64_t>(dim));
            entry.numel *= dim;
        }
        const auto& off = e["data_offsets"];
        PLAB_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
                       off[1].is_number_unsigned(),
                   here << ": data_offsets must be [begin, end]");
        const std::uint64_t begin = off[0].get<std::uint64_t>(), end = off[1].get<std::uint64_t>();
        PLAB_CHECK(begin <= end && end <= data.size(),
                   here << ": data_offsets [" << begin << ", " << end << "] lie outside the "
                        << data.size() << " data bytes (file truncated or header lies)");
        PLAB_CHECK(end - begin == entry.numel * elem,
                   here << ": " << (end - begin) << " bytes do not match its shape (" << entry.numel
                        << " values of " << elem << " bytes)");
        entry.begin = begin;
        // 2. F16/BF16 widen to float32, so the loaded model can be twice the file
        //    (checked as the sum grows: each term <= the limit, so it cannot overflow).
        total_floats += entry.numel;
        PLAB_CHECK(total_floats * 4 <= limits.max_bytes,
                   where << ": the tensors need at least " << total_floats * 4
                         << " bytes as float32, more than the " << limits.max_bytes
                         << " bytes allowed (this machine's memory)");
        entries.push_back(std::move(entry));
    }

    // 3. Copy (and widen) tensor by tensor.
    TensorMap out;
    for (const Entry& entry : entries) {
        HostTensor t;
        t.shape = entry.shape;
        t.data.resize(entry.numel);
        const char* src = data.data() + entry.begin;
        for (std::uint64_t i = 0; i < entry.numel; ++i) {
            if (entry.elem == 4) {
                std::memcpy(&t.data[i], src + 4 * i, 4);
            } else {
                std::uint16_t h;
                std::memcpy(&h, src + 2 * i, 2);
                t.data[i] = entry.f16 ? f16_to_f32(h) : bf16_to_f32(h);
            }
        }
        out.emplace(entry.name, std::move(t));
    }
    return out;
}

TensorMap read_safetensors(const std::string& path, const LoadLimits& limits) {
    const FileBytes file(path, "a readable .safetensors file");
    return parse_safetensors(file.bytes(), path, limits);
}

void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata) {
    nlohmann::json j = nlohmann::json::object();
    if (!metadata.empty()) j["__metadata__"] = metadata;
    std::uint64_t offset = 0;
    for (const auto& [name, t] : tensors) {
        std::uint64_t numel = 1;
        for (auto d : t.shape) numel *= static_cast<std::uint64_t>(d);
        PLAB_ASSERT(numel == t.data.size());
        j[name] = {
            {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + 4 * numel}}};
        offset += 4 * numel;
    }
    std::string header = j.dump();
    while ((8 + header.size()) % 8 != 0) header += ' ';  // align data to 8 bytes
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    PLAB_CHECK(f.good(), "cannot write " << path);
    const std::uint64_t n = header.size();
    unsigned char len_bytes[8];
    for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(n >> (8 * i));
    f.write(reinterpret_cast<const char*>(len_bytes), 8);
    f.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const auto& [name, t] : tensors) {
        f.write(reinterpret_cast<const char*>(t.data.data()),
                static_cast<std::streamsize>(t.data.size() * sizeof(float)));
    }
    PLAB_CHECK(f.good(), "writing " << path << " failed (disk full?)");
}

}  // namespace plab
