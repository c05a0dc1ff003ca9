// llama2.c's tokenizer.bin: reading, writing, run.c's SentencePiece-like encoding.
// Format in tokenizer_llama2c.h.
#include "model/tokenizers/tokenizer_llama2c.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "model/binary_read.h"

namespace plab {

Llama2cTokenizer::Llama2cTokenizer(std::vector<std::string> pieces, std::vector<float> scores)
    : pieces_(std::move(pieces)), scores_(std::move(scores)) {
    PLAB_ASSERT(pieces_.size() == scores_.size());
    // Encoding falls back to ids 3..258 for bytes it has no piece for (run.c's
    // rule); a smaller vocabulary would hand out ids it does not have.
    PLAB_CHECK(pieces_.size() >= std::size_t(kMinVocab),
               "a llama2.c tokenizer needs at least " << kMinVocab << " tokens (<unk> <s> </s> and "
                                                      << "the 256 byte tokens <0x00>..<0xFF>); "
                                                      << "this one has " << pieces_.size());
    for (std::size_t i = 0; i < pieces_.size(); ++i) ids_.emplace(pieces_[i], static_cast<int>(i));
}

Llama2cTokenizer Llama2cTokenizer::load(const std::string& path, int vocab_size) {
    const FileBytes file(path, "a readable llama2.c tokenizer.bin");
    return parse(file.bytes(), vocab_size, path);
}

Llama2cTokenizer Llama2cTokenizer::parse(std::span<const char> d, int vocab_size,
                                         const std::string& path) {
    PLAB_CHECK(vocab_size >= kMinVocab,
               path << ": the model's vocab_size " << vocab_size << " is too small for a llama2.c "
                    << "tokenizer.bin, which holds <unk> <s> </s> and 256 byte tokens (at least "
                    << kMinVocab << ")");
    PLAB_CHECK(d.size() >= 4, path << ": too short for a llama2.c tokenizer.bin");
    const std::int32_t max_len = i32_at(d, 0);
    PLAB_CHECK(max_len > 0 && max_len <= 4096, path << ": max_token_length " << max_len
                                                    << " is not in 1..4096; not a tokenizer.bin");
    std::vector<std::string> pieces;
    std::vector<float> scores;
    std::size_t off = 4;
    for (int i = 0; i < vocab_size; ++i) {
        PLAB_CHECK(off + 8 <= d.size(), path << ": ends after " << i << " tokens but the model's "
                                             << "vocab_size is " << vocab_size
                                             << " (tokenizer and model do not match?)");
        float score;
        std::memcpy(&score, d.data() + off, 4);
        const std::int32_t len = i32_at(d, off + 4);
        off += 8;
        PLAB_CHECK(len >= 0 && len <= max_len && off + std::size_t(len) <= d.size(),
                   path << ": token " << i << " claims " << len << " bytes (max_token_length "
                        << max_len << ", " << d.size() - off << " bytes left)");
        pieces.emplace_back(d.data() + off, std::size_t(len));
        scores.push_back(score);
        off += std::size_t(len);
    }
    PLAB_CHECK(off == d.size(), path << ": " << d.size() - off << " bytes remain after "
                                     << vocab_size << " tokens; the tokenizer has more tokens "
                                     << "than the model's vocab_size (they do not match)");
    return Llama2cTokenizer(std::move(pieces), std::move(scores));
}

void Llama2cTokenizer::save(const std::string& path) const {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    PLAB_CHECK(f.good(), "cannot write " << path);
    std::int32_t max_len = 1;
    for (const auto& p : pieces_) max_len = std::max<std::int32_t>(max_len, std::int32_t(p.size()));
    f.write(reinterpret_cast<const char*>(&max_len), 4);
    for (std::size_t i = 0; i < pieces_.size(); ++i) {
        const std::int32_t len = static_cast<std::int32_t>(pieces_[i].size());
        f.write(reinterpret_cast<const char*>(&scores_[i]), 4);
        f.write(reinterpret_cast<const char*>(&len), 4);
        f.write(pieces_[i].data(), len);
    }
    PLAB_CHECK(f.good(), "failed writing " << path);
}

int Llama2cTokenizer::lookup(const std::string& piece) const {
    auto it = ids_.find(piece);
    return it == ids_.end() ? -1 : it->second;
}

std::vector<int32_t> Llama2cTokenizer::encode(std::string_view text, bool add_bos) const {
    std::vector<std::size_t> starts;
    std::vector<int32_t> ids = encode_starts(text, starts);
    if (add_bos) ids.insert(ids.begin(), kBos);
    return ids;
}

std::vector<int32_t> Llama2cTokenizer::encode_starts(std::string_view text,
                                                     std::vector<std::size_t>& starts) const {
    // Each symbol carries the offset of the first byte of the text it was made
    // from (tokenizer.h); a merge keeps the left symbol's.
    std::vector<int32_t> ids;
    starts.clear();
    // 1. SentencePiece's dummy prefix: a space before non-empty text (made from
    // no byte of it: it starts where the text does).
    if (!text.empty()) {
        const int space = lookup(" ");
        if (space >= 0) {
            ids.push_back(space);
            starts.push_back(0);
        }
    }
    // 2. One token per UTF-8 character when the vocabulary has it, else its bytes.
    for (std::size_t i = 0; i < text.size();) {
        std::size_t n = 1;
        while (i + n < text.size() && n < 4 &&
               (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80)
            ++n;
        const std::string ch(text.substr(i, n));
        const int id = lookup(ch);
        if (id >= 0) {
            ids.push_back(id);
            starts.push_back(i);
        } else {
            for (std::size_t k = 0; k < n; ++k) {
                ids.push_back(kFirstByteToken + static_cast<unsigned char>(ch[k]));
                starts.push_back(i + k);
            }
        }
        i += n;
    }
    // 3. Merge the adjacent pair with the best score while one exists.
    while (true) {
        float best = -1e30f;
        int best_id = -1;
        std::size_t best_at = 0;
        for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
            const int id = lookup(pieces_[ids[i]] + pieces_[ids[i + 1]]);
            if (id >= 0 && scores_[id] > best) {
                best = scores_[id];
                best_id = id;
                best_at = i;
            }
        }
        if (best_id < 0) break;
        ids[best_at] = best_id;
        ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
        starts.erase(starts.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
    }
    return ids;
}

std::string Llama2cTokenizer::decode(const std::vector<int32_t>& ids) const {
    std::string s;
    bool at_start = true;
    for (int32_t id : ids) {
        PLAB_CHECK(id >= 0 && id < vocab_size(),
                   "token id " << id << " is outside the vocabulary 0.." << vocab_size() - 1);
        if (id == kBos || id == kEos) continue;
        const std::string& p = pieces_[std::size_t(id)];
        unsigned int byte = 0;
        if (p.size() == 6 && std::sscanf(p.c_str(), "<0x%02X>", &byte) == 1) {
            s += static_cast<char>(byte);
        } else {
            // The dummy prefix space of the first piece is not part of the text.
            s += (at_start && !p.empty() && p[0] == ' ') ? p.substr(1) : p;
        }
        at_start = false;
    }
    return s;
}

std::string Llama2cTokenizer::token_bytes(int32_t id) const {
    PLAB_CHECK(id >= 0 && id < vocab_size(),
               "token id " << id << " is outside the vocabulary 0.." << vocab_size() - 1);
    if (id == kBos || id == kEos) return "";
    const std::string& p = pieces_[std::size_t(id)];
    unsigned int byte = 0;
    if (p.size() == 6 && std::sscanf(p.c_str(), "<0x%02X>", &byte) == 1)
        return std::string(1, static_cast<char>(byte));
    return p;
}

std::string Llama2cTokenizer::token_text(int32_t id) const {
    PLAB_CHECK(id >= 0 && id < vocab_size(),
               "token id " << id << " is outside the vocabulary 0.." << vocab_size() - 1);
    if (id == kBos) return "<s>";
    if (id == kEos) return "</s>";
    return pieces_[std::size_t(id)];
}

}  // namespace plab
