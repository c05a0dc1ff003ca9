// The layout self-check: what a frame laid out, held to what a
// reader must be able to read. See self_check.h and layout_record.h.
//
// Each rule names a defect a new user found on the classroom screen: a word cut at a
// window's edge ("the colours stay the sa"), a table column squeezed to one character,
// a header wrapped mid-word ("positi/on"), a control pushed past the panel's edge, a
// chart label crossed by a line or clipped by the chart's frame, a colour with no
// legend entry, two step numbers that disagree. Numbers only: no ImGui here.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "checks/layout_record.h"
#include "checks/self_check.h"

namespace plab::viewer {
namespace {

// Sub-pixel rounding of ImGui's positions (window and cell edges are floored).
constexpr float kSlack = 1.0f;
// Failures listed in the line: the first few, so one run names every kind it found.
constexpr std::size_t kListed = 3;

bool blank(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string quoted(const std::string& s, std::size_t most = 60) {
    if (s.size() <= most) return "'" + s + "'";
    // Keep whole UTF-8 characters: cut before a continuation byte.
    std::size_t cut = most;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    return "'" + s.substr(0, cut) + "...'";
}

// "…the colours stay the sa": the end of what a reader sees of a cut line.
std::string tail_of(const std::string& s, std::size_t most = 40) {
    if (s.size() <= most) return "'" + s + "'";
    std::size_t from = s.size() - most;
    while (from < s.size() && (static_cast<unsigned char>(s[from]) & 0xC0) == 0x80) ++from;
    return "'..." + s.substr(from) + "'";
}

int characters(float px, float char_width) {
    return char_width > 0 ? static_cast<int>(std::floor(px / char_width)) : 0;
}

std::string colour_hex(std::uint32_t c) {  // ImU32 is 0xAABBGGRR
    char buf[16];
    std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c & 0xFF, (c >> 8) & 0xFF, (c >> 16) & 0xFF);
    return buf;
}

// Whether the segment (x0,y0)-(x1,y1) passes through the inside of `b` (Liang-Barsky).
bool crosses(const LayoutLine& l, LayoutBox b) {
    b.x0 += kSlack, b.y0 += kSlack, b.x1 -= kSlack, b.y1 -= kSlack;
    if (b.x1 <= b.x0 || b.y1 <= b.y0) return false;
    const float dx = l.x1 - l.x0, dy = l.y1 - l.y0;
    float t0 = 0, t1 = 1;
    const float p[4] = {-dx, dx, -dy, dy};
    const float q[4] = {l.x0 - b.x0, b.x1 - l.x0, l.y0 - b.y0, b.y1 - l.y0};
    for (int i = 0; i < 4; ++i) {
        if (p[i] == 0) {
            if (q[i] < 0) return false;  // parallel and outside
            continue;
        }
        const float t = q[i] / p[i];
        if (p[i] < 0)
            t0 = std::max(t0, t);
        else
            t1 = std::min(t1, t);
        if (t0 > t1) return false;
    }
    return true;
}

// The word around offset `at` of `s`, with a '/' where the line broke: "positi/on".
std::string broken_word(const std::string& s, std::size_t at) {
    std::size_t a = at, b = at;
    while (a > 0 && !blank(s[a - 1])) --a;
    while (b < s.size() && !blank(s[b])) ++b;
    return s.substr(a, at - a) + "/" + s.substr(at, b - at);
}

struct Failures {
    std::vector<std::string> list;
    void add(const std::string& s) { list.push_back(s); }
    std::string text() const {
        std::string out;
        for (std::size_t i = 0; i < list.size() && i < kListed; ++i)
            out += (i ? "; " : "") + list[i];
        if (list.size() > kListed)
            out += "; and " + std::to_string(list.size() - kListed) + " more";
        return out;
    }
};

void check_windows(const LayoutRecord& r, Failures& f) {
    for (const LayoutWindow& w : r.windows) {
        if (w.outside_display) f.add("window '" + w.name + "' reaches past the display");
        if (w.cut_right > kSlack)
            f.add("'" + w.name + "' is cut off " + std::to_string(static_cast<int>(w.cut_right)) +
                  " px at its right edge");
        if (w.cut_bottom > kSlack)
            f.add("'" + w.name + "' is cut off " + std::to_string(static_cast<int>(w.cut_bottom)) +
                  " px at its bottom edge");
        if (w.scrolls_sideways && !w.sideways_allowed)
            f.add("'" + w.name + "' scrolls sideways: part of it is out of view");
    }
}

void check_texts(const LayoutRecord& r, Failures& f) {
    for (const LayoutText& t : r.texts) {
        const std::string in = " in " + t.where;
        // 1. Nothing sticks out of the part of the screen it is drawn into.
        const float over_right = t.rect.x1 - t.visible_x1, over_left = t.visible_x0 - t.rect.x0;
        if (over_right > kSlack || over_left > kSlack) {
            const std::string edge = over_right > kSlack ? "right" : "left";
            const int by = static_cast<int>(std::max(over_right, over_left));
            if (t.control)
                f.add("control " + quoted(t.text) + in + " is cut off at the " + edge + " edge (" +
                      std::to_string(by) + " px out of view)");
            else
                f.add("text" + in + " is cut off at the " + edge + " edge: a reader sees " +
                      (t.visible_text.empty() ? std::string("nothing of it")
                                              : tail_of(t.visible_text)) +
                      " of " + quoted(t.text));
        }
        // 2. Wrapped text breaks between words, never inside one.
        for (std::size_t i = 0; i + 1 < t.line_ends.size(); ++i) {
            const std::size_t e = t.line_ends[i];
            if (break_allowed(t.text, e)) continue;
            f.add(std::string(t.header ? "table header" : "text") + in +
                  " broken mid-word: " + quoted(broken_word(t.text, e)) + " (" +
                  std::to_string(static_cast<int>(t.wrap_width)) + " px of room, about " +
                  std::to_string(characters(t.wrap_width, r.char_width)) + " characters)");
            break;
        }
    }
}

void check_tables(const LayoutRecord& r, Failures& f) {
    for (const LayoutTable& tb : r.tables) {
        for (std::size_t c = 0; c < tb.widths.size(); ++c) {
            // The column must hold its widest word (and its name) on one line.
            float need = c < tb.header_widths.size() ? tb.header_widths[c] : 0;
            std::string word = c < tb.headers.size() ? tb.headers[c] : "";
            for (const LayoutText& t : r.texts)
                if (t.table == tb.id && t.column == static_cast<int>(c) && !t.control &&
                    t.widest_word > need) {
                    need = t.widest_word;
                    word = t.widest_word_text;
                }
            if (tb.widths[c] + kSlack >= need) continue;
            const std::string name = c < tb.headers.size() && !tb.headers[c].empty()
                                         ? quoted(tb.headers[c])
                                         : "#" + std::to_string(c + 1);
            const int chars = characters(tb.widths[c], r.char_width);
            f.add("table '" + tb.where + "': column " + name + " has room for " +
                  std::to_string(chars) + (chars == 1 ? " character" : " characters") + " (" +
                  std::to_string(static_cast<int>(tb.widths[c])) + " px), its word " +
                  quoted(word) + " needs " + std::to_string(static_cast<int>(need)) + " px");
        }
    }
}

void check_charts(const LayoutRecord& r, Failures& f) {
    std::set<std::uint32_t> legend;
    for (const LayoutLegendEntry& e : r.legend) legend.insert(e.colour);
    for (const LayoutChart& ch : r.charts) {
        const std::string in = "chart '" + ch.where + "': ";
        for (std::size_t i = 0; i < ch.labels.size(); ++i) {
            const LayoutLabel& l = ch.labels[i];
            if (!ch.rect.contains(l.rect, kSlack))
                f.add(in + "label " + quoted(l.text) + " is clipped by the chart's edge");
            for (const LayoutLine& line : ch.lines)
                if (crosses(line, l.rect)) {
                    f.add(in + "label " + quoted(l.text) + " is crossed by the " + line.what);
                    break;
                }
            for (std::size_t j = i + 1; j < ch.labels.size(); ++j)
                if (l.rect.overlaps(ch.labels[j].rect, kSlack))
                    f.add(in + "labels " + quoted(l.text) + " and " + quoted(ch.labels[j].text) +
                          " overlap");
        }
        if (!ch.needs_legend) continue;
        for (std::uint32_t c : ch.mark_colours)
            if (!legend.count(c)) f.add(in + "colour " + colour_hex(c) + " has no legend entry");
    }
}

void check_steps(const LayoutRecord& r, Failures& f) {
    for (const LayoutStep& s : r.steps)
        if (s.step != r.steps.front().step) {
            f.add("the " + r.steps.front().where + " says " + quoted(r.steps.front().text) +
                  " but the " + s.where + " says " + quoted(s.text) + ": not the same step");
            return;
        }
}

}  // namespace

CheckResult check_layout(const LayoutRecord& r) {
    Failures f;
    check_windows(r, f);
    check_texts(r, f);
    check_tables(r, f);
    check_charts(r, f);
    check_steps(r, f);
    int controls = 0, labels = 0, columns = 0, tooltips = 0;
    for (const LayoutText& t : r.texts) {
        controls += t.control ? 1 : 0;
        tooltips += t.where == "tooltip" ? 1 : 0;
    }
    for (const LayoutChart& c : r.charts) labels += static_cast<int>(c.labels.size());
    for (const LayoutTable& t : r.tables) columns += static_cast<int>(t.widths.size());
    std::ostringstream s;
    s << "readable: no text cut off or broken mid-word, no table column narrower than its words, "
         "chart labels clear of lines and edges, a legend entry for every colour, one step "
         "number: "
      << (f.list.empty() ? "yes" : "NO") << " (" << r.texts.size() - controls << " texts, "
      << controls << " controls, " << r.tables.size() << " tables of " << columns << " columns, "
      << r.charts.size() << " charts with " << labels << " labels, " << r.legend.size()
      << " legend entries, " << r.steps.size() << " step numbers, " << r.windows.size()
      << " windows, " << tooltips << " tooltips)";
    if (!f.list.empty()) s << ": " << f.text();
    return CheckResult{f.list.empty(), s.str()};
}

std::string window_failures(const LayoutRecord& r) {
    Failures f;
    check_windows(r, f);
    return f.text();
}

}  // namespace plab::viewer
