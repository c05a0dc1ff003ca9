// `plab generate`: a whole request — prefill, first token, decode — with its
// TTFT next to its prefill time. Lesson: lessons/05-ttft-is-not-prefill.md.
#include <cstdio>
#include <memory>

#include "cli/common.h"
#include "core/error.h"
#include "runtime/generate.h"
#include "runtime/registry.h"

namespace plab::cli {
namespace {

struct GenerateCliOptions {
    PromptOptions prompt;
    std::string model;
    std::string backend = "cpu";
    GenerateOptions gen;
    std::string trace;
    std::string mask = "causal";
    bool no_stop = false;
    bool json = false;
};

void run(GenerateCliOptions o) {
    const Model model = load_model_arg(o.model);
    const std::vector<int32_t> tokens = o.prompt.resolve(model);
    o.gen.stop_at_eos = !o.no_stop;
    o.gen.session.mask = resolve_mask(o.mask, tokens, model);
    auto backend = make_backend(o.backend);
    const DeviceModel dm(*backend, model.weights);
    Trace trace;
    const GenerateResult r = generate(dm, *model.tokenizer, "", tokens, o.gen, trace);
    if (!o.trace.empty()) trace.write_chrome_json(o.trace);
    double decode_total = 0;
    for (double s : r.decode_step_us) decode_total += s;
    const double decode_tps =
        r.decode_step_us.empty() ? 0 : r.decode_step_us.size() / (decode_total * 1e-6);
    if (o.json) {
        nlohmann::json j;
        j["backend"] = backend->name();
        j["mask"] = o.mask;
        j["prompt_tokens"] = r.prompt_tokens;
        j["new_tokens"] = r.new_tokens;
        j["text"] = r.text;
        j["ttft_ms"] = r.ttft_us / 1000;
        j["prefill_ms"] = r.prefill_us / 1000;
        j["decode_tokens_per_s"] = decode_tps;
        print_json(j);
        return;
    }
    std::printf("%s%s\n\n", model.tokenizer->decode(r.prompt_tokens).c_str(), r.text.c_str());
    std::printf("backend %s, %zu prompt tokens, %zu new tokens (chunk plan %s)\n",
                backend->name().c_str(), r.prompt_tokens.size(), r.new_tokens.size(),
                o.gen.chunks.c_str());
    std::printf(
        "prefill %.3f ms, time to first token %.3f ms (TTFT also counts tokenize, copies,\n"
        "sampling and delivery), decode %.1f tokens/s\n",
        r.prefill_us / 1000, r.ttft_us / 1000, decode_tps);
    if (!o.trace.empty()) std::printf("Trace written to %s (open in Perfetto)\n", o.trace.c_str());
}

}  // namespace

void add_generate_command(CLI::App& app) {
    auto o = std::make_shared<GenerateCliOptions>();
    CLI::App* cmd = app.add_subcommand("generate", "prefill a prompt, then decode new tokens");
    o->prompt.add_to(cmd);
    add_model_option(cmd, o->model);
    cmd->add_option("--backend", o->backend, "cpu-ref, cpu, ...")->capture_default_str();
    cmd->add_option("--chunks", o->gen.chunks, "chunk plan of the prefill")->capture_default_str();
    cmd->add_option("-n,--max-new-tokens", o->gen.max_new_tokens, "tokens to generate")
        ->capture_default_str();
    cmd->add_option("--temperature", o->gen.sampler.temperature, "0 = greedy")
        ->capture_default_str();
    cmd->add_option("--top-k", o->gen.sampler.top_k, "keep the k most likely tokens (0 = all)")
        ->capture_default_str();
    cmd->add_option("--top-p", o->gen.sampler.top_p, "keep the smallest set with this probability")
        ->capture_default_str();
    cmd->add_option("--seed", o->gen.sampler.seed, "sampling seed")->capture_default_str();
    cmd->add_option("--block-size", o->gen.session.block_size, "KV cache block size")
        ->capture_default_str();
    add_mask_option(cmd, o->mask);
    cmd->add_flag("--no-stop", o->no_stop, "do not stop at EOS");
    cmd->add_option("--trace", o->trace, "write a Chrome trace (JSON) of the request here");
    cmd->add_flag("--json", o->json, "machine-readable output");
    cmd->callback([o] { run(*o); });
}

}  // namespace plab::cli
