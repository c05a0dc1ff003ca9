// The lesson pane: lesson_text.h's blocks drawn with ImGui 1.86 (see lesson_pane.h).
//
// Headings in a bold, larger font; paragraphs and list items wrapped to the pane;
// code in a monospace box that scrolls sideways rather than wrap console output;
// tables as ImGui tables; the exercises' answers in a collapsed tree node, as
// <details> folds them on GitHub; each "Try:" step a button beside its words.
#include <imgui.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "app/lesson_pane.h"
#include "panels/layout_probe.h"
#include "panels/ui_colours.h"
#include "panels/ui_widgets.h"

namespace plab::viewer {
namespace {

ImFont* font_at(int index) {
    const ImGuiIO& io = ImGui::GetIO();
    return index >= 0 && index < io.Fonts->Fonts.Size ? io.Fonts->Fonts[index] : nullptr;
}

// A diagram: a block drawn with box-drawing characters (U+2500..U+259F, "└──┘"), whose
// columns must stay aligned.
bool is_diagram(const std::string& text) {
    for (std::size_t i = 0; i + 1 < text.size(); ++i)
        if (text[i] == '\xe2' &&
            (text[i + 1] == '\x94' || text[i + 1] == '\x95' || text[i + 1] == '\x96'))
            return true;
    return false;
}

// A fenced block: a box with the code background, sized to its lines. A line wider
// than the pane is wrapped between words, its continuation indented behind a dim
// kCodeWrapMarker, so the pane never scrolls sideways (at a classroom's
// 1280x800 or a projector's scale, console output is read, not scrolled to). A diagram
// wider than the pane cannot be wrapped without breaking its columns: its box (and only
// it, a child named "diagram") scrolls sideways.
void draw_code(const LessonBlock& b, int id, ImFont* mono) {
    if (mono != nullptr) ImGui::PushFont(mono);
    const ImGuiStyle& style = ImGui::GetStyle();
    const float avail = ImGui::GetContentRegionAvail().x - 2 * style.WindowPadding.x;
    const ImVec2 size = ImGui::CalcTextSize(b.text.c_str(), b.text.c_str() + b.text.size());
    if (size.x > avail && is_diagram(b.text)) {
        const float height = size.y + 2 * style.WindowPadding.y + style.ScrollbarSize;
        ImGui::PushStyleColor(ImGuiCol_ChildBg, colour::kCodeBox);
        ImGui::PushID(id);
        ImGui::BeginChild("diagram", ImVec2(0, height), false,
                          ImGuiWindowFlags_HorizontalScrollbar);
        ImGui::TextUnformatted(b.text.c_str(), b.text.c_str() + b.text.size());
        ImGui::EndChild();
        ImGui::PopID();
        ImGui::PopStyleColor();
        if (mono != nullptr) ImGui::PopFont();
        return;
    }
    const float marker = ImGui::CalcTextSize(kCodeWrapMarker).x + ImGui::CalcTextSize(" ").x;
    // 1. The lines as shown: each source line cut into pieces that fit.
    struct Piece {
        std::string text;
        bool continued;
    };
    std::vector<Piece> pieces;
    std::size_t start = 0;
    while (start <= b.text.size()) {
        std::size_t nl = b.text.find('\n', start);
        if (nl == std::string::npos) nl = b.text.size();
        std::string line = b.text.substr(start, nl - start);
        bool continued = false;
        for (;;) {
            const float room = std::max(1.0f, avail - (continued ? marker : 0));
            if (ImGui::CalcTextSize(line.c_str()).x <= room) break;
            // The last blank (or punctuation) that keeps the piece within the room; none:
            // a word wider than the pane, cut where it must be, behind the marker.
            ImFont* font = ImGui::GetFont();
            const float scale = ImGui::GetFontSize() / font->FontSize;
            const char* cut =
                font->CalcWordWrapPositionA(scale, line.c_str(), line.c_str() + line.size(), room);
            std::size_t at = static_cast<std::size_t>(cut - line.c_str());
            if (at == 0) at = 1;
            pieces.push_back({line.substr(0, at), continued});
            while (at < line.size() && line[at] == ' ') ++at;
            line = line.substr(at);
            continued = true;
        }
        if (!(line.empty() && nl == b.text.size() && start > 0))
            pieces.push_back({line, continued});
        start = nl + 1;
    }
    // 2. The box and its pieces.
    const float line_h = ImGui::GetTextLineHeightWithSpacing();
    const float height = pieces.size() * line_h + 2 * style.WindowPadding.y;
    ImGui::PushStyleColor(ImGuiCol_ChildBg, colour::kCodeBox);
    ImGui::PushID(id);
    ImGui::BeginChild("code", ImVec2(0, height), false, ImGuiWindowFlags_NoScrollbar);
    for (const Piece& p : pieces) {
        if (p.continued) {
            line_text(kCodeWrapMarker, dim_colour());
            ImGui::SameLine(0, ImGui::CalcTextSize(" ").x);
        }
        line_text(p.text.empty() ? " " : p.text);
    }
    ImGui::EndChild();
    ImGui::PopID();
    ImGui::PopStyleColor();
    if (mono != nullptr) ImGui::PopFont();
}

// A table: each column at least as wide as its widest word, the room left shared in
// proportion to what each column would need on one line (ImGui's proportional sizing
// alone squeezes a short column to a character and breaks its header mid-word).
void draw_table(const LessonBlock& b, int id) {
    size_t n_cols = 1;
    for (const auto& row : b.cells) n_cols = std::max(n_cols, row.size());
    const ImGuiStyle& style = ImGui::GetStyle();
    std::vector<float> need(n_cols, 0), want(n_cols, 0);
    for (const auto& row : b.cells)
        for (size_t c = 0; c < row.size(); ++c) {
            want[c] = std::max(want[c], text_width(row[c]));
            std::size_t i = 0;
            const std::string& t = row[c];
            while (i < t.size()) {
                std::size_t j = t.find(' ', i);
                if (j == std::string::npos) j = t.size();
                need[c] = std::max(need[c], text_width(t.substr(i, j - i)));
                i = j + 1;
            }
        }
    // Room for the cells' content: the pane less each column's padding and border.
    const float room =
        ImGui::GetContentRegionAvail().x - n_cols * (2 * style.CellPadding.x + 1) - 1;
    float sum_need = 0, sum_want = 0;
    for (size_t c = 0; c < n_cols; ++c) sum_need += need[c], sum_want += want[c];
    std::vector<float> width = want;
    if (sum_want > room)
        for (size_t c = 0; c < n_cols; ++c)
            width[c] = need[c] + (sum_want > sum_need
                                      ? (want[c] - need[c]) * std::max(0.0f, room - sum_need) /
                                            (sum_want - sum_need)
                                      : 0);
    ImGui::PushID(id);
    if (ImGui::BeginTable(
            "table", static_cast<int>(n_cols),
            ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) {
        for (size_t c = 0; c < n_cols; ++c)
            ImGui::TableSetupColumn("", ImGuiTableColumnFlags_WidthFixed, std::floor(width[c]));
        for (size_t r = 0; r < b.cells.size(); ++r) {
            ImGui::TableNextRow(r == 0 ? ImGuiTableRowFlags_Headers : 0);
            for (size_t c = 0; c < b.cells[r].size(); ++c) {
                ImGui::TableSetColumnIndex(static_cast<int>(c));
                wrapped_text(b.cells[r][c]);
            }
        }
        probe_table("lesson table");
        ImGui::EndTable();
    }
    ImGui::PopID();
}

// A Try step: the button, its words beside it, and what pressing it changed.
void draw_try(const LessonBlock& b, int k, const Snapshot& snap, ViewerState& state,
              LessonPane& pane) {
    ImGui::PushID(1000000 + k);
    ImGui::PushStyleColor(ImGuiCol_Button, colour::kTryButton);
    const std::string label = "Try " + std::to_string(k + 1);
    const bool pressed = ImGui::Button(label.c_str());
    probe_control(label);
    ImGui::PopStyleColor();
    item_tooltip("Sets the panel as this command would:\n" + b.command);
    if (pane.jump_to_try && k == 0) {
        ImGui::SetScrollHereY(0.2f);
        pane.jump_to_try = false;
    }
    if (k == pane.click_index && !pane.click_rect_ready) {
        // Headless tests: scroll the button into view, then report where it is once it has
        // stayed put for two frames (a table above settles its row heights over a frame
        // or two, moving everything under it).
        const ImVec2 a = ImGui::GetItemRectMin(), z = ImGui::GetItemRectMax();
        const ImVec2 wa = ImGui::GetWindowPos();
        const ImVec2 wz(wa.x + ImGui::GetWindowSize().x, wa.y + ImGui::GetWindowSize().y);
        if (a.y >= wa.y && z.y <= wz.y && a.x >= wa.x && z.x <= wz.x) {
            const float r[4] = {a.x, a.y, z.x, z.y};
            const bool same = std::equal(r, r + 4, pane.click_rect);
            pane.click_stable_frames = same ? pane.click_stable_frames + 1 : 0;
            std::copy(r, r + 4, pane.click_rect);
            pane.click_rect_ready = pane.click_stable_frames >= 2;
        } else {
            pane.click_stable_frames = 0;
            ImGui::SetScrollHereY(0.5f);
        }
    }
    ImGui::SameLine();
    wrapped_text(b.text);
    if (pane.pressed == k) {
        const bool bad = !pane.error.empty();
        wrapped_text(bad                    ? "refused: " + pane.error
                     : pane.changed.empty() ? std::string("already set: nothing changed")
                                            : "set: " + pane.changed,
                     bad ? colour::kBad : colour::kGood);
    }
    ImGui::PopID();
    if (pressed) press_try(pane, k, snap, state);
}

// The walk through the lesson's blocks in one frame: what every block needs, and where
// the walk is in the <details> sections.
struct LessonWalk {
    const Snapshot& snap;
    ViewerState& state;
    LessonPane& pane;
    ImFont* mono = nullptr;     // code blocks; null: the main font
    ImFont* heading = nullptr;  // headings of level 1 and 2; null: the main font
    std::vector<bool> open{};   // the <details> sections entered, innermost last
    int closed_depth = 0;       // > 0: inside a closed section (its blocks are hidden)
    int k = 0;                  // Try steps so far
};

// 1. A fixed header: which file, and a way to the Try steps.
void draw_lesson_header(LessonPane& pane, int n_try) {
    const std::string file = std::filesystem::path(pane.text.path).filename().string();
    wrapped_text("Lesson " + std::to_string(pane.lesson) + ": lessons/" + file, dim_colour());
    help_marker(
        "Lesson mode (plab-viewer --lesson N): the lesson's text beside its panel, read from "
        "lessons/ at start. Each Try step is a button that sets the panel as its command "
        "would; the flags you started the viewer with stay underneath.");
    if (n_try > 0) {
        const std::string jump =
            "Go to the " + std::to_string(n_try) + " Try step" + (n_try > 1 ? "s" : "");
        if (ImGui::SmallButton(jump.c_str())) pane.jump_to_try = true;
        probe_control(jump);
    }
    ImGui::Separator();
}

// A block inside a closed section: counted, not drawn; the section's end closes it.
void skip_hidden_block(LessonWalk& w, const LessonBlock& b) {
    LessonLayout& layout = w.pane.layout;
    w.closed_depth += b.kind == BlockKind::kDetailsBegin ? 1
                      : b.kind == BlockKind::kDetailsEnd ? -1
                                                         : 0;
    if (w.closed_depth == 0) w.open.pop_back();  // the closed section ends here
    ++layout.blocks_hidden;
    if (b.kind == BlockKind::kTry) ++w.k, ++layout.try_buttons;
}

// A <details> section's summary as a tree node (closed: its blocks are hidden), or its end.
void draw_details_edge(LessonWalk& w, const LessonBlock& b, size_t i) {
    if (b.kind == BlockKind::kDetailsBegin) {
        ImGui::PushID(static_cast<int>(i));
        const bool is_open = ImGui::TreeNode("details", "%s", b.text.c_str());
        probe_control(b.text);
        ImGui::PopID();
        w.open.push_back(is_open);
        if (!is_open) w.closed_depth = 1;
        return;
    }
    if (!w.open.empty() && w.open.back()) ImGui::TreePop();
    if (!w.open.empty()) w.open.pop_back();
}

// One block of the lesson, drawn by its kind.
void draw_lesson_block(LessonWalk& w, const LessonBlock& b, size_t i) {
    switch (b.kind) {
        case BlockKind::kHeading:
            ImGui::Spacing();
            if (w.heading != nullptr && b.level <= 2) ImGui::PushFont(w.heading);
            wrapped_text(b.text, colour::kHeading);
            if (w.heading != nullptr && b.level <= 2) ImGui::PopFont();
            break;
        case BlockKind::kParagraph:
            wrapped_text(b.text);
            ImGui::Spacing();
            break;
        case BlockKind::kBullet:
            ImGui::Bullet();
            ImGui::SameLine();
            wrapped_text(b.text);
            break;
        case BlockKind::kNumbered:
            line_text(b.marker);
            ImGui::SameLine();
            wrapped_text(b.text);
            break;
        case BlockKind::kCode:
            draw_code(b, static_cast<int>(i), w.mono);
            break;
        case BlockKind::kTable:
            draw_table(b, static_cast<int>(i));
            break;
        case BlockKind::kPicture:
            wrapped_text("[picture: " + b.text + ", " + b.marker + "]", dim_colour());
            break;
        case BlockKind::kRule:
            ImGui::Separator();
            break;
        case BlockKind::kTry:
            ++w.pane.layout.try_buttons;
            draw_try(b, w.k++, w.snap, w.state, w.pane);
            break;
        case BlockKind::kDetailsBegin:
        case BlockKind::kDetailsEnd:
            draw_details_edge(w, b, i);
            break;
    }
}

// 2. The blocks, in the scrolled child. Blocks far outside the visible part are stood in
//    for by their height from an earlier frame: a long lesson costs what its visible
//    screenful costs. Heights are measured again whenever the pane's width changes.
void draw_lesson_blocks(LessonWalk& w) {
    LessonPane& pane = w.pane;
    LessonLayout& layout = pane.layout;
    const float indent = ImGui::GetFontSize() * 1.2f;
    const float width = ImGui::GetContentRegionAvail().x;
    if (pane.block_heights.size() != pane.text.blocks.size() || pane.heights_width != width) {
        pane.block_heights.assign(pane.text.blocks.size(), -1.0f);
        pane.heights_width = width;
    }
    const float view_top = ImGui::GetScrollY() - ImGui::GetWindowHeight();
    const float view_bottom = ImGui::GetScrollY() + 2 * ImGui::GetWindowHeight();
    for (size_t i = 0; i < pane.text.blocks.size(); ++i) {
        const LessonBlock& b = pane.text.blocks[i];
        if (w.closed_depth > 0) {
            skip_hidden_block(w, b);
            continue;
        }
        ++layout.blocks_drawn;
        const float y0 = ImGui::GetCursorPosY();
        const float h = pane.block_heights[i];
        const bool skippable = b.kind != BlockKind::kTry && b.kind != BlockKind::kDetailsBegin &&
                               b.kind != BlockKind::kDetailsEnd;
        if (skippable && h > 0 && !pane.draw_all && (y0 + h < view_top || y0 > view_bottom)) {
            ImGui::Dummy(ImVec2(1.0f, h - ImGui::GetStyle().ItemSpacing.y));
            continue;
        }
        const bool indented = b.level > 0 && b.kind != BlockKind::kHeading;
        if (indented) ImGui::Indent(indent);
        draw_lesson_block(w, b, i);
        if (indented) ImGui::Unindent(indent);
        pane.block_heights[i] = ImGui::GetCursorPosY() - y0;
    }
    while (!w.open.empty()) {
        if (w.open.back()) ImGui::TreePop();
        w.open.pop_back();
    }
}

}  // namespace

void draw_lesson(const Snapshot& snap, ViewerState& state, LessonPane& pane) {
    LessonLayout& layout = pane.layout;
    layout.blocks_drawn = layout.blocks_hidden = layout.try_buttons = 0;
    LessonWalk w{snap, state, pane, font_at(pane.mono_font), font_at(pane.heading_font)};
    const int n_try = pane.text.count(BlockKind::kTry);

    // 1. A fixed header: which file, and a way to the Try steps.
    const ProbeScope scope("lesson " + std::to_string(pane.lesson));
    draw_lesson_header(pane, n_try);

    // 2. The text, scrolled on its own.
    ImGui::BeginChild("lesson_text", ImVec2(0, 0), false);
    draw_lesson_blocks(w);
    layout.text_height = ImGui::GetCursorPosY();
    ImGui::EndChild();
}

}  // namespace plab::viewer
