// How the panels write tokens, times and sizes: "_cat", "12.3 us", "1.2 KiB".
//
// What it teaches: nothing about prefill; every panel shows a token, a duration or a
// byte count the same way, so a number read in one panel is read the same in the next.
#pragma once

#include <string>

namespace plab::viewer {

// A token as shown on an axis: printable, short ("\n" -> "\\n", " " -> "_"); a byte
// that is not a whole character as <D0>, a character the font lacks as <U+4E2D>
// (text_utf8.h: never a replacement glyph or '?').
std::string token_label(const std::string& text);

// "12.3 us" / "4.56 ms" / "1.20 s"
std::string format_us(double us);
// "512 B" / "1.2 KiB" / "3.45 MiB"
std::string format_bytes(double bytes);

}  // namespace plab::viewer
