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
#include <optional>

#include "cli/common.h"
#include "cli/generate_speculative.h"
#include "cli/prompts_file.h"
#include "core/error.h"
#include "core/kernel_choice.h"
#include "core/sha256.h"
#include "runtime/cost_model.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/request.h"
#include "serving/presets.h"

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
    int speculate = 0;                          // --speculate K (runtime/speculative.h)
    std::string draft;                          // --draft SOURCE
    std::string hardware, shape = "llama3-8b";  // --hardware CARD --shape SHAPE (the roofline)
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
    CLI::Option* speculate_opt = nullptr;
    CLI::Option* draft_opt = nullptr;
    CLI::Option* hardware_opt = nullptr;
    CLI::Option* shape_opt = nullptr;
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

// ---- One prompt: timed runs of runtime/generate.h's generate() ----
//
// No tokens stream while they are made: the text is printed once every run
// is done, so a run's timing never includes writing to the terminal.

// Everything `plab generate` shows for one prompt, text or JSON.
struct GenerateOneResult {
    std::string backend;  // as the loaded backend names itself
    std::string kernels;  // --kernels
    std::string mask;     // --mask
    std::string chunks;   // the prefill's chunk plan
    bool kv_cache = true;
    int warm_runs = 0;
    std::string prompt_text;  // the prompt tokens decoded
    GenerateResult last;      // the last warm run: tokens, text, steps (every run makes the same)
    // Medians of the warm runs; each run's TTFT contains its prefill, so the
    // medians keep that order too.
    double ttft_ms = 0, prefill_ms = 0, decode_tokens_per_s = 0;
    double cold_ttft_ms = 0, cold_prefill_ms = 0;  // the first, cold run, apart
    std::vector<double> step_ms;                   // each decode step's median over the warm runs
    std::vector<double> step_flops;                // what each step computed (runtime/cost_model.h)
    long long positions_computed = 0;
    // What the first and last decode steps would cost with the cache (one position each).
    double cached_first_step_flops = 0, cached_last_step_flops = 0;
    std::string trace;  // where the last warm run's trace went ("" for none)
    std::optional<SpeculativeReport> speculative;  // with --speculate
};

// The runs of one request: a cold first run, then the warm runs that are timed.
struct GenerateRuns {
    GenerateResult cold;
    GenerateResult last;                                  // the last warm run
    std::vector<double> ttft_us, prefill_us, decode_tps;  // one per warm run
    std::vector<std::vector<double>> step_us;             // per decode step, per warm run
    Trace trace;                                          // the last warm run's
};

void check_generate_one_options(const GenerateCliOptions& o) {
    PLAB_CHECK(o.logits_digest_opt->count() == 0 && o.token_budget_opt->count() == 0,
               "--logits-digest and --token-budget are for requests served together through the "
               "engine: give --prompts FILE (a file of one line serves one prompt)");
    PLAB_CHECK(o.kv_blocks_opt->count() == 0 && o.prefix_cache_opt->count() == 0,
               "--kv-blocks and --prefix-cache set up the engine's shared pool for --prompts "
               "FILE; a single prompt runs in a session of its own (put it in a prompts file of "
               "one line to serve it through the engine)");
}

// The first run is cold (caches, allocator and thread pool not yet warm);
// the times reported are the medians of the warm runs after it, and the
// cold one is reported apart: two measurement conditions, never averaged.
// Every run is the same request on a fresh KV cache, with the same tokens.
GenerateRuns time_generate_runs(const LoadedModel& loaded, const Tokenizer& tok,
                                const std::vector<int32_t>& tokens, const GenerateOptions& gen,
                                int repeats) {
    GenerateRuns runs;
    Trace cold_trace;
    runs.cold = generate(loaded.device(), tok, "", tokens, gen, cold_trace);
    runs.step_us.resize(runs.cold.decode_step_us.size());
    for (int i = 0; i < repeats; ++i) {
        runs.trace = Trace();
        const GenerateResult r = generate(loaded.device(), tok, "", tokens, gen, runs.trace);
        PLAB_ASSERT(r.new_tokens == runs.cold.new_tokens);  // same request, same seed
        double decode_total = 0;
        for (double s : r.decode_step_us) decode_total += s;
        for (std::size_t k = 0; k < r.decode_step_us.size(); ++k)
            runs.step_us[k].push_back(r.decode_step_us[k]);
        runs.ttft_us.push_back(r.ttft_us);
        runs.prefill_us.push_back(r.prefill_us);
        // Tokens after the first per second of decode steps (a verify step of
        // speculative decoding makes several).
        runs.decode_tps.push_back(
            r.decode_step_us.empty() ? 0 : double(r.new_tokens.size() - 1) / (decode_total * 1e-6));
        runs.last = r;
    }
    return runs;
}

// What each decode step computed: one position with the KV cache, the whole
// sequence without it (runtime/cost_model.h counts the FLOPs).
void add_generate_step_costs(const ModelConfig& c, const GenerateRuns& runs,
                             GenerateOneResult& res) {
    const GenerateResult& r = runs.last;
    const int prompt_len = static_cast<int>(r.prompt_tokens.size());
    int fed = prompt_len;  // the position of the token step k feeds
    for (std::size_t k = 0; k < runs.step_us.size(); ++k) {
        const int computed = r.decode_step_positions[k];
        // Cached positions: all before the fed token (none without a cache).
        const int before = r.speculative.k > 0 ? fed : fed + 1 - computed;
        fed += r.speculative.k > 0 ? r.speculative.accepted_per_step[k] + 1 : 1;
        res.step_ms.push_back(percentile(runs.step_us[k], 0.5) / 1000);
        res.step_flops.push_back(prefill_cost(c, computed, before).total());
        res.positions_computed += computed;
    }
    if (res.step_ms.empty()) return;
    const int last = static_cast<int>(res.step_ms.size()) - 1;
    res.cached_first_step_flops = prefill_cost(c, 1, prompt_len).total();
    res.cached_last_step_flops = prefill_cost(c, 1, prompt_len + last).total();
}

GenerateOneResult compute_generate_one(const GenerateCliOptions& o) {
    check_generate_one_options(o);
    const Model model = load_model_or_default(o.model);
    const std::vector<int32_t> tokens = o.prompt.resolve(model);
    GenerateOptions gen = o.gen;
    gen.stop_at_eos = !o.no_stop;
    gen.session.mask = resolve_mask(o.mask, tokens, model);
    // The model loaded once on the backend (runtime/loaded_model.h); every run
    // is a session on it with a KV cache of its own.
    PLAB_CHECK(o.repeats >= 1 && o.repeats <= 1000,
               "--repeats " << o.repeats << " must be between 1 and 1000 (warm runs to time)");
    const LoadedModel loaded(model.weights, o.backend, parse_kernels(o.kernels));
    gen.kv_cache = !o.no_kv_cache;
    // --speculate: the draft (prompt lookup, or a model loaded on the same
    // backend), and plain decoding of the same prompt in the same run.
    LoadedDraft draft;
    PLAB_CHECK(
        (o.hardware_opt->count() == 0 && o.shape_opt->count() == 0) || o.speculate_opt->count() > 0,
        "--hardware and --shape draw speculative decoding's speed-up on the roofline "
        "clock: give --speculate K --draft SOURCE too (plab serve takes them for serving)");
    PLAB_CHECK(o.shape_opt->count() == 0 || o.hardware_opt->count() > 0,
               "--shape " << o.shape << " is charged on a card: give --hardware CARD too");
    gen.speculative =
        speculative_options(o.speculate_opt->count() > 0, o.speculate, o.draft_opt->count() > 0,
                            o.draft, o.backend, parse_kernels(o.kernels), draft);
    const GenerateRuns runs = time_generate_runs(loaded, *model.tokenizer, tokens, gen, o.repeats);
    const GenerateResult& r = runs.last;
    if (!o.trace.empty()) runs.trace.write_chrome_json(o.trace);
    if (r.stopped_at_context_end) {
        // On stderr: the output (text or --json) is what was generated; this
        // says why it is shorter than asked, without changing it.
        std::fprintf(stderr,
                     "plab: note: stopped after %zu new tokens of the %d asked: the sequence "
                     "reached the model's max_seq_len of %d positions (%zu prompt tokens)\n",
                     r.new_tokens.size(), gen.max_new_tokens, model.weights.config.max_seq_len,
                     r.prompt_tokens.size());
    }
    GenerateOneResult res;
    res.backend = loaded.backend().name();
    res.kernels = o.kernels;
    res.mask = o.mask;
    res.chunks = gen.chunks;
    res.kv_cache = gen.kv_cache;
    res.warm_runs = o.repeats;
    res.prompt_text = model.tokenizer->decode(r.prompt_tokens);
    res.last = r;
    res.ttft_ms = percentile(runs.ttft_us, 0.5) / 1000;
    res.prefill_ms = percentile(runs.prefill_us, 0.5) / 1000;
    res.decode_tokens_per_s = percentile(runs.decode_tps, 0.5);
    res.cold_ttft_ms = runs.cold.ttft_us / 1000;
    res.cold_prefill_ms = runs.cold.prefill_us / 1000;
    add_generate_step_costs(model.weights.config, runs, res);
    res.trace = o.trace;
    if (gen.speculative.k > 0) {
        GenerateOptions plain = gen;
        plain.speculative = {};
        const GenerateRuns plain_runs =
            time_generate_runs(loaded, *model.tokenizer, tokens, plain, o.repeats);
        SpeculativeReport s;
        s.stats = r.speculative;
        s.greedy = gen.sampler.temperature == 0.0f;
        s.fastest_kernels = o.kernels == "fastest";
        s.plain_tokens = plain_runs.last.new_tokens;
        s.same_tokens_as_plain = s.plain_tokens == r.new_tokens;
        s.decode_tokens_per_s = res.decode_tokens_per_s;
        s.plain_decode_tokens_per_s = percentile(plain_runs.decode_tps, 0.5);
        if (o.hardware_opt->count() > 0) {
            RooflineCost cost;
            cost.hardware = hardware_preset(o.hardware);
            cost.shape_name = o.shape;
            cost.shape = shape_preset(o.shape).config;
            s.roofline = cost.describe();
            // A draft decode step reads the draft's weights where the target's
            // reads the target's: their ratio (prompt lookup reads none).
            s.draft_ratio = draft.model ? weights_bytes(draft.model->weights.config, Dtype::fp32) /
                                              weights_bytes(model.weights.config, Dtype::fp32)
                                        : 0.0;
            s.context = static_cast<int>(r.prompt_tokens.size() + r.new_tokens.size());
            s.curve = speculative_curve(cost, s.stats.acceptance_rate(), s.draft_ratio, s.context,
                                        s.stats.k, kSpeculativeBatches);
        }
        res.speculative = s;
    }
    return res;
}

nlohmann::json generate_one_json(const GenerateOneResult& res) {
    const GenerateResult& r = res.last;
    nlohmann::json j;
    j["backend"] = res.backend;
    j["kernels"] = res.kernels;
    j["mask"] = res.mask;
    j["prompt_tokens"] = r.prompt_tokens;
    j["new_tokens"] = r.new_tokens;
    j["text"] = r.text;
    j["ttft_ms"] = res.ttft_ms;  // medians of the warm runs
    j["prefill_ms"] = res.prefill_ms;
    j["decode_tokens_per_s"] = res.decode_tokens_per_s;
    j["warm_runs"] = res.warm_runs;
    j["cold_ttft_ms"] = res.cold_ttft_ms;  // the first run, apart
    j["cold_prefill_ms"] = res.cold_prefill_ms;
    j["kv_cache"] = res.kv_cache;
    j["decode_step_positions"] = r.decode_step_positions;  // computed by each step
    j["decode_step_flops"] = res.step_flops;
    j["decode_step_ms"] = res.step_ms;  // medians of the warm runs, step by step
    if (res.speculative) j["speculative"] = speculative_json(*res.speculative);
    return j;
}

void print_generate_one_text(const GenerateOneResult& res) {
    const GenerateResult& r = res.last;
    std::printf("%s%s\n\n", res.prompt_text.c_str(), r.text.c_str());
    std::printf("backend %s, %zu prompt tokens, %zu new tokens (chunk plan %s%s)\n",
                res.backend.c_str(), r.prompt_tokens.size(), r.new_tokens.size(),
                res.chunks.c_str(), res.kv_cache ? "" : ", no KV cache");
    std::printf(
        "prefill %.3f ms, time to first token %.3f ms (TTFT also counts tokenize, copies,\n"
        "sampling and delivery), decode %.1f tokens/s\n",
        res.prefill_ms, res.ttft_ms, res.decode_tokens_per_s);
    std::printf(
        "  (medians of %d warm runs, each on a fresh KV cache; the first, cold run: prefill "
        "%.3f ms, TTFT %.3f ms)\n",
        res.warm_runs, res.cold_prefill_ms, res.cold_ttft_ms);
    if (!res.kv_cache && !res.step_ms.empty()) {
        // The cost of forgetting K/V: step k recomputes all prompt_len + k
        // positions (attention pairs grow with the square of that), where the
        // cache would compute one.
        const std::size_t last = res.step_ms.size() - 1;
        std::printf(
            "no KV cache: each decode step recomputed the whole sequence, %d to %d positions "
            "(%lld in all; with the cache: %zu, one a step)\n",
            r.decode_step_positions.front(), r.decode_step_positions.back(), res.positions_computed,
            res.step_ms.size());
        std::printf("  first decode step %.3f ms, %.3f MFLOP; last %.3f ms, %.3f MFLOP\n",
                    res.step_ms.front(), res.step_flops.front() / 1e6, res.step_ms[last],
                    res.step_flops[last] / 1e6);
        std::printf("  with the cache those steps would be %.3f and %.3f MFLOP\n",
                    res.cached_first_step_flops / 1e6, res.cached_last_step_flops / 1e6);
    }
    if (res.speculative) print_speculative_text(*res.speculative);
    if (!res.trace.empty())
        std::printf("Trace written to %s (the last warm run; open in Perfetto)\n",
                    res.trace.c_str());
}

// ---- Many prompts (--prompts FILE): one Engine serves them together ----

// One request of the prompts file, as its report shows it.
struct GenerateManyRequest {
    int id = 0;
    int line = 0;  // of the prompts file
    std::vector<int32_t> prompt;
    int cached_tokens = 0, computed_tokens = 0;
    std::vector<int32_t> new_tokens;
    std::string text;  // the new tokens decoded
    std::string finish_reason;
    int preemptions = 0;
    RequestLatency latency;
    bool gaps_measured = false;                   // two tokens or more: inter-token gaps to report
    std::string logits_sha256;                    // with --logits-digest
    std::optional<SpeculativeStats> speculative;  // with --speculate
};

// Everything `plab generate --prompts` shows, text or JSON.
struct GenerateManyResult {
    std::string backend;  // as the engine's backend names itself
    std::string kernels;
    std::string prompts_file;
    bool prefix_cache = true;
    bool logits_digest = false;
    std::size_t steps = 0;
    int prefill_tokens = 0, decode_tokens = 0;  // computed over every step
    std::vector<GenerateManyRequest> requests;
    std::optional<SpeculativeStats> speculative;  // with --speculate: every request's together
    PoolStats pool;
    std::string trace;  // where the trace went ("" for none)
};

// Where every request's clock starts and stops (both outputs say it).
constexpr const char* kGenerateManyClock =
    "each request's clock starts at its arrival at the engine (all were added at once, "
    "before the first step) and stops when a token is sampled";

// 1. What does not apply to many requests, refused before any work.
void check_generate_many_options(const GenerateCliOptions& o) {
    PLAB_CHECK(!o.prompt.given(),
               "--prompts FILE gives every prompt; drop the prompt text, --prompt-file or "
               "--tokens (or drop --prompts to run that one prompt)");
    PLAB_CHECK(o.hardware_opt->count() == 0 && o.shape_opt->count() == 0,
               "--hardware and --shape draw one prompt's speculative speed-up on the roofline "
               "clock; drop --prompts, or serve the requests on that clock with plab serve "
               "--hardware CARD --shape SHAPE --speculate K --draft SOURCE");
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
}

// 2. Tokenize every prompt as the single-prompt path does (BOS first unless --no-bos).
std::vector<std::vector<int32_t>> tokenize_generate_prompts(const GenerateCliOptions& o,
                                                            const Model& model,
                                                            const std::vector<PromptLine>& lines) {
    const ModelConfig& c = model.weights.config;
    std::vector<std::vector<int32_t>> prompts;
    for (const PromptLine& l : lines) {
        std::vector<int32_t> ids = model.tokenizer->encode(l.text, !o.prompt.no_bos);
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
    return prompts;
}

// 3. One engine; every request arrives before the first step.
EngineOptions generate_many_engine_options(const GenerateCliOptions& o) {
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
    return eo;
}

void add_generate_requests(const GenerateCliOptions& o, const Tokenizer& tok,
                           const std::vector<PromptLine>& lines,
                           const std::vector<std::vector<int32_t>>& prompts, Engine& engine) {
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
}

// 4. The report: per request, then the steps and the pool.
GenerateManyRequest generate_many_request(const Request& r, int line, const Tokenizer& tok,
                                          bool digest) {
    GenerateManyRequest q;
    q.id = r.id;
    q.line = line;
    q.prompt = r.prompt;
    q.cached_tokens = r.cached_tokens;
    q.computed_tokens = r.computed_tokens;
    q.new_tokens.assign(r.new_tokens().begin(), r.new_tokens().end());
    q.text = tok.decode(q.new_tokens);
    q.finish_reason = r.finish_reason;
    q.preemptions = r.preemptions;
    q.latency = latency_of(r);
    q.gaps_measured = r.token_us.size() >= 2;
    if (digest) q.logits_sha256 = logits_sha256(r);
    if (r.speculation.stats.k > 0) q.speculative = r.speculation.stats;
    return q;
}

GenerateManyResult compute_generate_many(const GenerateCliOptions& o) {
    check_generate_many_options(o);
    const Model model = load_model_or_default(o.model);
    const Tokenizer& tok = *model.tokenizer;
    const std::vector<PromptLine> lines =
        parse_prompts(read_text_file(o.prompts, "prompts file"), o.prompts);
    const std::vector<std::vector<int32_t>> prompts = tokenize_generate_prompts(o, model, lines);
    EngineOptions eo = generate_many_engine_options(o);
    LoadedDraft draft;
    eo.speculative =
        speculative_options(o.speculate_opt->count() > 0, o.speculate, o.draft_opt->count() > 0,
                            o.draft, o.backend, eo.kernels, draft);
    Trace trace;
    Engine engine(model.weights, eo, o.trace.empty() ? nullptr : &trace);
    add_generate_requests(o, tok, lines, prompts, engine);
    engine.run();
    if (!o.trace.empty()) trace.write_chrome_json(o.trace);

    GenerateManyResult res;
    res.backend = engine.backend().name();
    res.kernels = kernels_name(eo.kernels);
    res.prompts_file = o.prompts;
    res.prefix_cache = eo.prefix_cache;
    res.logits_digest = o.logits_digest;
    res.steps = engine.steps().size();
    for (const StepRecord& s : engine.steps()) {
        res.prefill_tokens += s.prefill_tokens;
        res.decode_tokens += s.decode_tokens;
    }
    for (int id = 0; id < engine.num_requests(); ++id) {
        res.requests.push_back(generate_many_request(
            engine.request(id), lines[static_cast<std::size_t>(id)].line, tok, o.logits_digest));
        if (!res.requests.back().speculative) continue;
        if (!res.speculative) {
            res.speculative.emplace();
            res.speculative->k = eo.speculative.k;
            res.speculative->draft = eo.speculative.draft.text;
        }
        res.speculative->merge(*res.requests.back().speculative);
    }
    res.pool = engine.pool_stats();
    res.trace = o.trace;
    return res;
}

// A latency figure, or JSON null where there is nothing to measure (the gaps
// between tokens of a request that made one token): a 0 would pull averages down.
nlohmann::json ms_or_null(double ms, bool measured) {
    return measured ? nlohmann::json(ms) : nlohmann::json(nullptr);
}

nlohmann::json generate_many_request_json(const GenerateManyRequest& q) {
    const RequestLatency& l = q.latency;
    const bool gaps = q.gaps_measured;
    nlohmann::json j = {
        {"id", q.id},
        {"line", q.line},
        {"prompt_tokens", q.prompt.size()},
        {"prompt_ids", q.prompt},
        {"cached_tokens", q.cached_tokens},
        {"computed_tokens", q.computed_tokens},
        {"new_tokens", q.new_tokens},
        {"text", q.text},
        {"finish_reason", q.finish_reason},
        {"preemptions", q.preemptions},
        {"ttft_ms", l.ttft_ms},
        {"itl_ms",
         {{"mean", ms_or_null(l.itl_mean_ms, gaps)}, {"p90", ms_or_null(l.itl_p90_ms, gaps)}}},
        {"tpot_ms", ms_or_null(l.tpot_ms, gaps)},
        {"e2e_ms", l.e2e_ms}};
    if (!q.logits_sha256.empty()) j["logits_sha256"] = q.logits_sha256;
    if (q.speculative) j["speculative"] = speculative_stats_json(*q.speculative);
    return j;
}

nlohmann::json generate_many_json(const GenerateManyResult& res) {
    nlohmann::json j;
    j["backend"] = res.backend;
    j["kernels"] = res.kernels;
    j["prefix_cache"] = res.prefix_cache;
    j["clock"] = kGenerateManyClock;
    j["steps"] = res.steps;
    j["prefill_tokens"] = res.prefill_tokens;
    j["decode_tokens"] = res.decode_tokens;
    if (res.speculative) j["speculative"] = speculative_stats_json(*res.speculative);
    j["requests"] = nlohmann::json::array();
    for (const GenerateManyRequest& q : res.requests)
        j["requests"].push_back(generate_many_request_json(q));
    const PoolStats& pool = res.pool;
    j["pool"] = {
        {"blocks", pool.num_blocks},           {"block_size", pool.block_size},
        {"blocks_in_use", pool.blocks_in_use}, {"cached_free_blocks", pool.cached_free_blocks},
        {"free_blocks", pool.free_blocks},     {"hit_blocks", pool.hit_blocks},
        {"miss_blocks", pool.miss_blocks},     {"evictions", pool.evictions},
        {"preemptions", pool.preemptions}};
    return j;
}

void print_generate_many_request(const GenerateManyRequest& q) {
    const RequestLatency& l = q.latency;
    std::printf(
        "\nrequest %d (line %d): %zu prompt tokens, %d cached (%s), %zu new tokens "
        "(%s), %d preemptions\n",
        q.id, q.line, q.prompt.size(), q.cached_tokens,
        q.cached_tokens > 0 ? "warm: prefix hit" : "cold", q.new_tokens.size(),
        q.finish_reason.c_str(), q.preemptions);
    if (q.new_tokens.size() >= 2) {
        std::printf(
            "  TTFT %.3f ms, inter-token latency mean %.3f ms p90 %.3f ms, TPOT %.3f "
            "ms, end-to-end %.3f ms\n",
            l.ttft_ms, l.itl_mean_ms, l.itl_p90_ms, l.tpot_ms, l.e2e_ms);
    } else {
        std::printf("  TTFT %.3f ms (one new token: no inter-token gap), end-to-end %.3f ms\n",
                    l.ttft_ms, l.e2e_ms);
    }
    std::printf("  output: \"%s\"\n", one_line(q.text).c_str());
    if (q.speculative)
        std::printf("  speculative: %s\n", speculative_stats_line(*q.speculative).c_str());
    if (!q.logits_sha256.empty())
        std::printf("  logits sha256 %s (every row it sampled from)\n", q.logits_sha256.c_str());
}

void print_generate_many_text(const GenerateManyResult& res) {
    std::printf(
        "backend %s, %zu requests from %s, prefix cache %s: %zu steps, %d prefill tokens "
        "and %d decode tokens computed\n",
        res.backend.c_str(), res.requests.size(), res.prompts_file.c_str(),
        res.prefix_cache ? "on" : "off", res.steps, res.prefill_tokens, res.decode_tokens);
    if (res.speculative) {
        std::printf(
            "speculative decoding, up to %d guesses a verify step, draft %s: %s\n"
            "(decode tokens computed include the guesses each verify span ran)\n",
            res.speculative->k, res.speculative->draft.c_str(),
            speculative_stats_line(*res.speculative).c_str());
        if (res.kernels == "fastest")
            std::printf(
                "(--kernels fastest: a verify span's products have K+1 rows where a decode "
                "token's have one, and the library may take another kernel for each, adding in "
                "another order; a row's last bits may differ from plain decoding's, and at a near "
                "tie a token turns. --kernels invariant keeps every row's bits: lesson 16)\n");
    }
    std::printf("Times in ms: %s.\n", kGenerateManyClock);
    for (const GenerateManyRequest& q : res.requests) print_generate_many_request(q);
    const PoolStats& pool = res.pool;
    std::printf(
        "\npool: %d blocks of %d positions, %d in use, %d cached free; prefix cache %lld "
        "block hits, %lld misses; %lld evictions, %lld preemptions\n",
        pool.num_blocks, pool.block_size, pool.blocks_in_use, pool.cached_free_blocks,
        pool.hit_blocks, pool.miss_blocks, pool.evictions, pool.preemptions);
    std::printf(
        "A warm request (prefix hit) and a cold one are two measurement conditions: "
        "compare times within one, never average them together.\n");
    if (!res.trace.empty())
        std::printf("Trace written to %s (open in Perfetto)\n", res.trace.c_str());
}

void run_generate(const GenerateCliOptions& o) {
    if (o.prompts_opt->count() > 0) {
        const GenerateManyResult r = compute_generate_many(o);
        if (o.json) {
            print_json(generate_many_json(r));
        } else {
            print_generate_many_text(r);
        }
        return;
    }
    const GenerateOneResult r = compute_generate_one(o);
    if (o.json) {
        print_json(generate_one_json(r));
    } else {
        print_generate_one_text(r);
    }
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
    o->speculate_opt = cmd->add_option(
        "--speculate", o->speculate,
        "speculative decoding: verify up to K (1-8) guesses per target forward, as one chunk "
        "(lesson 18)");
    o->draft_opt = cmd->add_option(
        "--draft", o->draft,
        "with --speculate: ngram[:N] (prompt lookup of the last N tokens, N = 3 by default) or a "
        "draft model file with the target's vocabulary");
    o->hardware_opt = cmd->add_option(
        "--hardware", o->hardware,
        "with --speculate: the speed-up over K and batch on this card's roofline clock "
        "(plab serve --list-hardware)");
    o->shape_opt = cmd->add_option("--shape", o->shape,
                                   "with --hardware: the model shape charged (plab serve "
                                   "--list-shapes)")
                       ->capture_default_str();
    cmd->add_option("--trace", o->trace, "write a Chrome trace (JSON) of the request here");
    cmd->add_flag("--json", o->json, "machine-readable output");
    cmd->callback([o] { run_generate(*o); });
}

}  // namespace plab::cli
