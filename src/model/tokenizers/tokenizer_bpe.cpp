// Byte-level BPE: parsing the merge file, encoding by merge rank, decoding by
// concatenation. See tokenizer_bpe.h for the format; the trainer is
// assets/recipe/bpe.py. Left out: caching of encoded pieces (prompts are short).
#include "model/tokenizers/tokenizer_bpe.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace plab {
namespace {

bool is_letter(unsigned char b) {
    return (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || b >= 0x80;
}
bool is_digit(unsigned char b) {
    return b >= '0' && b <= '9';
}

}  // namespace

BpeTokenizer::BpeTokenizer(std::vector<std::pair<int32_t, int32_t>> merges)
    : merges_(std::move(merges)) {
    token_bytes_.reserve(kFirstMerge + merges_.size());
    for (int b = 0; b < 256; ++b) token_bytes_.emplace_back(1, static_cast<char>(b));
    token_bytes_.emplace_back();  // BOS
    token_bytes_.emplace_back();  // EOS
    for (std::size_t k = 0; k < merges_.size(); ++k) {
        const auto [a, b] = merges_[k];
        const int32_t next = static_cast<int32_t>(token_bytes_.size());
        PLAB_CHECK(a >= 0 && b >= 0 && a < next && b < next && a != kBos && a != kEos &&
                       b != kBos && b != kEos,
                   "BPE merge " << k << " (" << a << " " << b
                                << ") must join two earlier non-special ids in 0.." << next - 1);
        token_bytes_.push_back(token_bytes_[a] + token_bytes_[b]);
        // The first (lowest-rank) merge of a pair wins, as in the trainer.
        rank_.emplace(merges_[k], static_cast<int32_t>(k));
    }
}

BpeTokenizer BpeTokenizer::parse(const std::string& text, const std::string& where) {
    std::istringstream in(text);
    std::string line;
    int line_no = 0;
    auto next_line = [&](const char* what) {
        PLAB_CHECK(std::getline(in, line), where << ": ends before " << what << " (line "
                                                 << line_no + 1 << "); truncated file?");
        ++line_no;
        return line;
    };
    PLAB_CHECK(next_line("the magic") == "plab-bpe 1",
               where << ": first line is '" << line.substr(0, 40)
                     << "', expected 'plab-bpe 1' (a tokenizer written by assets/recipe/bpe.py)");
    auto keyed = [&](const char* key) {
        std::istringstream ls(next_line(key));
        std::string k;
        long long v = -1;
        ls >> k >> v;
        // !fail(): a number too large for long long sets failbit and reads as
        // LLONG_MAX, which would overflow the arithmetic below (found by the fuzzer).
        PLAB_CHECK(k == key && !ls.fail() && v >= 0 && ls.eof(),
                   where << ": line " << line_no << " is '" << line << "', expected '" << key
                         << " <number>'");
        return v;
    };
    const long long vocab = keyed("vocab_size");
    const long long bos = keyed("bos");
    const long long eos = keyed("eos");
    const long long n = keyed("merges");
    PLAB_CHECK(bos == kBos && eos == kEos,
               where << ": bos/eos are " << bos << "/" << eos << ", expected 256/257");
    PLAB_CHECK(n <= 1'000'000, where << ": " << n << " merges is more than the 1000000 allowed");
    PLAB_CHECK(vocab == kFirstMerge + n, where << ": vocab_size " << vocab
                                               << " must equal 258 + merges (" << kFirstMerge + n
                                               << ")");
    std::vector<std::pair<int32_t, int32_t>> merges;
    merges.reserve(static_cast<std::size_t>(n));
    for (long long k = 0; k < n; ++k) {
        std::istringstream ls(next_line("all merges were read"));
        long long a = -1, b = -1;
        ls >> a >> b;
        PLAB_CHECK(!ls.fail() && a >= 0 && b >= 0 && a < kFirstMerge + k && b < kFirstMerge + k,
                   where << ": line " << line_no << " is '" << line
                         << "', expected two ids of earlier tokens (0.." << kFirstMerge + k - 1
                         << ")");
        merges.emplace_back(static_cast<int32_t>(a), static_cast<int32_t>(b));
    }
    try {
        return BpeTokenizer(std::move(merges));
    } catch (const Error& e) {
        throw Error(where + ": " + e.what());
    }
}

BpeTokenizer BpeTokenizer::load(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    PLAB_CHECK(f.good(), "cannot read tokenizer file " << path);
    std::stringstream ss;
    ss << f.rdbuf();
    return parse(ss.str(), path);
}

void BpeTokenizer::save(const std::string& path) const {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    PLAB_CHECK(f.good(), "cannot write tokenizer file " << path);
    f << "plab-bpe 1\nvocab_size " << vocab_size() << "\nbos " << kBos << "\neos " << kEos
      << "\nmerges " << merges_.size() << "\n";
    for (const auto& [a, b] : merges_) f << a << ' ' << b << '\n';
    PLAB_CHECK(f.good(), "failed writing " << path);
}

std::vector<std::string_view> BpeTokenizer::pretokenize(std::string_view text) {
    std::vector<std::string_view> pieces;
    const std::size_t n = text.size();
    auto at = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
    std::size_t i = 0;
    while (i < n) {
        const std::size_t start = i;
        const std::size_t j = (at(i) == ' ' && i + 1 < n) ? i + 1 : i;
        if (j < n && (is_letter(at(j)) || is_digit(at(j)))) {
            const bool letters = is_letter(at(j));
            std::size_t k = j;
            while (k < n && (letters ? is_letter(at(k)) : is_digit(at(k)))) ++k;
            pieces.push_back(text.substr(start, k - start));
            i = k;
        } else {
            pieces.push_back(text.substr(start, 1));
            i = start + 1;
        }
    }
    return pieces;
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
    std::vector<int32_t> seq(piece.begin(), piece.end());
    for (auto& id : seq) id = static_cast<unsigned char>(id);
    // Repeatedly merge the adjacent pair of lowest rank (leftmost on ties).
    while (seq.size() > 1) {
        std::size_t best = seq.size();
        int32_t best_rank = 0;
        for (std::size_t i = 0; i + 1 < seq.size(); ++i) {
            auto it = rank_.find({seq[i], seq[i + 1]});
            if (it != rank_.end() && (best == seq.size() || it->second < best_rank)) {
                best = i;
                best_rank = it->second;
            }
        }
        if (best == seq.size()) break;
        seq[best] = kFirstMerge + best_rank;
        seq.erase(seq.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    out.insert(out.end(), seq.begin(), seq.end());
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_bos) const {
    std::vector<int32_t> ids;
    if (add_bos) ids.push_back(kBos);
    for (std::string_view piece : pretokenize(text)) encode_piece(piece, ids);
    return ids;
}

const std::string& BpeTokenizer::bytes_of(int32_t id) const {
    PLAB_CHECK(id >= 0 && id < vocab_size(),
               "token id " << id << " is outside the BPE vocabulary 0.." << vocab_size() - 1);
    return token_bytes_[static_cast<std::size_t>(id)];
}

std::string BpeTokenizer::token_bytes(int32_t id) const {
    return id >= vocab_size() ? std::string() : bytes_of(id);
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
    std::string s;
    for (int32_t id : ids)
        if (id < vocab_size()) s += bytes_of(id);  // an id past the tokenizer is dropped
    return s;
}

std::string BpeTokenizer::token_text(int32_t id) const {
    if (id == kBos) return "<bos>";
    if (id == kEos) return "<eos>";
    if (id >= vocab_size())
        return "#" + std::to_string(id);  // a row of the model past the tokenizer
    std::string out;
    for (unsigned char c : bytes_of(id)) {
        if (c == '\n') {
            out += "\\n";
        } else if (c >= 32 && c < 127) {
            out += static_cast<char>(c);
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "<0x%02X>", c);
            out += buf;
        }
    }
    return out;
}

}  // namespace plab
