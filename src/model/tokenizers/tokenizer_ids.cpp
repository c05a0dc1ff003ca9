// IdTokenizer: prompts as token ids, for models without a tokenizer the engine reads.
#include "model/tokenizers/tokenizer_ids.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace plab {

std::vector<int32_t> IdTokenizer::encode(std::string_view text, bool add_bos) const {
    std::vector<int32_t> ids;
    if (add_bos && bos_ >= 0) ids.push_back(bos_);
    std::string t(text);
    std::replace(t.begin(), t.end(), ',', ' ');
    std::istringstream in(t);
    std::string word;
    while (in >> word) {
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
    }
    return ids;
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
