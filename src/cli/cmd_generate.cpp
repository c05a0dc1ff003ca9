// `plab generate`: a whole request — prefill, first token, decode — with its
// TTFT next to its prefill time. Lesson: lessons/05-ttft-is-not-prefill.md.
//
// With --prompts FILE, many requests served together by one Engine
// (runtime/engine.h): one shared KV block pool, steps over many sequences, a
// prefix cache. Each request's own latency figures are printed, with how many
// of its prompt tokens were found cached. Lesson: lessons/07-reusing-a-prefix.md.
//
// Both paths take the backend and the device model from an Engine; the single
// prompt then runs runtime/generate.h's generate(), whose trace spans (queue,
// tokenize, copy in, prefill, sample, deliver) lesson 5 reads.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>

#include "cli/common.h"
#include "cli/prompts_file.h"
#include "core/error.h"
#include "core/kernel_choice.h"
#include "core/sha256.h"
#include "runtime/cost_model.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/request.h"

namespace plab::cli {
namespace {

struct GenerateCliOptions {
    PromptOptions prompt;
    std::string prompts;  // --prompts FILE: many requests through one engine
    std::string model;
    std::string backend = "cpu";
    std::string kernels = "invariant";  // core/kernel_choice.h
    GenerateOptions gen;
    std::string trace;
    std::string mask = "causal";
    std::string prefix_cache = "on";
    int kv_blocks = 0;
    bool no_stop = false;
    bool no_kv_cache = false;
    bool logits_digest = false;
    int token_budget = 0;
    int repeats = 3;  // warm runs of a single prompt after the first, cold one
    bool json = false;
    // Given on the command line? (to refuse an option where it does not apply)
    CLI::Option* prompts_opt = nullptr;
    CLI::Option* chunks_opt = nullptr;
    CLI::Option* kv_blocks_opt = nullptr;
    CLI::Option* prefix_cache_opt = nullptr;
    CLI::Option* repeats_opt = nullptr;
    CLI::Option* no_kv_cache_opt = nullptr;
    CLI::Option* logits_digest_opt = nullptr;
    CLI::Option* token_budget_opt = nullptr;
};

// A request's logits digest: SHA-256 of every logits row it sampled from, in
// order, each float as IEEE 754 binary32 little-endian bytes. Equal digests:
// the same bits in every row (same request, same bits).
std::string logits_sha256(const Request& r) {
    Sha256 h;
    for (const std::vector<float>& row : r.logits) {
        for (float v : row) {
            std::uint32_t u = 0;
            std::memcpy(&u, &v, sizeof u);
            const std::uint8_t b[4] = {std::uint8_t(u), std::uint8_t(u >> 8), std::uint8_t(u >> 16),
                                       std::uint8_t(u >> 24)};
            h.update(b, 4);
        }
    }
    return h.hex();
}

// Generated text on one line of the report: a byte-level model may emit
// newlines and control bytes, which would break the layout; they are shown
// escaped (\n, \t, \xNN). JSON output carries the text unchanged.
std::string one_line(const std::string& s) {
    std::string out;
    for (unsigned char ch : s) {
        if (ch == '\n') {
            out += "\\n";
        } else if (ch == '\t') {
            out += "\\t";
        } else if (ch == '\\' || ch == '"') {
            out += '\\';
            out += static_cast<char>(ch);
        } else if (ch < 0x20 || ch == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", ch);
            out += buf;
        } else {
            out += static_cast<char>(ch);
        }
    }
    return out;
}

void run_one(GenerateCliOptions o) {
    PLAB_CHECK(o.logits_digest_opt->count() == 0 && o.token_budget_opt->count() == 0,
               "--logits-digest and --token-budget are for requests served together through the "
               "engine: give --prompts FILE (a file of one line serves one prompt)");
    PLAB_CHECK(o.kv_blocks_opt->count() == 0 && o.prefix_cache_opt->count() == 0,
               "--kv-blocks and --prefix-cache set up the engine's shared pool for --prompts "
               "FILE; a single prompt runs in a session of its own (put it in a prompts file of "
               "one line to serve it through the engine)");
    const Model model = load_model_or_default(o.model);
    const std::vector<int32_t> tokens = o.prompt.resolve(model);
    o.gen.stop_at_eos = !o.no_stop;
    o.gen.session.mask = resolve_mask(o.mask, tokens, model);
    // The model loaded once on the backend (runtime/loaded_model.h); every run
    // below is a session on it with a KV cache of its own.
    PLAB_CHECK(o.repeats >= 1 && o.repeats <= 1000,
               "--repeats " << o.repeats << " must be between 1 and 1000 (warm runs to time)");
    const LoadedModel loaded(model.weights, o.backend, parse_kernels(o.kernels));
    o.gen.kv_cache = !o.no_kv_cache;
    // The first run is cold (caches, allocator and thread pool not yet warm);
    // the times reported are the medians of the warm runs after it, and the
    // cold one is printed apart: two measurement conditions, never averaged.
    // Every run is the same request on a fresh KV cache, with the same tokens.
    Trace cold_trace;
    const GenerateResult cold =
        generate(loaded.device(), *model.tokenizer, "", tokens, o.gen, cold_trace);
    std::vector<double> ttft_us, prefill_us, decode_tps;
    std::vector<std::vector<double>> step_us(cold.decode_step_us.size());  // per step, per run
    Trace trace;  // the last warm run's, for --trace
    GenerateResult r;
    for (int i = 0; i < o.repeats; ++i) {
        trace = Trace();
        r = generate(loaded.device(), *model.tokenizer, "", tokens, o.gen, trace);
        PLAB_ASSERT(r.new_tokens == cold.new_tokens);  // same request, same seed
        double decode_total = 0;
        for (double s : r.decode_step_us) decode_total += s;
        for (std::size_t k = 0; k < r.decode_step_us.size(); ++k)
            step_us[k].push_back(r.decode_step_us[k]);
        ttft_us.push_back(r.ttft_us);
        prefill_us.push_back(r.prefill_us);
        decode_tps.push_back(
            r.decode_step_us.empty() ? 0 : double(r.decode_step_us.size()) / (decode_total * 1e-6));
    }
    if (!o.trace.empty()) trace.write_chrome_json(o.trace);
    if (r.stopped_at_context_end) {
        // On stderr: the output (text or --json) is what was generated; this
        // says why it is shorter than asked, without changing it.
        std::fprintf(stderr,
                     "plab: note: stopped after %zu new tokens of the %d asked: the sequence "
                     "reached the model's max_seq_len of %d positions (%zu prompt tokens)\n",
                     r.new_tokens.size(), o.gen.max_new_tokens, model.weights.config.max_seq_len,
                     r.prompt_tokens.size());
    }
    // Each run's TTFT contains its prefill, so the medians keep that order too.
    const double ttft_ms = percentile(ttft_us, 0.5) / 1000;
    const double prefill_ms = percentile(prefill_us, 0.5) / 1000;
    const double decode_tps_median = percentile(decode_tps, 0.5);
    const std::string backend = loaded.backend().name();
    // What each decode step computed: one position with the KV cache, the
    // whole sequence without it (runtime/cost_model.h counts the FLOPs).
    const ModelConfig& c = model.weights.config;
    const int prompt_len = static_cast<int>(r.prompt_tokens.size());
    std::vector<double> step_ms, step_flops;
    long long positions_computed = 0;
    for (std::size_t k = 0; k < step_us.size(); ++k) {
        const int computed = r.decode_step_positions[k];
        const int before = prompt_len + static_cast<int>(k) + 1 - computed;  // cached positions
        step_ms.push_back(percentile(step_us[k], 0.5) / 1000);
        step_flops.push_back(prefill_cost(c, computed, before).total());
        positions_computed += computed;
    }
    if (o.json) {
        nlohmann::json j;
        j["backend"] = backend;
        j["kernels"] = o.kernels;
        j["mask"] = o.mask;
        j["prompt_tokens"] = r.prompt_tokens;
        j["new_tokens"] = r.new_tokens;
        j["text"] = r.text;
        j["ttft_ms"] = ttft_ms;  // medians of the warm runs
        j["prefill_ms"] = prefill_ms;
        j["decode_tokens_per_s"] = decode_tps_median;
        j["warm_runs"] = o.repeats;
        j["cold_ttft_ms"] = cold.ttft_us / 1000;  // the first run, apart
        j["cold_prefill_ms"] = cold.prefill_us / 1000;
        j["kv_cache"] = o.gen.kv_cache;
        j["decode_step_positions"] = r.decode_step_positions;  // computed by each step
        j["decode_step_flops"] = step_flops;
        j["decode_step_ms"] = step_ms;  // medians of the warm runs, step by step
        print_json(j);
        return;
    }
    std::printf("%s%s\n\n", model.tokenizer->decode(r.prompt_tokens).c_str(), r.text.c_str());
    std::printf("backend %s, %zu prompt tokens, %zu new tokens (chunk plan %s%s)\n",
                backend.c_str(), r.prompt_tokens.size(), r.new_tokens.size(), o.gen.chunks.c_str(),
                o.gen.kv_cache ? "" : ", no KV cache");
    std::printf(
        "prefill %.3f ms, time to first token %.3f ms (TTFT also counts tokenize, copies,\n"
        "sampling and delivery), decode %.1f tokens/s\n",
        prefill_ms, ttft_ms, decode_tps_median);
    std::printf(
        "  (medians of %d warm runs, each on a fresh KV cache; the first, cold run: prefill "
        "%.3f ms, TTFT %.3f ms)\n",
        o.repeats, cold.prefill_us / 1000, cold.ttft_us / 1000);
    if (!o.gen.kv_cache && !step_ms.empty()) {
        // The cost of forgetting K/V: step k recomputes all prompt_len + k
        // positions (attention pairs grow with the square of that), where the
        // cache would compute one.
        const std::size_t last = step_ms.size() - 1;
        std::printf(
            "no KV cache: each decode step recomputed the whole sequence, %d to %d positions "
            "(%lld in all; with the cache: %zu, one a step)\n",
            r.decode_step_positions.front(), r.decode_step_positions.back(), positions_computed,
            step_ms.size());
        std::printf("  first decode step %.3f ms, %.3f MFLOP; last %.3f ms, %.3f MFLOP\n",
                    step_ms.front(), step_flops.front() / 1e6, step_ms[last],
                    step_flops[last] / 1e6);
        std::printf("  with the cache those steps would be %.3f and %.3f MFLOP\n",
                    prefill_cost(c, 1, prompt_len).total() / 1e6,
                    prefill_cost(c, 1, prompt_len + static_cast<int>(last)).total() / 1e6);
    }
    if (!o.trace.empty())
        std::printf("Trace written to %s (the last warm run; open in Perfetto)\n", o.trace.c_str());
}

// A latency figure, or JSON null where there is nothing to measure (the gaps
// between tokens of a request that made one token): a 0 would pull averages down.
nlohmann::json ms_or_null(double ms, bool measured) {
    return measured ? nlohmann::json(ms) : nlohmann::json(nullptr);
}

void run_many(const GenerateCliOptions& o) {
    // 1. What does not apply to many requests, refused before any work.
    PLAB_CHECK(!o.prompt.given(),
               "--prompts FILE gives every prompt; drop the prompt text, --prompt-file or "
               "--tokens (or drop --prompts to run that one prompt)");
    PLAB_CHECK(o.no_kv_cache_opt->count() == 0,
               "--no-kv-cache recomputes one prompt's sequence at every decode step; the engine "
               "behind --prompts always keeps K/V in its paged cache (drop --prompts to run one "
               "prompt without a cache)");
    PLAB_CHECK(o.repeats_opt->count() == 0,
               "--repeats times one prompt's warm runs; with --prompts each request runs once, "
               "timed on the engine's clock");
    PLAB_CHECK(o.chunks_opt->count() == 0,
               "--chunks is the chunk plan of a single prompt; with --prompts the engine cuts "
               "prompts into chunks by its step budget (--token-budget, default "
                   << EngineOptions{}.max_step_tokens << " tokens per step)");
    PLAB_CHECK(o.prefix_cache == "on" || o.prefix_cache == "off",
               "--prefix-cache '" << o.prefix_cache << "': give on or off");
    PLAB_CHECK(o.kv_blocks_opt->count() == 0 || o.kv_blocks >= 1,
               "--kv-blocks " << o.kv_blocks
                              << ": the pool needs at least one block; leave the option out for "
                                 "the engine's default (4 full-length sequences)");
    const Model model = load_model_or_default(o.model);
    const Tokenizer& tok = *model.tokenizer;
    const ModelConfig& c = model.weights.config;
    const std::vector<PromptLine> lines =
        parse_prompts(read_text_file(o.prompts, "prompts file"), o.prompts);

    // 2. Tokenize every prompt as the single-prompt path does (BOS first unless --no-bos).
    std::vector<std::vector<int32_t>> prompts;
    for (const PromptLine& l : lines) {
        std::vector<int32_t> ids = tok.encode(l.text, !o.prompt.no_bos);
        PLAB_CHECK(!ids.empty(), o.prompts << " line " << l.line << ": the prompt encodes to no "
                                           << "token; give text (or drop --no-bos)");
        PLAB_CHECK(static_cast<int>(ids.size()) <= c.max_seq_len,
                   o.prompts << " line " << l.line << ": prompt of " << ids.size()
                             << " tokens is longer than the model's max_seq_len " << c.max_seq_len
                             << "; shorten it");
        prompts.push_back(std::move(ids));
    }
    // The prefix cache shares a block only where its K/V depend on nothing but
    // the tokens before it: the causal mask. The mask is one spec for all.
    const BoundMask mask = resolve_mask(o.mask, prompts.front(), model);
    PLAB_CHECK(mask.is_causal(), "--mask " << o.mask
                                           << ": --prompts serves causal requests only (the "
                                              "prefix cache shares K/V computed under the causal "
                                              "mask); give --mask causal, or run one prompt "
                                              "(text, --prompt-file or --tokens) with this mask");

    // 3. One engine; every request arrives before the first step.
    EngineOptions eo;
    eo.backend = o.backend;
    eo.kernels = parse_kernels(o.kernels);
    eo.block_size = o.gen.session.block_size;
    eo.kv_blocks = o.kv_blocks;
    eo.prefix_cache = o.prefix_cache == "on";
    if (o.token_budget_opt->count() > 0) {
        PLAB_CHECK(o.token_budget >= 1,
                   "--token-budget " << o.token_budget << " must be at least 1 token a step");
        eo.max_step_tokens = o.token_budget;
    }
    Trace trace;
    Engine engine(model.weights, eo, o.trace.empty() ? nullptr : &trace);
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        RequestOptions ro;
        ro.max_new_tokens = lines[i].max_new_tokens.value_or(o.gen.max_new_tokens);
        ro.eos_id = o.no_stop ? -1 : tok.eos_id();
        // The same sampler options, seed included, for every request: each
        // samples what it would alone (so two equal lines answer alike).
        ro.sampler = o.gen.sampler;
        ro.keep_logits = o.logits_digest;
        try {
            engine.add_request(prompts[i], ro);
        } catch (const Error& e) {
            // The engine counts requests from 0; the user knows the file's lines.
            throw Error(o.prompts + " line " + std::to_string(lines[i].line) + ": " + e.what());
        }
    }
    engine.run();
    if (!o.trace.empty()) trace.write_chrome_json(o.trace);

    // 4. Report: per request, then the steps and the pool.
    int prefill_tokens = 0, decode_tokens = 0;
    for (const StepRecord& s : engine.steps()) {
        prefill_tokens += s.prefill_tokens;
        decode_tokens += s.decode_tokens;
    }
    const PoolStats pool = engine.pool_stats();
    const std::string clock =
        "each request's clock starts at its arrival at the engine (all were added at once, "
        "before the first step) and stops when a token is sampled";
    if (o.json) {
        nlohmann::json j;
        j["backend"] = engine.backend().name();
        j["kernels"] = kernels_name(eo.kernels);
        j["prefix_cache"] = eo.prefix_cache;
        j["clock"] = clock;
        j["steps"] = engine.steps().size();
        j["prefill_tokens"] = prefill_tokens;
        j["decode_tokens"] = decode_tokens;
        j["requests"] = nlohmann::json::array();
        for (int id = 0; id < engine.num_requests(); ++id) {
            const Request& r = engine.request(id);
            const RequestLatency l = latency_of(r);
            const bool gaps = r.token_us.size() >= 2;
            const std::vector<int32_t> made(r.new_tokens().begin(), r.new_tokens().end());
            j["requests"].push_back({{"id", r.id},
                                     {"line", lines[static_cast<std::size_t>(id)].line},
                                     {"prompt_tokens", r.prompt.size()},
                                     {"prompt_ids", r.prompt},
                                     {"cached_tokens", r.cached_tokens},
                                     {"computed_tokens", r.computed_tokens},
                                     {"new_tokens", made},
                                     {"text", tok.decode(made)},
                                     {"finish_reason", r.finish_reason},
                                     {"preemptions", r.preemptions},
                                     {"ttft_ms", l.ttft_ms},
                                     {"itl_ms",
                                      {{"mean", ms_or_null(l.itl_mean_ms, gaps)},
                                       {"p90", ms_or_null(l.itl_p90_ms, gaps)}}},
                                     {"tpot_ms", ms_or_null(l.tpot_ms, gaps)},
                                     {"e2e_ms", l.e2e_ms}});
            if (o.logits_digest) j["requests"].back()["logits_sha256"] = logits_sha256(r);
        }
        j["pool"] = {
            {"blocks", pool.num_blocks},           {"block_size", pool.block_size},
            {"blocks_in_use", pool.blocks_in_use}, {"cached_free_blocks", pool.cached_free_blocks},
            {"free_blocks", pool.free_blocks},     {"hit_blocks", pool.hit_blocks},
            {"miss_blocks", pool.miss_blocks},     {"evictions", pool.evictions},
            {"preemptions", pool.preemptions}};
        print_json(j);
        return;
    }
    std::printf(
        "backend %s, %d requests from %s, prefix cache %s: %zu steps, %d prefill tokens "
        "and %d decode tokens computed\n",
        engine.backend().name().c_str(), engine.num_requests(), o.prompts.c_str(),
        o.prefix_cache.c_str(), engine.steps().size(), prefill_tokens, decode_tokens);
    std::printf("Times in ms: %s.\n", clock.c_str());
    for (int id = 0; id < engine.num_requests(); ++id) {
        const Request& r = engine.request(id);
        const RequestLatency l = latency_of(r);
        const std::vector<int32_t> made(r.new_tokens().begin(), r.new_tokens().end());
        std::printf(
            "\nrequest %d (line %d): %zu prompt tokens, %d cached (%s), %zu new tokens "
            "(%s), %d preemptions\n",
            r.id, lines[static_cast<std::size_t>(id)].line, r.prompt.size(), r.cached_tokens,
            r.cached_tokens > 0 ? "warm: prefix hit" : "cold", made.size(), r.finish_reason.c_str(),
            r.preemptions);
        if (made.size() >= 2) {
            std::printf(
                "  TTFT %.3f ms, inter-token latency mean %.3f ms p90 %.3f ms, TPOT %.3f "
                "ms, end-to-end %.3f ms\n",
                l.ttft_ms, l.itl_mean_ms, l.itl_p90_ms, l.tpot_ms, l.e2e_ms);
        } else {
            std::printf("  TTFT %.3f ms (one new token: no inter-token gap), end-to-end %.3f ms\n",
                        l.ttft_ms, l.e2e_ms);
        }
        std::printf("  output: \"%s\"\n", one_line(tok.decode(made)).c_str());
        if (o.logits_digest)
            std::printf("  logits sha256 %s (every row it sampled from)\n",
                        logits_sha256(r).c_str());
    }
    std::printf(
        "\npool: %d blocks of %d positions, %d in use, %d cached free; prefix cache %lld "
        "block hits, %lld misses; %lld evictions, %lld preemptions\n",
        pool.num_blocks, pool.block_size, pool.blocks_in_use, pool.cached_free_blocks,
        pool.hit_blocks, pool.miss_blocks, pool.evictions, pool.preemptions);
    std::printf(
        "A warm request (prefix hit) and a cold one are two measurement conditions: "
        "compare times within one, never average them together.\n");
    if (!o.trace.empty()) std::printf("Trace written to %s (open in Perfetto)\n", o.trace.c_str());
}

}  // namespace

void add_generate_command(CLI::App& app) {
    auto o = std::make_shared<GenerateCliOptions>();
    CLI::App* cmd = app.add_subcommand("generate", "prefill a prompt, then decode new tokens");
    o->prompt.add_to(cmd);
    o->prompts_opt =
        cmd->add_option("--prompts", o->prompts,
                        "serve many prompts together through one engine: a file of one prompt per "
                        "line, or JSON Lines {\"prompt\": \"...\", \"max_new_tokens\": 8}; blank "
                        "lines are skipped");
    add_model_option(cmd, o->model);
    cmd->add_option("--backend", o->backend, "cpu-ref, cpu, ...")->capture_default_str();
    cmd->add_option("--kernels", o->kernels,
                    "invariant (a request's bits whatever its step) or fastest (cpu: the "
                    "library's kernel for each product's shape; lesson 16)")
        ->capture_default_str();
    o->chunks_opt = cmd->add_option("--chunks", o->gen.chunks, "chunk plan of the prefill")
                        ->capture_default_str();
    cmd->add_option("-n,--max-new-tokens", o->gen.max_new_tokens,
                    "tokens to generate (with --prompts: for lines that do not say)")
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
    o->prefix_cache_opt =
        cmd->add_option("--prefix-cache", o->prefix_cache,
                        "with --prompts: share the KV blocks of a common prompt prefix (on|off)")
            ->capture_default_str();
    o->kv_blocks_opt = cmd->add_option(
        "--kv-blocks", o->kv_blocks,
        "with --prompts: blocks in the shared KV pool (default: 4 full-length sequences)");
    add_mask_option(cmd, o->mask);
    cmd->add_flag("--no-stop", o->no_stop, "do not stop at EOS");
    o->logits_digest_opt = cmd->add_flag(
        "--logits-digest", o->logits_digest,
        "with --prompts: print each request's SHA-256 of every logits row it sampled from");
    o->token_budget_opt = cmd->add_option(
        "--token-budget", o->token_budget,
        "with --prompts: tokens per engine step (prompts are cut into chunks to fit)");
    o->no_kv_cache_opt = cmd->add_flag(
        "--no-kv-cache", o->no_kv_cache,
        "keep no K/V between steps: every decode step recomputes the whole sequence (same tokens, "
        "growing cost; lesson 2)");
    o->repeats_opt =
        cmd->add_option("--repeats", o->repeats,
                        "a single prompt: warm runs timed after the first, cold one (medians "
                        "reported)")
            ->capture_default_str();
    cmd->add_option("--trace", o->trace, "write a Chrome trace (JSON) of the request here");
    cmd->add_flag("--json", o->json, "machine-readable output");
    cmd->callback([o] {
        if (o->prompts_opt->count() > 0) {
            run_many(*o);
        } else {
            run_one(*o);
        }
    });
}

}  // namespace plab::cli
