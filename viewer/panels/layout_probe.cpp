// Recording a frame's layout for check_layout (see layout_probe.h).
#include "panels/layout_probe.h"

#include <imgui_internal.h>  // the current table's columns and row flags

#include <algorithm>
#include <cfloat>

#include "panels/ui_context.h"

namespace plab::viewer {
namespace {

LayoutBox box_of(ImVec2 a, ImVec2 b) {
    return LayoutBox{a.x, a.y, b.x, b.y};
}

// Pixels of text[a, b) at the current font, unrounded (glyph advances add up: ImGui
// 1.86 has no kerning; CalcTextSize rounds up, which does not add up).
float width_of(const std::string& text, std::size_t a, std::size_t b) {
    return ImGui::GetFont()
        ->CalcTextSizeA(ImGui::GetFontSize(), FLT_MAX, 0, text.data() + a, text.data() + b)
        .x;
}

bool blank(char c) {
    return c == ' ' || c == '\t' || c == '\r';
}

// The unbreakable parts of text[a, b): [start, end) runs of non-blanks between places
// break_allowed allows.
std::vector<std::pair<std::size_t, std::size_t>> pieces_of(const std::string& text, std::size_t a,
                                                           std::size_t b) {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    std::size_t i = a;
    while (i < b) {
        while (i < b && blank(text[i])) ++i;
        if (i >= b) break;
        std::size_t j = i + 1;
        while (j < b && !blank(text[j]) && !break_allowed(text, j)) ++j;
        out.emplace_back(i, j);
        i = j;
    }
    return out;
}

// The part of a one-line `text` drawn from x0 that is left of `x1`.
std::string visible_part(const std::string& text, float x0, float x1) {
    std::size_t keep = 0;
    for (std::size_t i = 1; i <= text.size(); ++i) {
        if (i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;
        if (x0 + ImGui::CalcTextSize(text.data(), text.data() + i).x > x1) break;
        keep = i;
    }
    return text.substr(0, keep);
}

LayoutText item_record(const LayoutRecord& r, const std::string& text, bool control) {
    LayoutText t;
    t.where = r.scope;
    t.text = text;
    t.control = control;
    t.rect = box_of(ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    const ImDrawList* dl = ImGui::GetWindowDrawList();
    t.visible_x0 = dl->GetClipRectMin().x;
    t.visible_x1 = dl->GetClipRectMax().x;
    if (const ImGuiTable* table = ImGui::GetCurrentTable()) {
        t.table = table->ID;
        t.column = table->CurrentColumn;
        t.header = (table->RowFlags & ImGuiTableRowFlags_Headers) != 0;
    }
    return t;
}

}  // namespace

LayoutRecord* layout_record() {
    const UiContext* ui = ui_context();
    return ui != nullptr ? ui->layout : nullptr;
}

void set_layout_record(LayoutRecord* record) {
    ui_context_to_set().layout = record;
}

ProbeScope::ProbeScope(const std::string& where) {
    if (LayoutRecord* r = layout_record()) {
        previous_ = r->scope;
        r->scope = where;
    }
}

ProbeScope::~ProbeScope() {
    if (LayoutRecord* r = layout_record()) r->scope = previous_;
}

std::vector<std::pair<std::size_t, std::size_t>> wrap_lines(const std::string& text, float width) {
    std::vector<std::pair<std::size_t, std::size_t>> lines;
    std::size_t para = 0;
    while (para <= text.size()) {
        std::size_t nl = text.find('\n', para);
        if (nl == std::string::npos) nl = text.size();
        std::size_t begin = para, end = para;  // the line so far
        bool empty = true;
        for (auto [a, b] : pieces_of(text, para, nl)) {
            if (!empty && width_of(text, begin, b) <= width) {
                end = b;
                continue;
            }
            if (!empty) lines.emplace_back(begin, end);
            // A piece wider than a whole line is cut where it must be (a break the
            // layout check names), at least one character a line.
            while (width_of(text, a, b) > width) {
                std::size_t cut = a;
                for (std::size_t i = a + 1; i < b; ++i) {
                    if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;
                    if (width_of(text, a, i) > width) break;
                    cut = i;
                }
                if (cut == a) {
                    cut = a + 1;
                    while (cut < b && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) ++cut;
                }
                lines.emplace_back(a, cut);
                a = cut;
            }
            begin = a, end = b, empty = false;
        }
        lines.emplace_back(begin, empty ? para : end);
        para = nl + 1;
    }
    return lines;
}

void probe_text(const std::string& text, float wrap_width,
                const std::vector<std::pair<std::size_t, std::size_t>>& lines) {
    LayoutRecord* r = layout_record();
    if (r == nullptr || text.empty()) return;
    LayoutText t = item_record(*r, text, false);
    if (wrap_width > 0) {
        t.wrap_width = wrap_width;
        for (auto [a, b] : lines) t.line_ends.push_back(b);
        for (auto [a, b] : pieces_of(text, 0, text.size())) {
            const float w = width_of(text, a, b);
            if (w > t.widest_word) {
                t.widest_word = w;
                t.widest_word_text = text.substr(a, b - a);
            }
        }
    } else {
        t.widest_word = ImGui::CalcTextSize(text.c_str()).x;
        t.widest_word_text = text;
        if (t.rect.x1 > t.visible_x1) t.visible_text = visible_part(text, t.rect.x0, t.visible_x1);
    }
    r->texts.push_back(std::move(t));
}

void probe_control(const std::string& label) {
    LayoutRecord* r = layout_record();
    if (r == nullptr) return;
    r->texts.push_back(item_record(*r, label, true));
}

void probe_table(const std::string& where) {
    LayoutRecord* r = layout_record();
    const ImGuiTable* table = ImGui::GetCurrentTable();
    if (r == nullptr || table == nullptr) return;
    LayoutTable tb;
    tb.where = where;
    tb.id = table->ID;
    for (int c = 0; c < table->ColumnsCount; ++c) {
        const ImGuiTableColumn& col = table->Columns[c];
        const char* name = ImGui::TableGetColumnName(c);
        tb.headers.push_back(name != nullptr ? name : "");
        tb.header_widths.push_back(name != nullptr && *name ? ImGui::CalcTextSize(name).x : 0);
        tb.widths.push_back(col.WorkMaxX - col.WorkMinX);
    }
    r->tables.push_back(std::move(tb));
}

void probe_step(const std::string& where, int step, const std::string& text) {
    if (LayoutRecord* r = layout_record()) r->steps.push_back(LayoutStep{where, step, text});
}

void probe_legend(ImU32 colour, const std::string& text) {
    if (LayoutRecord* r = layout_record())
        r->legend.push_back(LayoutLegendEntry{r->scope, colour, text});
}

ChartProbe::ChartProbe(const std::string& where, ImVec2 a, ImVec2 b, bool needs_legend) {
    on_ = layout_record() != nullptr;
    chart_.where = where;
    chart_.rect = box_of(a, b);
    chart_.needs_legend = needs_legend;
}

ChartProbe::~ChartProbe() {
    if (LayoutRecord* r = layout_record(); on_ && r != nullptr)
        r->charts.push_back(std::move(chart_));
}

void ChartProbe::label(ImDrawList* dl, ImVec2 pos, ImU32 colour, const std::string& text) {
    dl->AddText(pos, colour, text.c_str());
    if (!on_) return;
    const ImVec2 size = ImGui::CalcTextSize(text.c_str());
    chart_.labels.push_back(LayoutLabel{text, box_of(pos, ImVec2(pos.x + size.x, pos.y + size.y))});
}

void ChartProbe::line(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 colour, float thickness,
                      const std::string& what) {
    dl->AddLine(a, b, colour, thickness);
    record_line(a, b, what);
}

void ChartProbe::record_line(ImVec2 a, ImVec2 b, const std::string& what) {
    if (on_) chart_.lines.push_back(LayoutLine{what, a.x, a.y, b.x, b.y});
}

void ChartProbe::mark(ImU32 colour) {
    if (!on_) return;
    if (std::find(chart_.mark_colours.begin(), chart_.mark_colours.end(), colour) ==
        chart_.mark_colours.end())
        chart_.mark_colours.push_back(colour);
}

}  // namespace plab::viewer
