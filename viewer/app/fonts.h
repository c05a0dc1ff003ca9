// The viewer's fonts: which file, which characters, at which size.
//
// What it teaches: nothing about prefill; it makes every panel readable in the
// scripts the course is read in (Russian, Greek, German, Danish, ...) and at a
// projector's size. Dear ImGui rasterizes a fixed set of glyphs into one texture (the
// font atlas) when it is built; a character outside that set is drawn as the
// fallback glyph. So the atlas gets Latin (with Extended-A/B), Greek, Cyrillic and
// the punctuation and symbols the lessons use, plus every character of the texts
// on screen (the prompt, the lesson, decoded outputs), and is built again when the
// scale changes or a new character appears. The font comes from Debian's
// fonts-dejavu-core (.ci/debian-packages.txt), or --font PATH; a missing font is an
// error, never a silent fall back to ImGui's built-in Latin-1 bitmap font. Left out
// on purpose: font hinting options, colour emoji, right-to-left shaping.
#pragma once

#include <imgui.h>

#include <set>
#include <string>
#include <vector>

namespace plab::viewer {

// /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf (package fonts-dejavu-core).
const char* default_font_path();

// The first wide-coverage font a Debian package has installed (Droid Sans Fallback,
// Noto Sans CJK, Noto Sans), or "" when none is: which one depends on the machine,
// so no test may expect one (--fallback-font names it, or none).
std::string installed_fallback_font();

// Checks that `path` is a readable TrueType/OpenType file (its first four bytes);
// throws plab::Error with one line naming the path and what would be right.
// `given`: the path came from --font (else: the default, name the package).
void check_font_file(const std::string& path, bool given);

// The fonts of one run, rebuilt on demand (scale change, new characters).
class FontSet {
public:
    // `path`: the main font. `fallback`: a font merged in for the characters of the
    // texts that the fixed ranges lack ("" = none). `lesson`: add a monospace and a bold
    // font (code and headings) when fonts-dejavu-core has them.
    FontSet(std::string path, std::string fallback, float base_size_px, bool lesson);

    // Characters that must have glyphs beyond the fixed ranges; returns whether any
    // was new (then the atlas must be built again: rebuild()).
    bool add_text(const std::string& utf8);

    // Clears `atlas` and adds the fonts at base size × scale. The caller uploads the
    // texture again (ImGui_ImplOpenGL3_CreateFontsTexture).
    void rebuild(ImFontAtlas& atlas, float scale);

    int mono_font() const { return mono_; }        // index into atlas->Fonts; -1: none
    int heading_font() const { return heading_; }  // -1: none
    const std::string& path() const { return path_; }
    const std::string& fallback_path() const { return fallback_; }  // "" = none installed
    float size_px() const { return size_px_; }

private:
    void add_lesson_fonts(ImFontAtlas& atlas);

    std::string path_, fallback_;
    float base_size_;
    float size_px_ = 0;
    bool lesson_;
    int mono_ = -1, heading_ = -1;
    std::set<char32_t> extra_;  // characters outside the fixed ranges
    ImVector<ImWchar> ranges_;  // must outlive the atlas build (ImFontConfig keeps a pointer)
    ImVector<ImWchar> fallback_ranges_;
};

// The code points of `utf8` that `font` has no glyph for (asked of the atlas with
// FindGlyphNoFallback, not assumed from the ranges requested).
std::vector<char32_t> missing_glyphs(const ImFont& font, const std::string& utf8);

// Whether the current font draws `cp` (token labels show "<U+XXXX>" otherwise).
bool current_font_has_glyph(char32_t cp);

// The self-check line of the text: every code point of `text` has a glyph in `font`,
// counted by script (Latin, Greek, Cyrillic, other), and the fallback glyph is not '?'.
std::string text_self_check(const ImFont& font, const FontSet& fonts, const std::string& text,
                            bool& ok);

}  // namespace plab::viewer
