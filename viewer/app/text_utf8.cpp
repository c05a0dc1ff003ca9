// UTF-8 decoding and token labels (see text_utf8.h).
#include "app/text_utf8.h"

#include <algorithm>
#include <cstdio>

namespace plab::viewer {

Utf8Step utf8_step(std::string_view s, std::size_t i) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char b0 = byte(i);
    Utf8Step r;
    if (b0 < 0x80) return {b0, 1, true};
    // RFC 3629: the lead byte says the length; C0, C1 and F5..FF never appear.
    int len = 0;
    char32_t cp = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        len = 2, cp = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        len = 3, cp = b0 & 0x0F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4, cp = b0 & 0x07;
    } else {
        return r;  // a continuation byte or an invalid lead: one byte, not a character
    }
    if (i + len > s.size()) return r;  // cut off: the rest is in the next token
    for (int k = 1; k < len; ++k) {
        const unsigned char b = byte(i + k);
        if ((b & 0xC0) != 0x80) return r;
        cp = (cp << 6) | (b & 0x3F);
    }
    // Shortest form only, and no UTF-16 surrogates or values past U+10FFFF.
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return r;
    return {cp, len, true};
}

std::vector<char32_t> utf8_codepoints(std::string_view text) {
    std::vector<char32_t> out;
    for (std::size_t i = 0; i < text.size();) {
        const Utf8Step c = utf8_step(text, i);
        if (c.valid) out.push_back(c.cp);
        i += static_cast<std::size_t>(c.len);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::string token_bytes_from_text(std::string_view t) {
    auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        return -1;
    };
    std::string out;
    for (std::size_t i = 0; i < t.size();) {
        // "<0xHH>": six characters, two hex digits.
        if (t.compare(i, 3, "<0x") == 0 && i + 6 <= t.size() && t[i + 5] == '>' &&
            hex(t[i + 3]) >= 0 && hex(t[i + 4]) >= 0) {
            out += static_cast<char>(hex(t[i + 3]) * 16 + hex(t[i + 4]));
            i += 6;
        } else {
            out += t[i++];
        }
    }
    return out;
}

std::string codepoint_name(char32_t cp) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp));
    return buf;
}

std::string token_display(std::string_view token_text,
                          const std::function<bool(char32_t)>& has_glyph) {
    const std::string bytes = token_bytes_from_text(token_text);
    std::string out;
    for (std::size_t i = 0; i < bytes.size();) {
        const Utf8Step c = utf8_step(bytes, i);
        if (!c.valid) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "<%02X>", static_cast<unsigned char>(bytes[i]));
            out += buf;
        } else if (c.cp == '\n') {
            out += "\\n";
        } else if (c.cp == '\t') {
            out += "\\t";
        } else if (c.cp == ' ') {
            out += "_";
        } else if (c.cp < 0x20 || c.cp == 0x7F) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "<%02X>", static_cast<unsigned>(c.cp));
            out += buf;  // a control character has no glyph in any font
        } else if (has_glyph && !has_glyph(c.cp)) {
            out += "<" + codepoint_name(c.cp) + ">";
        } else {
            out.append(bytes, i, static_cast<std::size_t>(c.len));
        }
        i += static_cast<std::size_t>(c.len);
    }
    return out;
}

}  // namespace plab::viewer
