#include <cstdio>

#include "core/error.h"
#include "model/tokenizers/tokenizer.h"

namespace plab {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text, bool add_bos) const {
    std::vector<int32_t> ids;
    ids.reserve(text.size() + 1);
    if (add_bos) ids.push_back(kBos);
    for (unsigned char c : text) ids.push_back(c);
    return ids;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& ids) const {
    std::string s;
    for (int32_t id : ids) {
        if (id >= 0 && id < 256) s += static_cast<char>(id);
    }
    return s;
}

std::string ByteTokenizer::token_bytes(int32_t id) const {
    return id >= 0 && id < 256 ? std::string(1, static_cast<char>(id)) : std::string();
}

std::string ByteTokenizer::token_text(int32_t id) const {
    if (id == kBos) return "<bos>";
    if (id == kEos) return "<eos>";
    PLAB_CHECK(id >= 0, "token id " << id << " is negative; ids are 0, 1, 2, ...");
    if (id >= 258) return "#" + std::to_string(id);  // a row of the model past the tokenizer
    if (id == '\n') return "\\n";
    if (id >= 32 && id < 127) return std::string(1, static_cast<char>(id));
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", id);
    return buf;
}

}  // namespace plab
