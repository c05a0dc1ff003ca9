// Panel 3, shared pool view: one KV block pool serving four requests, step by step.
//
// What it teaches (lesson 2's KV cache, grown into a serving engine; the
// "Reusing a prefix" lesson): every request takes its blocks from one pool.
// Three prompts start alike, so their first full blocks are computed once and
// shared (reference count > 1, vLLM's automatic prefix caching). A block whose
// last reference goes keeps its K/V and its name: it is *cached free*, and a
// later request with the same prefix takes it back. The pool is small on
// purpose: a running request is preempted (its blocks go back, it is computed
// again later: vLLM's recompute policy) and cached blocks are evicted (reused
// for new content). Everything drawn is the engine's report after each step
// (serving_scenario.h); nothing is scheduled or computed here.
#include <imgui.h>

#include <algorithm>
#include <string>
#include <vector>

#include "panels/layout_probe.h"
#include "panels/panels.h"
#include "panels/ui_colours.h"
#include "panels/ui_format.h"
#include "panels/ui_playback.h"
#include "panels/ui_scale.h"
#include "panels/ui_widgets.h"

namespace plab::viewer {
namespace {

std::string ids_text(const std::vector<int>& ids) {
    std::string s;
    for (std::size_t i = 0; i < ids.size(); ++i)
        s += (i == 0 ? "" : i + 1 == ids.size() ? " and " : ", ") + std::to_string(ids[i]);
    return s;
}

const char* state_text(RequestState s) {
    return s == RequestState::waiting ? "waiting" : s == RequestState::running ? "running" : "done";
}

// Positions lb·B .. lb·B+B-1 of request `id`, as text: "'ce upon a'".
std::string block_tokens(const ServingSnapshot& sv, int id, int lb, int end) {
    const std::vector<std::string>& text = sv.requests[static_cast<std::size_t>(id)].token_text;
    std::string s;
    for (int p = lb * sv.block_size; p < std::min(end, static_cast<int>(text.size())); ++p)
        s += token_label(text[static_cast<std::size_t>(p)]);
    return "'" + s + "'";
}

// What one block holds and why, in words (the block's tooltip).
std::string block_tip(const ServingSnapshot& sv, const ServingStage& st, int b) {
    const PoolBlock& blk = st.blocks[static_cast<std::size_t>(b)];
    const int B = sv.block_size;
    std::string tip = "physical block " + std::to_string(b) + ", reference count " +
                      std::to_string(blk.ref_count) + (blk.named ? ", named" : ", no name");
    const int lb = blk.content_logical;
    const int a = lb * B;
    if (blk.state == PoolBlockState::kInUse) {
        const ServingRequestState& r0 = st.requests[static_cast<std::size_t>(blk.owners.front())];
        const int end = std::min(a + B, r0.length);
        tip += "\nholds positions " + std::to_string(a) + ".." + std::to_string(end - 1) + " " +
               block_tokens(sv, blk.owners.front(), lb, end) + " of request" +
               (blk.owners.size() > 1 ? "s " : " ") + ids_text(blk.owners) +
               " (their logical block " + std::to_string(lb) + ")";
        if (blk.owners.size() > 1)
            tip +=
                "\nShared: their prompts start with the same tokens, so these K/V were "
                "computed once and found again through the prefix cache (a block is named by "
                "a hash of its tokens and of the blocks before it). One block, " +
                std::to_string(blk.ref_count) + " block-table entries.";
        else if (end - a < B)
            tip += "\npartly filled: the request's next positions go here";
    } else if (blk.state == PoolBlockState::kCachedFree) {
        tip += "\nCached free: no request holds it, but it keeps the K/V of positions " +
               std::to_string(a) + ".." + std::to_string(a + B - 1) + " " +
               block_tokens(sv, blk.content.front(), lb, a + B) + " of request " +
               ids_text(blk.content) +
               ". A new request whose prompt starts with these tokens takes it back without "
               "computing them (a prefix hit). When a fresh block is needed and no never-named "
               "block is left, the least recently freed cached block is evicted.";
    } else {
        tip += blk.content.empty()
                   ? "\nFree: never used."
                   : "\nFree, without a name: it held positions from " + std::to_string(a) +
                         " of request " + ids_text(blk.content) +
                         ", but only full blocks are named, so nothing can find it again.";
    }
    if (blk.evicted) {
        const int old_a = blk.evicted_logical * B;
        tip += "\nEvicted in this step: it was a cached block";
        if (!blk.evicted_content.empty())
            tip += " (positions " + std::to_string(old_a) + ".." + std::to_string(old_a + B - 1) +
                   " " +
                   block_tokens(sv, blk.evicted_content.front(), blk.evicted_logical, old_a + B) +
                   " of request " + ids_text(blk.evicted_content) + ")";
        tip +=
            "; the pool had no never-named free block left, so the least recently freed "
            "cached block lost its name and took new positions. A later request with its "
            "old prefix misses.";
    } else if (blk.hit)
        tip += "\nTaken back in this step by a prefix hit: its positions were not computed again.";
    else if (blk.written)
        tip += "\nWritten in this step.";
    return tip;
}

ImU32 block_fill(const PoolBlock& blk) {
    if (blk.state == PoolBlockState::kCachedFree) return colour::kCachedFree;
    if (blk.state == PoolBlockState::kFree) return colour::kPending;
    if (blk.owners.size() > 1) return colour::kShared;
    return request_colour(blk.owners.front());
}

// 1. The scenario's inputs.
void draw_inputs(const ServingSnapshot& sv, ViewerState& state) {
    const float font = ImGui::GetFontSize();
    if (ImGui::Checkbox("prefix cache", &state.serving_prefix_cache)) state.dirty.serving = true;
    probe_control("prefix cache");
    item_tooltip(
        "On: full blocks are named by a hash chain, and a request whose prompt starts like an "
        "earlier one takes those blocks instead of computing them. Off: every request computes "
        "its whole prompt into blocks of its own. The tokens come out the same either way.");
    flow(labelled_width(font * 8, "pool blocks"), font * 1.5f);
    ImGui::SetNextItemWidth(font * 8);
    int blocks = sv.ready ? sv.num_blocks : state.serving_kv_blocks;
    if (ImGui::SliderInt("pool blocks", &blocks, 1, std::max(64, 2 * blocks))) {
        state.serving_kv_blocks = blocks;
        state.dirty.serving = true;
    }
    probe_control("pool blocks");
    item_tooltip(
        "Blocks in the shared pool. The default is just too small for the four requests: "
        "watch for preemptions and evictions. A pool too small for one request is refused "
        "with a line saying how many blocks it needs.");
    flow(labelled_width(font * 5, "B"), font * 1.5f);
    ImGui::SetNextItemWidth(font * 5);
    if (ImGui::BeginCombo("B##pool", std::to_string(state.serving_block_size).c_str())) {
        for (int b : {2, 4, 8, 16})
            if (ImGui::Selectable(std::to_string(b).c_str(), b == state.serving_block_size)) {
                state.serving_block_size = b;
                state.serving_kv_blocks = 0;  // back to the default pool for this B
                state.dirty.serving = true;
            }
        ImGui::EndCombo();
    }
    probe_control("B");
    item_tooltip(
        "Positions per block. Only full blocks are shared, so a smaller B shares more of a "
        "common prefix; a larger one needs fewer blocks.");
    flow(labelled_width(font * 8, "step budget"), font * 1.5f);
    ImGui::SetNextItemWidth(font * 8);
    if (ImGui::SliderInt("step budget", &state.serving_step_tokens, 1, 64, "%d tokens"))
        state.dirty.serving = true;
    probe_control("step budget");
    item_tooltip(
        "Tokens one engine step may run (vLLM's max_num_batched_tokens): decode tokens of "
        "running requests first, then prefill chunks of waiting ones.");
}

// 2. What the step in view did, and the pool's counters after it.
void draw_step_summary(const ServingStage& st, int k) {
    if (k == 0) {
        wrapped_with_tip("before step 1: four requests wait, the pool is empty",
                         "Press the right arrow (or move the step slider) to run one engine step.");
        probe_step("step summary", 0, "before step 1");
    } else {
        std::string ran;
        for (const ServingSpan& s : st.spans)
            ran += (ran.empty() ? "" : "; ") + std::string("request ") + std::to_string(s.request) +
                   (s.decode      ? " decode"
                    : s.recompute ? " recompute"
                                  : " prefill") +
                   " " + std::to_string(s.first_pos) +
                   (s.n_pos > 1 ? ".." + std::to_string(s.first_pos + s.n_pos - 1) : "");
        const std::string head = "step " + std::to_string(k) + " ran: ";
        wrapped_with_tip(head + ran,
                         "The requests of this engine step and the positions each computed, all "
                         "in one forward pass (the weights are read once for all of them). "
                         "Decode: one new token; prefill: a chunk of known tokens; recompute: "
                         "tokens a preempted request had computed before.");
        probe_step("step summary", k, head);
    }
    const PoolStats& p = st.pool;
    const float font = ImGui::GetFontSize();
    text_with_tip(
        "in use " + std::to_string(p.blocks_in_use) + ", cached free " +
            std::to_string(p.cached_free_blocks) + ", free " +
            std::to_string(p.free_blocks - p.cached_free_blocks) + " of " +
            std::to_string(p.num_blocks),
        "In use: held by at least one request. Cached free: held by none, K/V and name kept "
        "for a later prefix hit. Free: nothing anyone can find. Engine::pool_stats() after the "
        "step.");
    const std::string hits = "prefix hits " + std::to_string(p.hit_blocks) + " blocks, misses " +
                             std::to_string(p.miss_blocks);
    flow(text_width(hits), font * 1.5f);
    text_with_tip(hits,
                  "Full prompt blocks found in the prefix cache at admission (hits: not "
                  "computed) and not found (misses), over all requests so far.");
    const std::string evictions =
        "evictions " + std::to_string(p.evictions) + " (+" + std::to_string(st.evictions) + ")";
    flow(text_width(evictions), font * 1.5f);
    line_text(evictions, st.evictions > 0 ? colour::kBad : colour::kHatch);
    item_tooltip(
        "Cached free blocks taken for new content, so far (and in this step: the pool "
        "counter's difference). Each costs a possible future prefix hit.");
    const std::string preemptions =
        "preemptions " + std::to_string(p.preemptions) +
        (st.record.preempted.empty() ? "" : " (request " + ids_text(st.record.preempted) + " now)");
    flow(text_width(preemptions), font * 1.5f);
    line_text(preemptions, !st.record.preempted.empty() ? colour::kBad : colour::kHatch);
    item_tooltip(
        "A running request the pool could not grow was preempted: its blocks went back (named "
        "ones stay cached) and it waits to be computed again from its tokens (vLLM's recompute "
        "policy). The newest running request goes first.");
}

// 3. One row per request: its state and its block table.
void draw_requests(const ServingSnapshot& sv, const ServingStage& st, float cell) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float font = ImGui::GetFontSize();
    // Three aligned columns (name, state, block table) when they fit, else each row flows.
    auto name_of = [&](std::size_t id) {
        return "request " + std::to_string(id) + " (" + sv.requests[id].label + ")";
    };
    auto state_of = [&](const ServingRequestState& r) {
        return std::string(state_text(r.state)) + ", " + std::to_string(r.length) + "/" +
               std::to_string(r.n_tokens) + " positions";
    };
    float name_w = 0, state_w = 0;
    for (std::size_t id = 0; id < st.requests.size(); ++id) {
        name_w = std::max(name_w, text_width(name_of(id)));
        state_w = std::max(state_w, text_width(state_of(st.requests[id])));
    }
    const float x0 = ImGui::GetCursorPosX();
    const float col1 = cell * 0.8f + ImGui::GetStyle().ItemSpacing.x + name_w + font * 1.5f;
    const float col2 = col1 + state_w + font * 1.5f;
    const bool aligned =
        col2 + text_width("table:") + 6 * (cell * 1.5f + 2) <= ImGui::GetContentRegionAvail().x;
    for (std::size_t id = 0; id < st.requests.size(); ++id) {
        ImGui::PushID(static_cast<int>(id));
        const ServingRequestState& r = st.requests[id];
        const ServingRequestInfo& info = sv.requests[id];
        const ImVec2 p = ImGui::GetCursorScreenPos();
        dl->AddRectFilled(p, ImVec2(p.x + cell * 0.8f, p.y + cell * 0.8f),
                          request_colour(static_cast<int>(id)));
        ImGui::Dummy(ImVec2(cell * 0.8f, cell * 0.8f));
        ImGui::SameLine();
        text_with_tip(name_of(id), std::to_string(info.n_prompt) + " prompt tokens; " +
                                       std::to_string(info.shared_prefix) +
                                       " of them in common with another request. Output: " +
                                       token_label(info.output_text));
        const std::string state = state_of(r);
        if (aligned)
            ImGui::SameLine(x0 + col1);
        else
            flow(text_width(state), font);
        text_with_tip(state,
                      "Its state after this step, and positions in its KV blocks out of the "
                      "tokens it knows (prompt + new tokens so far). Waiting after a preemption: "
                      "0 positions, all to be computed again.");
        if (aligned)
            ImGui::SameLine(x0 + col2);
        else
            flow(text_width("table:"), font);
        text_with_tip("table:",
                      "Its block table: logical block i (positions i*B..i*B+B-1) -> "
                      "physical block. Hover a cell.");
        for (std::size_t lb = 0; lb < r.block_table.size(); ++lb) {
            // A table longer than the line goes on under its start.
            if (!flow(cell * 1.5f, 2) && aligned) ImGui::SetCursorPosX(x0 + col2);
            const int b = r.block_table[lb];
            const ImVec2 a = ImGui::GetCursorScreenPos();
            const PoolBlock& blk = st.blocks[static_cast<std::size_t>(b)];
            dl->AddRectFilled(a, ImVec2(a.x + cell * 1.5f, a.y + cell * 0.9f), block_fill(blk));
            const std::string label = std::to_string(b);
            dl->AddText(ImVec2(a.x + 2, a.y), IM_COL32(15, 15, 20, 255), label.c_str());
            ImGui::PushID(static_cast<int>(lb));
            ImGui::InvisibleButton("entry", ImVec2(cell * 1.5f, cell * 0.9f));
            probe_control("block table entry " + label);
            item_tooltip("logical block " + std::to_string(lb) + " -> physical block " +
                         std::to_string(b) + "\n" + block_tip(sv, st, b));
            ImGui::PopID();
        }
        if (r.block_table.empty()) {
            flow(text_width("(no blocks)"));
            line_text("(no blocks)", dim_colour());
        }
        if (info.record.cached_tokens > 0) {
            const std::string hit = "hit " + std::to_string(info.record.cached_tokens);
            flow(text_width(hit), font);
            text_with_tip(hit, "At its first admission its first " +
                                   std::to_string(info.record.cached_tokens) +
                                   " prompt tokens were in the prefix cache: not computed.");
        }
        ImGui::PopID();
    }
}

// 4. The pool: one cell per physical block.
void draw_pool(const ServingSnapshot& sv, const ServingStage& st) {
    const float font = ImGui::GetFontSize();
    const int n = sv.num_blocks;
    const float avail = ImGui::GetContentRegionAvail().x;
    const float cell = std::clamp(avail / 24.0f - 4, font * 1.6f, font * 2.6f);
    const int per_row = std::max(1, static_cast<int>(avail / (cell + px(4))));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 o = ImGui::GetCursorScreenPos();
    for (int b = 0; b < n; ++b) {
        const PoolBlock& blk = st.blocks[static_cast<std::size_t>(b)];
        const ImVec2 a(o.x + (b % per_row) * (cell + px(4)), o.y + (b / per_row) * (cell + px(4)));
        const ImVec2 z(a.x + cell, a.y + cell);
        dl->AddRectFilled(a, z, block_fill(blk));
        if (blk.state == PoolBlockState::kCachedFree)
            draw_hatch(dl, a, z, IM_COL32(110, 170, 180, 255), 6);
        // Owners of a shared block: a strip of their colours along the bottom.
        if (blk.owners.size() > 1) {
            const float w = cell / static_cast<float>(blk.owners.size());
            for (std::size_t i = 0; i < blk.owners.size(); ++i)
                dl->AddRectFilled(ImVec2(a.x + i * w, z.y - cell * 0.22f),
                                  ImVec2(a.x + (i + 1) * w, z.y), request_colour(blk.owners[i]));
        }
        const std::string id = std::to_string(b);
        dl->AddText(ImVec2(a.x + 3, a.y + 1), IM_COL32(240, 240, 240, 255), id.c_str());
        if (blk.ref_count > 1) {
            const std::string refs = "x" + std::to_string(blk.ref_count);
            dl->AddText(ImVec2(a.x + 3, a.y + font), IM_COL32(20, 20, 20, 255), refs.c_str());
        }
        if (blk.evicted) {
            dl->AddRect(a, z, colour::kBad, 0, 0, px(3.0f));
            dl->AddLine(a, z, colour::kBad, px(2.0f));
            dl->AddLine(ImVec2(z.x, a.y), ImVec2(a.x, z.y), colour::kBad, px(2.0f));
        } else if (blk.hit) {
            dl->AddRect(a, z, IM_COL32_WHITE, 0, 0, px(3.0f));
        } else if (blk.written) {
            dl->AddRect(a, z, colour::kChunk, 0, 0, px(2.0f));
        }
        ImGui::SetCursorScreenPos(a);
        ImGui::PushID(b);
        ImGui::InvisibleButton("block", ImVec2(cell, cell));
        item_tooltip(block_tip(sv, st, b));
        ImGui::PopID();
    }
    const int rows = (n + per_row - 1) / per_row;
    ImGui::SetCursorScreenPos(ImVec2(o.x, o.y + rows * (cell + px(4)) + 4));
    ImGui::Dummy(ImVec2(1, 1));
}

void draw_legend() {
    legend_entry(request_colour(0), 0, "one request's",
                 "Held by one request (its colour, as in the rows above).");
    legend_entry(colour::kShared, 0, "shared prefix block",
                 "Reference count > 1: requests whose prompts share this prefix all point at it. "
                 "Computed once, read by each (the strip shows whose).");
    legend_entry(colour::kCachedFree, 0, "cached free",
                 "No request holds it; its K/V and name are kept for a later prefix hit, until it "
                 "is evicted (least recently freed first).",
                 true);
    legend_entry(colour::kPending, 0, "free", "No request holds it and no name: nothing to find.");
    legend_entry(colour::kPending, colour::kChunk, "written", "K/V appended into it in this step.");
    legend_entry(colour::kPending, colour::kBad, "evicted",
                 "A cached block given new content in this step.");
    legend_entry(colour::kPending, IM_COL32_WHITE, "hit",
                 "A cached block taken back in this step.");
}

// 5. The pool after every step: a stacked bar per step (click one to go there).
void draw_history(const ServingSnapshot& sv, int current, ViewerState& state) {
    wrapped_with_tip(
        "the pool after each step",
        "Per engine step, from the bottom: shared blocks, blocks held by one request, cached "
        "free blocks, free blocks. A red mark on top: a preemption in that step. Click a bar "
        "to look at that step.");
    const float font = ImGui::GetFontSize();
    const int n = static_cast<int>(sv.stages.size());
    const float bar_w =
        std::clamp((ImGui::GetContentRegionAvail().x - font) / std::max(1, n), px(4.0f), font * 2);
    const float h = font * 4;
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (int k = 0; k < n; ++k) {
        const ServingStage& st = sv.stages[static_cast<std::size_t>(k)];
        int shared = 0, single = 0, cached = 0;
        for (const PoolBlock& b : st.blocks) {
            shared += b.owners.size() > 1 ? 1 : 0;
            single += b.owners.size() == 1 ? 1 : 0;
            cached += b.state == PoolBlockState::kCachedFree ? 1 : 0;
        }
        const float x = p0.x + k * bar_w;
        float y = p0.y + h;
        auto part = [&](int count, ImU32 c) {
            const float ph = h * static_cast<float>(count) / static_cast<float>(sv.num_blocks);
            dl->AddRectFilled(ImVec2(x, y - ph), ImVec2(x + bar_w - 1, y), c);
            y -= ph;
        };
        part(shared, colour::kShared);
        part(single, IM_COL32(120, 130, 160, 255));
        part(cached, colour::kCachedFree);
        part(sv.num_blocks - shared - single - cached, colour::kPending);
        if (!st.record.preempted.empty())
            dl->AddRectFilled(ImVec2(x, p0.y - 4), ImVec2(x + bar_w - 1, p0.y), colour::kBad);
        if (k == current)
            dl->AddRect(ImVec2(x - 1, p0.y - 5), ImVec2(x + bar_w, p0.y + h + 1), IM_COL32_WHITE, 0,
                        0, px(2.0f));
        ImGui::SetCursorScreenPos(ImVec2(x, p0.y));
        ImGui::PushID(k);
        if (ImGui::InvisibleButton("bar", ImVec2(bar_w - 1, h))) {
            state.stage = k;
            state.layer = 0;
            state.playing = false;
        }
        item_tooltip((k == 0 ? std::string("before step 1") : "after step " + std::to_string(k)) +
                     ": " + std::to_string(shared) + " shared, " + std::to_string(single) +
                     " held by one request, " + std::to_string(cached) + " cached free, " +
                     std::to_string(sv.num_blocks - shared - single - cached) + " free; " +
                     std::to_string(st.evictions) + " evicted" +
                     (st.record.preempted.empty()
                          ? ""
                          : "; request " + ids_text(st.record.preempted) + " preempted"));
        ImGui::PopID();
    }
    ImGui::SetCursorScreenPos(ImVec2(p0.x, p0.y + h + 4));
    ImGui::Dummy(ImVec2(1, 1));
}

}  // namespace

void draw_kv_pool(const Snapshot& snap, ViewerState& state) {
    const ServingSnapshot& sv = snap.serving;
    wrapped_text("Shared KV pool: four requests, one engine, one pool of blocks");
    help_marker(
        "Lesson 2 - the KV cache (lessons/02-prefill-and-the-kv-cache.md), served to many "
        "requests, and the lesson 'Reusing a prefix'.\n\nAn Engine takes every request's KV "
        "blocks from one pool. Three requests continue the prompt in the bar; one has a prompt "
        "of its own (see the rows). Full blocks of a prompt get a name (a hash of their tokens and "
        "the blocks before them), so a later request that starts alike shares them: reference "
        "count > 1. The pool is small on purpose: watch a preemption (a request gives its "
        "blocks back and is computed again later) and evictions (cached blocks reused). Right "
        "arrow: one engine step. Hover any block or number.");
    hint_text(
        "Try: press Home, then step with the right arrow; turn the prefix cache off and compare "
        "the blocks in use.");
    const ProbeScope scope("kv pool");
    draw_inputs(sv, state);
    if (!sv.error.empty()) {
        wrapped_text(sv.error, colour::kBad);
        return;
    }
    if (!sv.ready || sv.stages.empty()) return;

    const StepView step = step_view(snap, state);
    const int k = step.stages_done;
    ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x * 0.5f);
    int shown = k;
    // Steps are counted from 1, as the step counter above counts them: "after step 11" is
    // the picture when the counter says 11 steps are done.
    const std::string where =
        k == 0 ? "before step 1"
               : "after step " + std::to_string(k) + " of " + std::to_string(sv.n_steps());
    if (ImGui::SliderInt("engine step", &shown, 0, sv.n_steps(), where.c_str())) {
        state.stage = shown;
        state.layer = 0;
        state.playing = false;
    }
    probe_control("engine step");
    probe_step("engine step slider", k, where);
    item_tooltip(
        "Steps of the engine, counted from 1: 'after step 3' shows the pool when three steps "
        "have run (the step counter above says 3); each step runs one forward pass over the "
        "requests it scheduled.");
    const ServingStage& st = sv.stages[static_cast<std::size_t>(k)];
    draw_step_summary(st, k);
    ImGui::Separator();
    draw_requests(sv, st, ImGui::GetFontSize() * 1.2f);
    ImGui::Separator();
    wrapped_with_tip("the pool: " + std::to_string(sv.num_blocks) +
                         " blocks of B=" + std::to_string(sv.block_size) +
                         " positions (every layer has one such pool; "
                         "a block id is the same in all)",
                     "Each cell is one physical block: its id, its reference count when shared "
                     "(x3), and a colour for who holds it.");
    draw_pool(sv, st);
    draw_legend();
    ImGui::Separator();
    draw_history(sv, k, state);
}

}  // namespace plab::viewer
