// UTF-8 for the viewer's labels: which characters a text holds (so the font atlas
// gets a glyph for each), and how a token is shown when it is not a whole character.
//
// What it teaches: a byte-level BPE tokenizer (GPT-2's, and ours) works on bytes, not
// characters, so one token can end in the middle of a character: "Д" is the two bytes
// D0 94, and a merge can put D0 in one token and 94 in the next. Such a token has no
// glyph of its own; it is shown as its bytes, "<D0>", never as a replacement glyph or
// "?". Left out on purpose: grapheme clusters, right-to-left text, combining marks
// (a token is shown character by character, as the tokenizer cut it). No ImGui here:
// tests/viewer tests it without a window.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace plab::viewer {

// One step of a UTF-8 walk: the code point at `i` and its length in bytes, or
// valid = false for a byte that does not start a whole, shortest-form sequence
// (a stray continuation byte, a cut-off sequence, an overlong form, a surrogate).
struct Utf8Step {
    char32_t cp = 0;
    int len = 1;
    bool valid = false;
};
Utf8Step utf8_step(std::string_view s, std::size_t i);

// The distinct code points of the valid characters of `text`, in ascending order.
std::vector<char32_t> utf8_codepoints(std::string_view text);

// The bytes behind a tokenizer's token_text: every tokenizer in src/model writes a
// byte it cannot show as "<0xHH>"; those are turned back into the byte, so the
// characters they form can be regrouped. ("<0xD0><0x94>" -> "Д".)
std::string token_bytes_from_text(std::string_view token_text);

// A token as shown on an axis or in a tooltip: its characters; "\n" as \n, a tab as
// \t, a space as _, so a label never looks empty; a byte that is not part of a whole
// character as "<D0>"; a character the loaded font has no glyph for (has_glyph says
// false) as "<U+4E2D>". `has_glyph` may be empty: every character then counts as drawable.
std::string token_display(std::string_view token_text,
                          const std::function<bool(char32_t)>& has_glyph = {});

// "U+0439"
std::string codepoint_name(char32_t cp);

}  // namespace plab::viewer
