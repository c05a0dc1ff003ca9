// Tokens, times and sizes as the panels write them (see ui_format.h).
#include "panels/ui_format.h"

#include <cstdio>

#include "app/fonts.h"
#include "app/text_utf8.h"

namespace plab::viewer {

std::string token_label(const std::string& text) {
    return token_display(text, current_font_has_glyph);
}

std::string format_us(double us) {
    char buf[32];
    if (us < 1000)
        std::snprintf(buf, sizeof buf, "%.1f us", us);
    else if (us < 1e6)
        std::snprintf(buf, sizeof buf, "%.2f ms", us / 1000);
    else
        std::snprintf(buf, sizeof buf, "%.2f s", us / 1e6);
    return buf;
}

std::string format_bytes(double bytes) {
    char buf[32];
    if (bytes < 1024)
        std::snprintf(buf, sizeof buf, "%.0f B", bytes);
    else if (bytes < 1024 * 1024)
        std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024);
    else
        std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / (1024 * 1024));
    return buf;
}

}  // namespace plab::viewer
