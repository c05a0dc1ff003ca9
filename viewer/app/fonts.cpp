// Font loading and glyph coverage (see fonts.h).
#include "app/fonts.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "app/text_utf8.h"
#include "core/error.h"

namespace plab::viewer {
namespace {

constexpr const char* kDejaVuDir = "/usr/share/fonts/truetype/dejavu/";

// clang-format off
// The fixed glyph ranges (pairs of first, last; 0 ends the list). ImWchar is 16-bit in
// Debian's build (no IMGUI_USE_WCHAR32): characters past U+FFFF cannot be in the atlas,
// labels show them as <U+1F600>.
constexpr ImWchar kRanges[] = {
    0x0020, 0x00FF,  // Basic Latin, Latin-1 (Danish æ ø å, German ä ö ü ß)
    0x0100, 0x024F,  // Latin Extended-A and -B (Polish, Czech, Turkish, Romanian, ...)
    0x0370, 0x03FF,  // Greek and Coptic
    0x0400, 0x052F,  // Cyrillic and its supplement
    0x1E00, 0x1EFF,  // Latin Extended Additional (Vietnamese)
    0x2000, 0x206F,  // General Punctuation: — – … · ‘ ’ “ ” •
    0x2070, 0x209F,  // superscripts and subscripts: ² ₖ
    0x20A0, 0x20CF,  // currency: €
    0x2100, 0x214F,  // letterlike symbols
    0x2190, 0x21FF,  // arrows: → ↓ ⇒
    0x2200, 0x22FF,  // mathematical operators: ≤ ≥ ≈ √ ∑ ·
    0x2400, 0x243F,  // control pictures: ␣
    0x2500, 0x25FF,  // box drawing, blocks, geometric shapes: █ ▶ ■
    0xFFFD, 0xFFFD,  // the replacement character: ImGui's fallback glyph, never '?'
    0,
};
// clang-format on

// Fonts merged into the main one for the characters it lacks (CJK, Thai, ...), if a
// Debian package has put one here; none is required (fonts-dejavu-core is the one in
// the package list: the big CJK fonts are tens of MiB, for a course read in Latin,
// Greek and Cyrillic script).
constexpr const char* kFallbacks[] = {
    "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",  // fonts-droid-fallback
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",     // fonts-noto-cjk
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",        // fonts-noto-core
};

bool in_fixed_ranges(char32_t cp) {
    for (const ImWchar* r = kRanges; r[0] != 0; r += 2)
        if (cp >= r[0] && cp <= r[1]) return true;
    return false;
}

const char* script_of(char32_t cp) {
    if (cp < 0x250 || (cp >= 0x1E00 && cp <= 0x1EFF)) return "Latin";
    if (cp >= 0x370 && cp <= 0x3FF) return "Greek";
    if (cp >= 0x400 && cp <= 0x52F) return "Cyrillic";
    return "other";
}

}  // namespace

const char* default_font_path() {
    return "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
}

void check_font_file(const std::string& path, bool given) {
    const std::string hint =
        given ? " (give a .ttf or .otf file, e.g. " + std::string(default_font_path()) + ")"
              : " (Debian package fonts-dejavu-core, in .ci/debian-packages.txt; or give "
                "--font PATH)";
    PLAB_CHECK(!std::filesystem::is_directory(path),
               "font '" << path << "' is a directory" << hint);
    std::ifstream f(path, std::ios::binary);
    PLAB_CHECK(f.good(), "cannot read font '" << path << "'" << hint);
    // A regular file of a font's size (CJK collections are about 20-30 MiB), so /dev/zero or
    // a disk image is refused before it is read.
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    PLAB_CHECK(std::filesystem::is_regular_file(path) && !ec && size <= (64u << 20),
               "font '" << path << "' is not a font-sized regular file (at most 64 MiB)" << hint);
    const std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto u8 = [&](std::size_t i) { return static_cast<unsigned char>(data[i]); };
    // sfnt versions: 00 01 00 00 (TrueType), "OTTO" (CFF), "true" (Apple), "ttcf" (collection).
    const std::string m = data.substr(0, 4);
    const bool sfnt =
        data.size() >= 12 && ((u8(0) == 0 && u8(1) == 1 && u8(2) == 0 && u8(3) == 0) ||
                              m == "OTTO" || m == "true" || m == "ttcf");
    PLAB_CHECK(sfnt, "font '" << path << "' is not a TrueType/OpenType font file" << hint);
    // The table directory must fit in the file and name the tables a glyph needs: stb_truetype
    // trusts these counts and offsets, so a file that only starts like a font is refused here.
    if (m != "ttcf") {
        const std::size_t n = u8(4) * 256u + u8(5);
        bool cmap = false, head = false;
        for (std::size_t t = 0; t < n && 12 + 16 * (t + 1) <= data.size(); ++t) {
            const std::string tag = data.substr(12 + 16 * t, 4);
            cmap = cmap || tag == "cmap";
            head = head || tag == "head";
        }
        PLAB_CHECK(n > 0 && 12 + 16 * n <= data.size() && cmap && head,
                   "font '" << path << "' could not be read as a TrueType/OpenType font (its "
                            << "table directory is cut off or has no cmap/head table)" << hint);
    }
}

std::string installed_fallback_font() {
    for (const char* p : kFallbacks)
        if (std::filesystem::exists(p)) return p;
    return "";
}

FontSet::FontSet(std::string path, std::string fallback, float base_size_px, bool lesson)
    : path_(std::move(path)),
      fallback_(std::move(fallback)),
      base_size_(base_size_px),
      lesson_(lesson) {}

bool FontSet::add_text(const std::string& utf8) {
    bool added = false;
    for (char32_t cp : utf8_codepoints(utf8))
        if (cp <= 0xFFFF && !in_fixed_ranges(cp)) added = extra_.insert(cp).second || added;
    return added;
}

void FontSet::rebuild(ImFontAtlas& atlas, float scale) {
    atlas.Clear();
    size_px_ = base_size_ * scale;
    // 1. The glyph set: the fixed ranges plus every extra character seen.
    ImFontGlyphRangesBuilder builder;
    builder.AddRanges(kRanges);
    for (char32_t cp : extra_) builder.AddChar(static_cast<ImWchar>(cp));
    ranges_.clear();
    builder.BuildRanges(&ranges_);
    // 2. The main font, and the fallback merged into it for what it lacks (ImGui keeps
    //    the glyph of the first font that has one).
    ImFont* main = atlas.AddFontFromFileTTF(path_.c_str(), size_px_, nullptr, ranges_.Data);
    PLAB_CHECK(main != nullptr, "cannot load font '" << path_ << "'");
    if (!fallback_.empty() && !extra_.empty()) {
        ImFontGlyphRangesBuilder fb;
        for (char32_t cp : extra_) fb.AddChar(static_cast<ImWchar>(cp));
        fallback_ranges_.clear();
        fb.BuildRanges(&fallback_ranges_);
        ImFontConfig merge;
        merge.MergeMode = true;
        atlas.AddFontFromFileTTF(fallback_.c_str(), size_px_, &merge, fallback_ranges_.Data);
    }
    // 3. Lesson mode: code in DejaVu Sans Mono, headings in DejaVu Sans Bold.
    mono_ = heading_ = -1;
    if (lesson_) add_lesson_fonts(atlas);
    // 4. Rasterize now: a file that only looks like a font fails here, with its name,
    //    instead of inside the renderer's first frame.
    PLAB_CHECK(atlas.Build(), "font '" << path_
                                       << "' could not be read as a TrueType/OpenType font "
                                          "(stb_truetype refused it; try "
                                       << default_font_path() << ")");
}

void FontSet::add_lesson_fonts(ImFontAtlas& atlas) {
    const std::string mono = std::string(kDejaVuDir) + "DejaVuSansMono.ttf";
    const std::string bold = std::string(kDejaVuDir) + "DejaVuSans-Bold.ttf";
    if (std::filesystem::exists(mono)) {
        mono_ = atlas.Fonts.Size;
        atlas.AddFontFromFileTTF(mono.c_str(), size_px_ * 0.9f, nullptr, ranges_.Data);
    }
    if (std::filesystem::exists(bold)) {
        heading_ = atlas.Fonts.Size;
        atlas.AddFontFromFileTTF(bold.c_str(), size_px_ * 1.25f, nullptr, ranges_.Data);
    }
}

std::vector<char32_t> missing_glyphs(const ImFont& font, const std::string& utf8) {
    std::vector<char32_t> missing;
    for (char32_t cp : utf8_codepoints(utf8)) {
        if (cp < 0x20 || cp == 0x7F) continue;  // control characters: shown escaped
        if (cp > 0xFFFF || font.FindGlyphNoFallback(static_cast<ImWchar>(cp)) == nullptr)
            missing.push_back(cp);
    }
    return missing;
}

bool current_font_has_glyph(char32_t cp) {
    return cp <= 0xFFFF && ImGui::GetFont()->FindGlyphNoFallback(static_cast<ImWchar>(cp));
}

std::string text_self_check(const ImFont& font, const FontSet& fonts, const std::string& text,
                            bool& ok) {
    const std::vector<char32_t> cps = utf8_codepoints(text);
    const std::vector<char32_t> missing = missing_glyphs(font, text);
    int latin = 0, greek = 0, cyrillic = 0, other = 0;
    for (char32_t cp : cps) {
        const std::string s = script_of(cp);
        (s == "Latin" ? latin : s == "Greek" ? greek : s == "Cyrillic" ? cyrillic : other) += 1;
    }
    const bool fallback_ok = font.FallbackChar != '?';
    ok = missing.empty() && fallback_ok;
    std::ostringstream line;
    // The fonts by file name: which fallback is installed varies by machine, and a
    // test pins the line only where --fallback-font chose it.
    const auto name = [](const std::string& p) {
        return std::filesystem::path(p).filename().string();
    };
    line << "text: every code point of the prompt has a glyph in the loaded fonts ("
         << name(fonts.path())
         << (fonts.fallback_path().empty() ? "" : " + " + name(fonts.fallback_path())) << ", "
         << fonts.size_px() << " px; " << cps.size() << " distinct: " << latin << " Latin, "
         << greek << " Greek, " << cyrillic << " Cyrillic, " << other
         << " other), the fallback glyph is " << codepoint_name(font.FallbackChar)
         << " not '?': " << (ok ? "yes" : "NO");
    if (!missing.empty()) {
        line << " (missing:";
        for (std::size_t i = 0; i < missing.size() && i < 8; ++i)
            line << " " << codepoint_name(missing[i]);
        line << ")";
    }
    return line.str();
}

}  // namespace plab::viewer
