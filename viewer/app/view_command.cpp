// The `plab` command behind each panel (see view_command.h).
#include "app/view_command.h"

#include <cstdio>
#include <sstream>

namespace plab::viewer {
namespace {

// Characters a shell gives no meaning to in a word (no glob, no expansion, no split).
bool shell_safe(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.' || c == '/' || c == ':' || c == ',' || c == '=' || c == '+' ||
           c == '@' || c == '%';
}

std::string join_ints(const std::vector<int32_t>& ids) {
    std::string s;
    for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
    return s;
}

std::string join_floats(const std::vector<float>& v) {
    std::ostringstream s;
    s.precision(9);  // float round-trips through 9 significant digits
    for (std::size_t i = 0; i < v.size(); ++i) s << (i ? "," : "") << v[i];
    return s.str();
}

// The prompt as the CLI takes it: the text, or, when the viewer cut or repeated the
// tokenized prompt (--prompt-tokens), the token ids it ran (the BOS id among them).
// The ids are state.prompt_ids (main keeps them current), else the Mask panel's.
bool add_prompt(std::vector<std::string>& w, const ViewerState& state,
                const std::vector<int32_t>& tokens, std::string& why_not) {
    if (state.prompt_tokens == 0) {
        w.insert(w.end(), {"--prompt", state.prompt});
        return true;
    }
    const std::vector<int32_t>& ids = state.prompt_ids.empty() ? tokens : state.prompt_ids;
    if (ids.empty()) {
        why_not = "no plab command: the prompt was cut to " + std::to_string(state.prompt_tokens) +
                  " tokens and their ids are not known yet";
        return false;
    }
    w.insert(w.end(), {"--tokens", join_ints(ids)});
    return true;
}

// What every scene's command is built from.
struct CommandInputs {
    const ViewerState& state;
    const Snapshot& snap;
    const std::string& model_dir;  // the directory the viewer loaded
    // The prompt's ids as the mask panel encoded them, for the panels that run the same prompt.
    const std::vector<int32_t>& prompt_ids;
};

// "plab SUBCOMMAND --model DIR": the start of every command that loads the model.
std::vector<std::string> model_command(const char* subcommand, const CommandInputs& in) {
    return {"plab", subcommand, "--model", in.model_dir};
}

// Whether the shown scene has an engine answer to reproduce (its inputs did not fail).
bool scene_has_result(Scene scene, const Snapshot& snap) {
    switch (scene) {
        case Scene::kToy:
            return snap.toy.ready;
        case Scene::kMask:
            return snap.mask.ready;
        case Scene::kKv:
            return snap.kv.ready;
        case Scene::kEquivalence:
            return snap.equivalence.ready;
        case Scene::kTimeline:
            return snap.timeline.ready;
        case Scene::kServing:
            return snap.replay.ready;
    }
    return false;
}

// The toy panel: `plab toy` with its values, queries, keys and chunk plan.
std::vector<std::string> toy_command(const CommandInputs& in) {
    const ToySnapshot& t = in.snap.toy;
    return {"plab",      "toy",
            "--values",  join_floats(t.input.values),
            "--queries", join_floats(t.input.queries),
            "--keys",    join_floats(t.input.keys),
            "--chunks",  t.chunked.plan.to_string(),
            "--backend", t.backend,
            "--json"};
}

// The mask panel: the prefill it ran, with the attention probe of the head shown.
std::vector<std::string> mask_command(const CommandInputs& in, std::string& why_not) {
    const MaskSnapshot& m = in.snap.mask;
    std::vector<std::string> w = model_command("prefill", in);
    if (!add_prompt(w, in.state, m.tokens, why_not)) return {};
    // The plan the engine ran (a refused one was replaced: the panel says so).
    w.insert(
        w.end(),
        {"--backend", m.backend, "--chunks", m.plan.to_string(), "--mask", in.state.mask, "--top",
         std::to_string(m.top.size()), "--attention",
         std::to_string(in.state.attn_layer) + ":" + std::to_string(in.state.attn_head), "--json"});
    return w;
}

// The KV panel: the prefill chunks (the panel's decode steps follow from its first token).
std::vector<std::string> kv_command(const CommandInputs& in, std::string& why_not) {
    const KvSnapshot& k = in.snap.kv;
    std::vector<std::string> w = model_command("prefill", in);
    if (!add_prompt(w, in.state, in.prompt_ids, why_not)) return {};
    w.insert(w.end(), {"--backend", k.backend, "--chunks", k.plan.to_string(), "--mask",
                       in.state.mask, "--block-size", std::to_string(k.block_size), "--json"});
    return w;
}

// The equivalence panel: every backend on every plan it compared.
std::vector<std::string> equivalence_command(const CommandInputs& in, std::string& why_not) {
    std::string plans;
    for (const std::string& p : in.snap.equivalence.plans) plans += (plans.empty() ? "" : ";") + p;
    std::vector<std::string> w = model_command("compare", in);
    if (!add_prompt(w, in.state, in.prompt_ids, why_not)) return {};
    w.insert(w.end(), {"--backends", "all", "--plans", plans, "--json"});
    return w;
}

// The timeline panel: one request generated to its last new token.
std::vector<std::string> timeline_command(const CommandInputs& in, std::string& why_not) {
    const TimelineSnapshot& tl = in.snap.timeline;
    std::vector<std::string> w = model_command("generate", in);
    if (!add_prompt(w, in.state, in.prompt_ids, why_not)) return {};
    w.insert(w.end(),
             {"--backend", tl.backend, "--chunks", tl.plan, "--mask", tl.mask, "--max-new-tokens",
              std::to_string(in.state.new_tokens), "--no-stop", "--json"});
    return w;
}

// The Serving panel: the workload it replayed, flag for flag as `plab serve` takes it.
std::vector<std::string> serving_command(const CommandInputs& in) {
    const ReplayOptions& r = in.state.replay;
    std::vector<std::string> w = model_command("serve", in);
    std::ostringstream rate, delay;
    rate << r.rate;
    delay << r.network_delay_ms;
    w.insert(w.end(), {"--backend",
                       r.backend,
                       "--policy",
                       policy_name(r.policy),
                       "--rate",
                       rate.str(),
                       "--requests",
                       std::to_string(r.requests),
                       "--seed",
                       std::to_string(r.seed),
                       "--token-budget",
                       std::to_string(r.token_budget),
                       "--prompt-len",
                       std::to_string(r.prompt_min) + "," + std::to_string(r.prompt_max),
                       "--new-tokens",
                       std::to_string(r.new_min) + "," + std::to_string(r.new_max),
                       "--block-size",
                       std::to_string(r.block_size),
                       "--kv-blocks",
                       std::to_string(r.kv_blocks),
                       "--network-delay-ms",
                       delay.str(),
                       "--json"});
    return w;
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
    const bool serving_view =
        state.serving_view && (state.scene == Scene::kKv || state.scene == Scene::kTimeline);
    const bool model_scene = state.scene != Scene::kToy;
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
    if (!scene_has_result(state.scene, snap)) {
        why_not = std::string("no plab command: the ") + scene_name(state.scene) +
                  " panel has no result (its inputs failed)";
        return {};
    }
    const std::vector<int32_t> no_ids;
    const CommandInputs in{state, snap, model_dir, snap.mask.ready ? snap.mask.tokens : no_ids};
    switch (state.scene) {
        case Scene::kToy:
            return toy_command(in);
        case Scene::kMask:
            return mask_command(in, why_not);
        case Scene::kKv:
            return kv_command(in, why_not);
        case Scene::kEquivalence:
            return equivalence_command(in, why_not);
        case Scene::kTimeline:
            return timeline_command(in, why_not);
        case Scene::kServing:
            return serving_command(in);
    }
    return {};
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

}  // namespace

std::string view_numbers(const ViewerState& state, const Snapshot& snap) {
    if (state.scene == Scene::kServing && snap.replay.ready)
        return serving_numbers(snap.replay.report);
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
