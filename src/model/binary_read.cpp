#include "model/binary_read.h"

#include <cstring>
#include <fstream>

#include "core/error.h"

namespace plab {

std::vector<char> read_binary_file(const std::string& path, const std::string& expected) {
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    PLAB_CHECK(f.good(), "cannot open " << path << ": expected " << expected);
    const auto size = static_cast<std::size_t>(f.tellg());
    f.seekg(0);
    std::vector<char> data(size);
    f.read(data.data(), static_cast<std::streamsize>(size));
    PLAB_CHECK(f.good() || size == 0, "could not read " << path);
    return data;
}

std::int32_t i32_at(const std::vector<char>& bytes, std::size_t off) {
    std::int32_t v;
    std::memcpy(&v, bytes.data() + off, 4);
    return v;
}

}  // namespace plab
