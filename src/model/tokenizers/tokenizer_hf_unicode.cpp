// Unicode lookups for the Hugging Face tokenizer (tokenizer_hf_unicode.h):
// strict UTF-8 decoding and binary search over generated range tables.
#include "model/tokenizers/tokenizer_hf_unicode.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

namespace plab::hf {
namespace {

struct UnicodeRange {
    char32_t first, last;
    unsigned char cls;
};
struct NfcRange {
    char32_t first, last;
    unsigned char ccc, qc;
};

#include "model/tokenizers/tokenizer_hf_unicode_table.inc"

template <class R, std::size_t N>
const R* find_range(const R (&table)[N], char32_t cp) {
    const R* it = std::upper_bound(std::begin(table), std::end(table), cp,
                                   [](char32_t v, const R& r) { return v < r.first; });
    if (it == std::begin(table)) return nullptr;
    --it;
    return cp <= it->last ? it : nullptr;
}

}  // namespace

Utf8Char utf8_at(std::string_view s, std::size_t i) {
    auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c0 = b(i);
    Utf8Char bad{c0, 1, false};
    if (c0 < 0x80) return {c0, 1, true};
    std::size_t n;
    char32_t cp, min;
    if (c0 >= 0xC2 && c0 <= 0xDF) {
        n = 2, cp = c0 & 0x1F, min = 0x80;
    } else if (c0 >= 0xE0 && c0 <= 0xEF) {
        n = 3, cp = c0 & 0x0F, min = 0x800;
    } else if (c0 >= 0xF0 && c0 <= 0xF4) {
        n = 4, cp = c0 & 0x07, min = 0x10000;
    } else {
        return bad;  // a continuation byte, C0/C1 (overlong) or F5..FF
    }
    if (i + n > s.size()) return bad;
    for (std::size_t k = 1; k < n; ++k) {
        if ((b(i + k) & 0xC0) != 0x80) return bad;
        cp = (cp << 6) | (b(i + k) & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return bad;
    return {cp, n, true};
}

std::string utf8_encode(char32_t cp) {
    std::string s;
    if (cp < 0x80) {
        s += char(cp);
    } else if (cp < 0x800) {
        s += char(0xC0 | (cp >> 6));
        s += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        s += char(0xE0 | (cp >> 12));
        s += char(0x80 | ((cp >> 6) & 0x3F));
        s += char(0x80 | (cp & 0x3F));
    } else {
        s += char(0xF0 | (cp >> 18));
        s += char(0x80 | ((cp >> 12) & 0x3F));
        s += char(0x80 | ((cp >> 6) & 0x3F));
        s += char(0x80 | (cp & 0x3F));
    }
    return s;
}

CharClass char_class(const Utf8Char& c) {
    if (!c.valid) return CharClass::kOther;
    const UnicodeRange* r = find_range(kLetterNumberRanges, c.cp);
    if (r == nullptr) return CharClass::kOther;
    return r->cls == 1 ? CharClass::kLetter : CharClass::kNumber;
}

bool is_white_space(const Utf8Char& c) {
    return c.valid &&
           std::find(std::begin(kWhiteSpace), std::end(kWhiteSpace), c.cp) != std::end(kWhiteSpace);
}

NfcCheck nfc_quick_check(std::string_view text, char32_t* culprit) {
    // UAX #15 section 9: a non-starter out of canonical order, or a character
    // NFC maps away, means "not NFC"; one that may join its neighbour, "maybe".
    unsigned last_ccc = 0;
    NfcCheck result = NfcCheck::kYes;
    for (std::size_t i = 0; i < text.size();) {
        const Utf8Char c = utf8_at(text, i);
        i += c.len;
        const NfcRange* r = c.valid ? find_range(kNfcCheckRanges, c.cp) : nullptr;
        const unsigned ccc = r ? r->ccc : 0;
        if (ccc != 0 && last_ccc > ccc) {
            if (culprit) *culprit = c.cp;
            return NfcCheck::kNo;
        }
        if (r && r->qc == 2) {
            if (culprit) *culprit = c.cp;
            return NfcCheck::kNo;
        }
        if (r && r->qc == 1 && result == NfcCheck::kYes) {
            if (culprit) *culprit = c.cp;
            result = NfcCheck::kMaybe;
        }
        last_ccc = ccc;
    }
    return result;
}

const char* unicode_version() {
    return kUnicodeVersion;
}

std::array<char32_t, 256> gpt2_byte_chars() {
    std::array<char32_t, 256> out{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        out[std::size_t(b)] = printable ? char32_t(b) : next++;
    }
    return out;
}

std::string printable_bytes(std::string_view s, bool escape_tab) {
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        const Utf8Char c = utf8_at(s, i);
        if (c.valid && c.cp == '\n') {
            out += "\\n";
        } else if (escape_tab && c.valid && c.cp == '\t') {
            out += "\\t";
        } else if (c.valid && c.cp >= 0x20 && c.cp != 0x7F) {
            out.append(s.substr(i, c.len));
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "<0x%02X>", static_cast<unsigned char>(s[i]));
            out += buf;
            i += 1;
            continue;
        }
        i += c.len;
    }
    return out;
}

}  // namespace plab::hf
