// IdTokenizer: prompts as token ids, for models without a tokenizer the engine reads.
#include "model/tokenizers/tokenizer_ids.h"

#include <cctype>
#include <string>

#include "core/error.h"

namespace plab {

std::vector<int32_t> IdTokenizer::encode(std::string_view text, bool add_bos) const {
    std::vector<std::size_t> starts;
    std::vector<int32_t> ids = encode_starts(text, starts);
    if (add_bos && bos_ >= 0) ids.insert(ids.begin(), bos_);
    return ids;
}

std::vector<int32_t> IdTokenizer::encode_starts(std::string_view text,
                                                std::vector<std::size_t>& starts) const {
    std::vector<int32_t> ids;
    starts.clear();
    auto separator = [](char c) { return c == ',' || std::isspace(static_cast<unsigned char>(c)); };
    for (std::size_t i = 0; i < text.size();) {
        if (separator(text[i])) {
            ++i;
            continue;
        }
        std::size_t end = i;
        while (end < text.size() && !separator(text[end])) ++end;
        const std::string word(text.substr(i, end - i));
        std::size_t used = 0;
        long long v = -1;
        try {
            v = std::stoll(word, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        PLAB_CHECK(
            used == word.size() && v >= 0 && v < vocab_,
            "this model has no tokenizer the engine understands, so the prompt must be token "
            "ids 0.."
                << vocab_ - 1 << " separated by spaces or commas; got '" << word << "'");
        ids.push_back(static_cast<int32_t>(v));
        starts.push_back(i);
        i = end;
    }
    return ids;
}

std::string IdTokenizer::token_bytes(int32_t id) const {
    return std::to_string(id);
}

std::string IdTokenizer::token_text(int32_t id) const {
    std::string s(1, '#');
    s += std::to_string(id);
    return s;
}

std::string IdTokenizer::decode(const std::vector<int32_t>& ids) const {
    std::string s;
    for (int32_t id : ids) {
        if (!s.empty()) s += ' ';
        s += std::to_string(id);
    }
    return s;
}

}  // namespace plab
