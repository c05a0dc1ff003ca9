// Hand-written scanners for the GPT-2 / Llama 3 / Qwen 2 pre-tokenizer regexes
// (tokenizer_hf_split.h has the patterns and why).
#include "model/tokenizers/tokenizer_hf_split.h"

#include "core/error.h"
#include "model/tokenizers/tokenizer_hf_unicode.h"

namespace plab::hf {
namespace {

constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The text decoded once: one entry per character, with what the classes need.
struct Chars {
    struct C {
        std::size_t at;  // byte offset
        char32_t cp;     // code point (byte value if ill-formed)
        bool valid, letter, number, space;
    };
    std::vector<C> c;
    std::size_t bytes;
    explicit Chars(std::string_view s) : bytes(s.size()) {
        for (std::size_t i = 0; i < s.size();) {
            const Utf8Char u = utf8_at(s, i);
            const CharClass k = char_class(u);
            c.push_back({i, u.cp, u.valid, k == CharClass::kLetter, k == CharClass::kNumber,
                         is_white_space(u)});
            i += u.len;
        }
    }
    std::size_t n() const { return c.size(); }
    bool is(std::size_t i, char32_t cp) const { return i < n() && c[i].valid && c[i].cp == cp; }
    bool letter(std::size_t i) const { return i < n() && c[i].letter; }
    bool number(std::size_t i) const { return i < n() && c[i].number; }
    bool space(std::size_t i) const { return i < n() && c[i].space; }
    // [^\s\p{L}\p{N}]: punctuation, symbols, emoji, control, ill-formed bytes.
    bool other(std::size_t i) const { return i < n() && !c[i].space && !letter(i) && !number(i); }
    bool newline(std::size_t i) const { return is(i, '\r') || is(i, '\n'); }
    std::size_t run(std::size_t i, bool (Chars::*pred)(std::size_t) const) const {
        while ((this->*pred)(i)) ++i;
        return i;
    }
};

// Each alternative: the end (character index) of its match at i, or 0 for none
// (no alternative matches the empty string, so 0 is never a real end).

// 's|'t|'re|'ve|'m|'ll|'d, case-insensitive for Llama 3 / Qwen 2: ASCII case
// and U+017F (long s), which Unicode case folding maps to 's'.
std::size_t contraction(const Chars& t, std::size_t i, bool ignore_case) {
    if (!t.is(i, '\'')) return 0;
    auto lower = [&](std::size_t k) -> char32_t {
        if (k >= t.n() || !t.c[k].valid) return 0;
        const char32_t cp = t.c[k].cp;
        if (!ignore_case) return cp;
        if (cp >= 'A' && cp <= 'Z') return cp - 'A' + 'a';
        return cp == 0x017F ? 's' : cp;
    };
    const char32_t a = lower(i + 1), b = lower(i + 2);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return 0;
}

//  ?X+ : an optional space, then a run of X (backtracking drops the space if
// X does not follow it; the run without the space then fails, as ' ' is no X).
std::size_t space_then_run(const Chars& t, std::size_t i, bool (Chars::*x)(std::size_t) const) {
    const std::size_t j = (t.is(i, ' ') && (t.*x)(i + 1)) ? i + 1 : i;
    return (t.*x)(j) ? t.run(j, x) : 0;
}

// \s+(?!\S) then \s+ : a whitespace run, less its last character when a
// non-space follows it (that space belongs to the next word: " world").
std::size_t whitespace(const Chars& t, std::size_t i) {
    if (!t.space(i)) return 0;
    const std::size_t e = t.run(i, &Chars::space);
    if (e == t.n() || e - i == 1) return e;  // (?!\S) holds at the end; \s+ takes a lone one
    return e - 1;
}

std::size_t gpt2_at(const Chars& t, std::size_t i) {
    if (std::size_t e = contraction(t, i, false)) return e;
    if (std::size_t e = space_then_run(t, i, &Chars::letter)) return e;
    if (std::size_t e = space_then_run(t, i, &Chars::number)) return e;
    if (std::size_t e = space_then_run(t, i, &Chars::other)) return e;
    return whitespace(t, i);
}

std::size_t llama3_at(const Chars& t, std::size_t i, std::size_t max_digits) {
    if (std::size_t e = contraction(t, i, true)) return e;
    // [^\r\n\p{L}\p{N}]?\p{L}+ : one optional non-letter, non-number, non-newline
    // character (a space, an apostrophe, an emoji) glued to the word after it.
    if (t.letter(i)) return t.run(i, &Chars::letter);
    if (i < t.n() && !t.newline(i) && !t.number(i) && t.letter(i + 1))
        return t.run(i + 1, &Chars::letter);
    // \p{N}{1,3} (Llama 3) or \p{N} (Qwen 2): numbers in short groups.
    if (t.number(i)) {
        std::size_t e = i;
        while (e - i < max_digits && t.number(e)) ++e;
        return e;
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n]* : punctuation keeps the newlines after it.
    if (std::size_t e = space_then_run(t, i, &Chars::other)) return t.run(e, &Chars::newline);
    // \s*[\r\n]+ : whitespace up to and including its last newline.
    if (t.space(i)) {
        const std::size_t e = t.run(i, &Chars::space);
        for (std::size_t k = e; k > i; --k) {
            if (t.newline(k - 1)) return k;
        }
    }
    return whitespace(t, i);
}

}  // namespace

std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex) {
    if (regex == kGpt2Regex) return SplitPattern::kGpt2;
    if (regex == kLlama3Regex) return SplitPattern::kLlama3;
    if (regex == kQwen2Regex) return SplitPattern::kQwen2;
    return std::nullopt;
}

const char* split_pattern_regex(SplitPattern p) {
    switch (p) {
        case SplitPattern::kGpt2:
            return kGpt2Regex;
        case SplitPattern::kLlama3:
            return kLlama3Regex;
        case SplitPattern::kQwen2:
            return kQwen2Regex;
    }
    return "";
}

std::vector<std::string_view> split_pieces(std::string_view text, SplitPattern p) {
    const Chars t(text);
    std::vector<std::string_view> pieces;
    auto offset = [&](std::size_t k) { return k < t.n() ? t.c[k].at : t.bytes; };
    for (std::size_t i = 0; i < t.n();) {
        const std::size_t e = p == SplitPattern::kGpt2     ? gpt2_at(t, i)
                              : p == SplitPattern::kLlama3 ? llama3_at(t, i, 3)
                                                           : llama3_at(t, i, 1);
        // Every character is a letter, a number, whitespace or "other", and each
        // pattern has an alternative for each, so the scan always advances.
        PLAB_ASSERT(e > i);
        pieces.push_back(text.substr(offset(i), offset(e) - offset(i)));
        i = e;
    }
    return pieces;
}

std::vector<std::string_view> split_digits(std::string_view text, bool individual) {
    const Chars t(text);
    std::vector<std::string_view> pieces;
    auto offset = [&](std::size_t k) { return k < t.n() ? t.c[k].at : t.bytes; };
    for (std::size_t i = 0; i < t.n();) {
        std::size_t e;
        if (t.number(i)) {
            e = individual ? i + 1 : t.run(i, &Chars::number);
        } else {
            e = i;
            while (e < t.n() && !t.number(e)) ++e;
        }
        pieces.push_back(text.substr(offset(i), offset(e) - offset(i)));
        i = e;
    }
    return pieces;
}

}  // namespace plab::hf
