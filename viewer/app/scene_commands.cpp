// The `plab` command behind each scene (see scene_commands.h).
#include "app/scene_commands.h"

#include <sstream>

#include "runtime/scheduler.h"

namespace plab::viewer {
namespace {

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

// "plab SUBCOMMAND --model DIR": the start of every command that loads the model.
std::vector<std::string> model_command(const char* subcommand, const CommandInputs& in) {
    return {"plab", subcommand, "--model", in.model_dir};
}

// The FlashAttention panel on a model head: `plab flash --model` with the prompt, the
// head, the plan the engine ran, the tile asked for (none: the kernel's own) and the mask.
std::vector<std::string> flash_head_command(const CommandInputs& in, std::string& why_not) {
    const FlashSnapshot& f = in.snap.flash;
    std::vector<std::string> w = model_command("flash", in);
    if (!add_prompt(w, in.state, f.tokens, why_not)) return {};
    w.insert(w.end(), {"--layer", std::to_string(f.head.layer), "--head",
                       std::to_string(f.head.head), "--chunks", f.plan.to_string()});
    if (f.tile > 0) w.insert(w.end(), {"--tile", std::to_string(f.tile)});
    if (f.mask != "causal") w.insert(w.end(), {"--mask", f.mask});
    w.push_back("--json");
    return w;
}

}  // namespace

// The toy panel: `plab toy` with its values, queries, keys and chunk plan.
std::vector<std::string> toy_command(const CommandInputs& in, std::string&) {
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
std::vector<std::string> serving_command(const CommandInputs& in, std::string&) {
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

// The FlashAttention panel: `plab flash` with the toy, the tile width and the mask it
// walked (every step's m, l, rescale and acc in its --json); on a model head, the head's.
std::vector<std::string> flash_command(const CommandInputs& in, std::string& why_not) {
    const FlashSnapshot& f = in.snap.flash;
    if (f.model_head) return flash_head_command(in, why_not);
    std::vector<std::string> w = {"plab",   "flash",
                                  "--tile", std::to_string(f.tile),
                                  "--q",    join_floats(f.input.queries),
                                  "--k",    join_floats(f.input.keys),
                                  "--v",    join_floats(f.input.values)};
    if (f.mask != "causal") w.insert(w.end(), {"--mask", f.mask});
    w.push_back("--json");
    return w;
}

}  // namespace plab::viewer
