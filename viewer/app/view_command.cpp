// The `plab` command behind each panel (see view_command.h).
#include "app/view_command.h"

#include <cstdio>

#include "app/scene_commands.h"
#include "app/scenes.h"

namespace plab::viewer {
namespace {

// Characters a shell gives no meaning to in a word (no glob, no expansion, no split).
bool shell_safe(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.' || c == '/' || c == ':' || c == ',' || c == '=' || c == '+' ||
           c == '@' || c == '%';
}

}  // namespace

std::string shell_quote(const std::string& word) {
    bool safe = !word.empty();
    for (char c : word) safe = safe && shell_safe(c);
    if (safe) return word;
    std::string out = "'";
    for (char c : word) {
        if (c == '\'')
            out += "'\\''";  // close the quote, an escaped quote, open again
        else
            out += c;
    }
    return out + "'";
}

std::string shell_join(const std::vector<std::string>& words) {
    std::string s;
    for (std::size_t i = 0; i < words.size(); ++i) s += (i ? " " : "") + shell_quote(words[i]);
    return s;
}

std::vector<std::string> view_command(const ViewerState& state, const Snapshot& snap,
                                      const std::string& model_dir, std::string& why_not) {
    why_not.clear();
    const SceneRow& row = scene_row(state.scene);
    const bool serving_view = state.serving_view && row.serving_part != nullptr;
    const bool model_scene = row.loads_model;
    if (model_scene && snap.random_model) {
        why_not = "no plab command: the viewer runs random weights (" + snap.model_source +
                  "); plab needs a model directory (train one: assets/recipe, or --model)";
        return {};
    }
    if (serving_view) {
        // Four requests through one engine: the viewer's own scenario (serving_scenario.h),
        // which `plab serve` does not generate; the nearest command is the Serving panel's.
        why_not =
            "no plab command for the four-request scenario (viewer/app/serving_scenario.h builds "
            "it); the Serving panel's workload has one: plab serve";
        return {};
    }
    if (!row.has_result(snap)) {
        why_not = std::string("no plab command: the ") + scene_name(state.scene) +
                  " panel has no result (its inputs failed)";
        return {};
    }
    const std::vector<int32_t> no_ids;
    const CommandInputs in{state, snap, model_dir, snap.mask.ready ? snap.mask.tokens : no_ids};
    return row.command(in, why_not);
}

namespace {

// The serving scene's workload and result: the same seed must give the same
// prompts, steps and latencies as native `plab serve`, on every C++ library.
std::string serving_numbers(const ServeReport& r) {
    int preemptions = 0;
    for (const ServedRequest& q : r.requests) preemptions += q.preemptions;
    std::string s = "serving: " + std::to_string(r.steps.size()) + " steps, " +
                    std::to_string(preemptions) + " preemptions; prompt tokens ";
    auto join = [&](auto field, bool hex) {
        for (std::size_t i = 0; i < r.requests.size(); ++i) {
            char buf[64];
            if (hex)
                std::snprintf(buf, sizeof buf, "%a", static_cast<double>(field(r.requests[i])));
            else
                std::snprintf(buf, sizeof buf, "%d", static_cast<int>(field(r.requests[i])));
            s += (i > 0 ? "," : "") + std::string(buf);
        }
    };
    join([](const ServedRequest& q) { return q.prompt_tokens; }, false);
    s += "; arrival_s ";
    join([](const ServedRequest& q) { return q.arrival_s; }, true);
    s += "; ttft_ms ";
    join([](const ServedRequest& q) { return q.ttft_client_ms; }, true);
    return s;
}

// The flash scene's walk: its steps, rescales and skipped tiles, and each query's output
// and whole softmax (hex floats: their exact bits), as `plab flash --json` reports them.
std::string flash_numbers(const FlashWalk& w) {
    std::string s = "flash: " + std::to_string(w.steps.size()) + " steps, " +
                    std::to_string(w.rescales) + " rescales, " + std::to_string(w.skipped) +
                    " skipped";
    for (const auto& [label, values] : {std::pair{"; output ", &w.output}, {"; full ", &w.full}}) {
        s += label;
        for (std::size_t i = 0; i < values->size(); ++i) {
            char buf[64];
            std::snprintf(buf, sizeof buf, "%s%a", i > 0 ? "," : "",
                          static_cast<double>((*values)[i]));
            s += buf;
        }
    }
    return s;
}

}  // namespace

std::string view_numbers(const ViewerState& state, const Snapshot& snap) {
    if (state.scene == Scene::kServing && snap.replay.ready)
        return serving_numbers(snap.replay.report);
    if (state.scene == Scene::kFlash && snap.flash.ready) return flash_numbers(snap.flash.walk);
    if (state.scene != Scene::kMask || !snap.mask.ready) return "";
    std::string s = "first token " + std::to_string(snap.mask.first_token_id) + ", top";
    for (const TokenProb& p : snap.mask.top) {
        char buf[64];
        std::snprintf(buf, sizeof buf, " %d:%a", p.token, static_cast<double>(p.prob));
        s += buf;
    }
    return s;
}

}  // namespace plab::viewer
