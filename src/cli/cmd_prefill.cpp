// `plab prefill`: one prompt, one chunk plan, one backend — and the proof that
// the plan did not matter. Lessons: 02-prefill-and-the-kv-cache.md, 03-chunked-prefill.md,
// 06-compute-vs-memory.md.
//
// The FLOP count is printed exactly (an integer, with its three terms) because
// it is deterministic and lesson 6 checks it against a hand calculation. The
// chunk lines come from the engine's own "kv append" trace events, so they show
// where each chunk's K/V really went: which positions, which physical blocks.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/common.h"
#include "core/error.h"
#include "runtime/cost_model.h"
#include "runtime/engine.h"
#include "runtime/equivalence.h"
#include "runtime/mask_grammar.h"
#include "runtime/request.h"
#include "runtime/sampler.h"
#include "trace/trace.h"

namespace plab::cli {
namespace {

struct PrefillOptions {
    PromptOptions prompt;
    std::string model;
    std::string chunks = "full";
    std::string backend = "cpu-ref";
    std::string kernels = "invariant";  // core/kernel_choice.h
    int block_size = 16;
    int top = 5;
    std::string trace;
    std::string mask = "causal";
    int repeats = 5;        // warm runs after the first, cold one
    std::string attention;  // "L:H,L:H": attention probabilities of these heads
    bool json = false;
};

// "1:2,3:0" -> the (layer, head)s to probe, each checked against the model.
std::vector<AttentionProbe> parse_probes(const std::string& text, const ModelConfig& c) {
    std::vector<AttentionProbe> probes;
    if (text.empty()) return probes;
    for (const std::string& item : split_list(text)) {
        const std::size_t colon = item.find(':');
        PLAB_CHECK(colon != std::string::npos,
                   "--attention item '" << item << "' must be LAYER:HEAD, e.g. 1:2");
        const std::vector<int> lh =
            parse_int_list(item.substr(0, colon) + "," + item.substr(colon + 1), "--attention");
        PLAB_CHECK(lh[0] >= 0 && lh[0] < c.n_layers, "--attention " << item << ": layer " << lh[0]
                                                                    << " is not in 0.."
                                                                    << c.n_layers - 1);
        PLAB_CHECK(lh[1] >= 0 && lh[1] < c.n_heads, "--attention " << item << ": head " << lh[1]
                                                                   << " is not in 0.."
                                                                   << c.n_heads - 1);
        probes.push_back({lh[0], lh[1]});
    }
    return probes;
}

// The (T, T) probabilities of one probe, gathered from its chunks' maps
// (row q: keys 0..T-1, masked and future cells 0).
std::vector<std::vector<float>> whole_map(const PrefillResult& r, const AttentionProbe& p, int t) {
    std::vector<std::vector<float>> rows(std::size_t(t), std::vector<float>(std::size_t(t), 0.0f));
    for (const AttentionMap& m : r.attention) {
        if (m.probe.layer != p.layer || m.probe.head != p.head) continue;
        for (int q = 0; q < m.n_queries; ++q)
            for (int k = 0; k < m.n_keys; ++k)
                rows[std::size_t(m.query_pos0 + q)][std::size_t(k)] =
                    m.probs[std::size_t(q) * m.n_keys + k];
    }
    return rows;
}

// Where one chunk's K/V went, as the engine's "kv append" trace event of
// layer 0 records it (every layer uses the same slots).
struct PrefillChunkSlots {
    std::string positions;  // "0-3"
    std::string blocks;     // "0" or "0,1"
};

struct PrefillTopToken {
    int32_t id = 0;
    std::string text;  // the tokenizer's text of the token
    float prob = 0;
};

// Everything `plab prefill` shows, text or JSON. (PrefillResult is the
// engine's: one prefill's logits and time.)
struct PrefillCliResult {
    // The request: model, prompt, plans, mask, backend.
    std::string model_source;
    ModelConfig config;
    std::string tokenizer;  // its kind
    std::vector<int32_t> tokens;
    ChunkPlan plan;
    ChunkPlan compared_plan;  // the whole prompt, or one token at a time when `plan` is whole
    std::string mask_spec;    // as given on the command line
    BoundMask mask;           // bound to the prompt
    std::string backend;
    bool reference_backend = false;
    std::string kernels;  // core/kernel_choice.h: invariant or fastest
    // Time: the median of the warm runs, and the first, cold one.
    double prefill_us = 0;
    double cold_prefill_us = 0;
    int warm_runs = 0;
    // Work: FLOPs and pairs under the mask, the causal pairs beside them, weight reads.
    PrefillCost cost;
    PrefillCost causal_cost;
    PrefillWeightReads reads;
    // The KV cache after the prefill, and where each chunk's K/V went.
    int kv_blocks = 0;
    int kv_block_size = 0;
    std::size_t kv_bytes = 0;
    std::size_t kv_bytes_per_token = 0;
    std::vector<PrefillChunkSlots> chunk_slots;
    // The first token and the top of the last position's distribution.
    int32_t first_token = 0;  // greedy: the argmax of the last position's logits
    std::string first_text;
    int top_n = 0;
    std::vector<PrefillTopToken> top;
    // This plan against `compared_plan` on the same backend.
    Difference equivalence;
    // --attention: each probe's (T, T) probabilities.
    std::vector<AttentionProbe> probes;
    std::vector<std::vector<std::vector<float>>> attention;
    std::string trace_path;  // empty: no trace written
};

// The request checked before any work: the prompt, its plan and the plan it
// is compared against, the mask, --top and --repeats.
PrefillCliResult prefill_request(const PrefillOptions& o, const Model& model) {
    PrefillCliResult r;
    r.tokens = o.prompt.resolve(model);
    const int t = static_cast<int>(r.tokens.size());
    r.plan = parse_chunk_plan(o.chunks, t);
    r.mask = resolve_mask(o.mask, r.tokens, model);
    check_plan_for_mask(r.mask.view(), r.plan);
    // The plan we compare against: the whole prompt at once, or, when the
    // plan *is* the whole prompt, one token at a time (as far as the mask
    // allows: a prefix-LM prefix stays in one chunk).
    r.compared_plan = r.plan.lengths.size() == 1
                          ? nearest_valid_plan(r.mask.view(), fixed_chunk_plan(t, 1))
                          : ChunkPlan{{t}};
    PLAB_CHECK(o.top >= 1, "--top " << o.top << " must be at least 1");
    PLAB_CHECK(o.repeats >= 1 && o.repeats <= 1000,
               "--repeats " << o.repeats << " must be between 1 and 1000 (warm runs to time)");
    r.model_source = model.source;
    r.config = model.weights.config;
    r.tokenizer = model.tokenizer->kind();
    r.mask_spec = o.mask;
    r.kernels = o.kernels;
    r.top_n = o.top;
    r.warm_runs = o.repeats;
    r.trace_path = o.trace;
    return r;
}

// FLOPs and attention pairs of this prompt under its mask: a window or a
// document boundary removes pairs (the causal count stays beside it). Each
// chunk reads every layer's weights again: what small chunks cost besides
// the pairs (which any plan adds up to the same).
void prefill_work(PrefillCliResult& r) {
    const int t = static_cast<int>(r.tokens.size());
    r.causal_cost = prefill_cost(r.config, t);
    r.reads = prefill_weight_reads(r.config, static_cast<int>(r.plan.lengths.size()));
    r.cost = r.mask.is_causal() ? r.causal_cost
                                : with_visible_pairs(r.causal_cost, r.config,
                                                     double(count_visible_pairs(r.mask.view(), t)));
}

// Timing: the run in compute_prefill is the first, cold one (caches, the
// allocator and the thread pool not yet warm); what a prompt's prefill costs
// is the median of warm runs, each on a fresh KV cache (a cold prompt, not a
// prefix hit). Both are shown: they are different measurement conditions.
double prefill_warm_median_us(const DeviceModel& dm, const SessionOptions& so,
                              const PrefillCliResult& r) {
    std::vector<double> warm_us;
    for (int i = 0; i < r.warm_runs; ++i) {
        Session warm(dm, so, nullptr);
        warm_us.push_back(warm.prefill(r.tokens, r.plan).prefill_us);
    }
    return percentile(warm_us, 0.5);
}

// The KV cache's use after the prefill and layer 0's "kv append" events.
void prefill_kv_use(const Session& session, const Trace& trace, PrefillCliResult& r) {
    const KvCache& cache = session.cache();
    r.kv_blocks = cache.blocks().blocks_in_use();
    r.kv_block_size = cache.blocks().block_size();
    r.kv_bytes = cache.bytes_in_use();
    r.kv_bytes_per_token = cache.storage().bytes_per_token();
    for (const TraceEvent& e : trace.events()) {
        if (e.name != "kv append" || e.args.at("layer") != "0") continue;
        r.chunk_slots.push_back({e.args.at("positions"), e.args.at("blocks")});
    }
}

void prefill_first_tokens(const Tokenizer& tok, const std::vector<float>& logits,
                          PrefillCliResult& r) {
    r.first_token = argmax(logits);
    r.first_text = tok.token_text(r.first_token);
    for (const TokenProb& p : top_probs(logits, r.top_n))
        r.top.push_back({p.token, tok.token_text(p.token), p.prob});
}

// Attention probes: one more run of the same plan (the timed ones stay unprobed).
void prefill_attention(const DeviceModel& dm, const SessionOptions& so,
                       const std::string& attention, PrefillCliResult& r) {
    r.probes = parse_probes(attention, r.config);
    if (r.probes.empty()) return;
    ForwardProbes fp;
    fp.attention = r.probes;
    Session s(dm, so, nullptr);
    const PrefillResult probed = s.prefill(r.tokens, r.plan, fp);
    for (const AttentionProbe& p : r.probes)
        r.attention.push_back(whole_map(probed, p, static_cast<int>(r.tokens.size())));
}

PrefillCliResult compute_prefill(const PrefillOptions& o) {
    const Model model = load_model_or_default(o.model);
    PrefillCliResult r = prefill_request(o, model);
    // The model loaded once on the backend (runtime/loaded_model.h); each session
    // below keeps a KV cache of its own, whose block numbers the chunk lines show.
    const LoadedModel loaded(model.weights, o.backend, parse_kernels(o.kernels));
    r.backend = loaded.backend().name();
    r.reference_backend = loaded.backend().is_reference();
    const DeviceModel& dm = loaded.device();
    Trace trace;
    // A trace file also gets the GPU backends' device time of every op, on its
    // own track (CUDA events; a little slower, so only when a trace is asked for).
    trace.device_ops = !o.trace.empty();
    SessionOptions so;
    so.block_size = o.block_size;
    so.mask = r.mask;
    Session session(dm, so, &trace);
    const PrefillResult cold = session.prefill(r.tokens, r.plan);
    r.cold_prefill_us = cold.prefill_us;
    r.prefill_us = prefill_warm_median_us(dm, so, r);
    const PrefillSnapshot mine = snapshot_of(session, cold);
    const PrefillSnapshot ref = run_prefill_snapshot(dm, r.tokens, r.compared_plan, so);
    r.equivalence = compare_snapshots(mine, ref);
    prefill_first_tokens(*model.tokenizer, cold.last_logits, r);
    prefill_work(r);
    if (!o.trace.empty()) trace.write_chrome_json(o.trace);
    prefill_kv_use(session, trace, r);
    prefill_attention(dm, so, o.attention, r);
    return r;
}

nlohmann::json prefill_json(const PrefillCliResult& r) {
    nlohmann::json j;
    j["backend"] = r.backend;
    j["model"] = r.model_source;
    j["tokens"] = r.tokens;
    j["mask"] = r.mask_spec;
    j["plan"] = r.plan.to_string();
    j["compared_plan"] = r.compared_plan.to_string();
    j["prefill_ms"] = r.prefill_us / 1000;  // median of the warm runs
    j["cold_prefill_ms"] = r.cold_prefill_us / 1000;
    j["warm_runs"] = r.warm_runs;
    j["flops"] = r.cost.total();
    j["attention_pairs"] = r.cost.attention_pairs;  // visible under the mask
    j["causal_attention_pairs"] = r.causal_cost.attention_pairs;
    j["weight_bytes_read"] = r.reads.total();  // every chunk reads every layer's weights
    j["kv_blocks"] = r.kv_blocks;
    j["kv_bytes"] = r.kv_bytes;
    j["first_token"] = {{"id", r.first_token}, {"text", r.first_text}};
    nlohmann::json tj = nlohmann::json::array();
    for (const PrefillTopToken& p : r.top)
        tj.push_back({{"id", p.id}, {"text", p.text}, {"prob", p.prob}});
    j["top"] = tj;
    const Difference& d = r.equivalence;
    j["equivalence"] = {{"logits_max_abs_diff", d.logits_max_abs},
                        {"kv_max_abs_diff", d.kv_max_abs},
                        {"logits_bitwise", d.logits_bitwise},
                        {"kv_bitwise", d.kv_bitwise},
                        {"same_first_token", d.same_argmax}};
    if (!r.probes.empty()) {
        nlohmann::json aj = nlohmann::json::array();
        for (std::size_t i = 0; i < r.probes.size(); ++i)
            aj.push_back({{"layer", r.probes[i].layer},
                          {"head", r.probes[i].head},
                          {"probs", r.attention[i]}});
        j["attention"] = aj;
    }
    return j;
}

// The model, the prompt, the time and the work of the prefill.
void print_prefill_cost_text(const PrefillCliResult& r) {
    const int t = static_cast<int>(r.tokens.size());
    std::printf("Model: %s (%s)\nBackend: %s\n", r.model_source.c_str(), r.config.summary().c_str(),
                r.backend.c_str());
    std::printf("Prompt: %d tokens (%s tokenizer); chunk plan %s (%zu chunk%s)%s%s\n", t,
                r.tokenizer.c_str(), r.plan.to_string().c_str(), r.plan.lengths.size(),
                r.plan.lengths.size() == 1 ? "" : "s", r.mask.is_causal() ? "" : "; mask ",
                r.mask.is_causal() ? "" : r.mask_spec.c_str());
    const PrefillCost& cost = r.cost;
    // Whole numbers below 2^53, so %.0f prints them exactly.
    if (r.mask.is_causal()) {
        std::printf(
            "Prefill: %.3f ms, %.0f tokens/s, %.0f FLOP (%.0f causal attention pairs per head "
            "and layer)\n",
            r.prefill_us / 1000, t / (r.prefill_us * 1e-6), cost.total(), cost.attention_pairs);
    } else {
        std::printf(
            "Prefill: %.3f ms, %.0f tokens/s, %.0f FLOP (%.0f attention pairs per head and layer "
            "visible under %s; causal: %.0f)\n",
            r.prefill_us / 1000, t / (r.prefill_us * 1e-6), cost.total(), cost.attention_pairs,
            r.mask_spec.c_str(), r.causal_cost.attention_pairs);
    }
    std::printf("  FLOP = projections %.0f + attention %.0f + logits %.0f\n", cost.projection_flops,
                cost.attention_flops, cost.logits_flops);
    std::printf(
        "  weights read: %d chunk%s x %.0f bytes of layers + %.0f bytes of final norm and "
        "classifier (the last chunk only) = %.0f bytes\n",
        r.reads.chunks, r.reads.chunks == 1 ? "" : "s", r.reads.layer_bytes, r.reads.head_bytes,
        r.reads.total());
    std::printf(
        "  time: median of %d warm runs, each on a fresh KV cache; the first, cold run "
        "took %.3f ms\n",
        r.warm_runs, r.cold_prefill_us / 1000);
}

// The KV cache in use and where each chunk's K/V went (the first 12 chunks).
void print_prefill_kv_text(const PrefillCliResult& r) {
    std::printf("KV cache: %d block%s of %d positions in use, %zu bytes (%zu bytes per token)\n",
                r.kv_blocks, r.kv_blocks == 1 ? "" : "s", r.kv_block_size, r.kv_bytes,
                r.kv_bytes_per_token);
    const int shown_chunks = 12;
    const int chunks = static_cast<int>(r.chunk_slots.size());
    for (int chunk = 0; chunk < chunks && chunk < shown_chunks; ++chunk) {
        const PrefillChunkSlots& s = r.chunk_slots[std::size_t(chunk)];
        std::printf("  chunk %d: positions %s -> block%s %s\n", chunk, s.positions.c_str(),
                    s.blocks.find(',') == std::string::npos ? "" : "s", s.blocks.c_str());
    }
    if (chunks > shown_chunks) std::printf("  ... %d more chunks\n", chunks - shown_chunks);
}

// The first token and the top of the distribution, as quoted token texts.
void print_prefill_tokens_text(const PrefillCliResult& r) {
    const auto quoted = [](const std::string& text) { return "'" + text + "'"; };
    std::printf("First token (greedy, from the last position's distribution): %s (id %d)\n",
                quoted(r.first_text).c_str(), r.first_token);
    std::printf("Top-%d:", r.top_n);
    for (const PrefillTopToken& p : r.top) std::printf("  %s %.4f", quoted(p.text).c_str(), p.prob);
    std::printf("\n");
}

// This plan against the compared one, and why the backend keeps (or may
// lose) the bits.
void print_prefill_equivalence_text(const PrefillCliResult& r) {
    const Difference& d = r.equivalence;
    std::printf("\nEquivalence: plan %s vs plan %s on %s\n", r.plan.to_string().c_str(),
                r.compared_plan.to_string().c_str(), r.backend.c_str());
    std::printf("  last-position logits: max |diff| %.3g, bitwise equal: %s\n", d.logits_max_abs,
                d.logits_bitwise ? "yes" : "no");
    std::printf("  K/V cache (%d layers x %d positions): max |diff| %.3g, bitwise equal: %s\n",
                r.config.n_layers, static_cast<int>(r.tokens.size()), d.kv_max_abs,
                d.kv_bitwise ? "yes" : "no");
    std::printf("  same first token: %s\n", d.same_argmax ? "yes" : "no");
    if (r.reference_backend) {
        std::printf(
            "  (reference backend: every sum in one fixed order, so chunking cannot change a "
            "bit)\n");
    } else if (r.kernels == "fastest") {
        std::printf(
            "  (fastest kernels: each product goes to the library's kernel for its shape, and\n"
            "   the order of its adds with it, so a chunk plan can change the bits: lesson 16)\n");
    } else {
        std::printf(
            "  (fast backend: its sums differ from cpu-ref's in the last bits (rel 1e-5 on\n"
            "   logits), but its key tiles and vector lanes are aligned to position 0, so\n"
            "   chunking cannot change a bit: lesson 15)\n");
    }
}

void print_prefill_attention_text(const PrefillCliResult& r) {
    for (std::size_t i = 0; i < r.probes.size(); ++i) {
        std::printf(
            "\nAttention of layer %d, head %d (row: query position; column: key; "
            "masked cells 0)\n",
            r.probes[i].layer, r.probes[i].head);
        for (std::size_t q = 0; q < r.attention[i].size(); ++q) {
            std::printf("  q%-3d", static_cast<int>(q));
            for (float x : r.attention[i][q]) std::printf(" %5.3f", x);
            std::printf("\n");
        }
    }
}

void print_prefill_text(const PrefillCliResult& r) {
    print_prefill_cost_text(r);
    print_prefill_kv_text(r);
    print_prefill_tokens_text(r);
    print_prefill_equivalence_text(r);
    print_prefill_attention_text(r);
    if (!r.trace_path.empty())
        std::printf("Trace written to %s (open in Perfetto)\n", r.trace_path.c_str());
}

void run(const PrefillOptions& o) {
    const PrefillCliResult r = compute_prefill(o);
    if (o.json)
        print_json(prefill_json(r));
    else
        print_prefill_text(r);
}

}  // namespace

void add_prefill_command(CLI::App& app) {
    auto o = std::make_shared<PrefillOptions>();
    CLI::App* cmd = app.add_subcommand("prefill",
                                       "prefill a prompt, print the first token and the "
                                       "full-vs-chunked equivalence report");
    o->prompt.add_to(cmd);
    add_model_option(cmd, o->model);
    cmd->add_option("--chunks", o->chunks, "chunk plan: full, a size like 4, or lengths like 3,1,4")
        ->capture_default_str();
    cmd->add_option("--backend", o->backend, "cpu-ref, cpu, ... (see plab info)")
        ->capture_default_str();
    cmd->add_option("--kernels", o->kernels,
                    "invariant, or fastest (cpu: the library's kernel for each product's shape; "
                    "lesson 16)")
        ->capture_default_str();
    cmd->add_option("--block-size", o->block_size, "KV cache block size in positions")
        ->capture_default_str();
    cmd->add_option("--top", o->top, "how many top probabilities to print")->capture_default_str();
    cmd->add_option("--trace", o->trace,
                    "write a Chrome trace (JSON) of the prefill here; on gpu/gpu-ref it has a "
                    "second track with every op's device time (CUDA events)");
    add_mask_option(cmd, o->mask);
    cmd->add_option("--repeats", o->repeats,
                    "warm runs timed after the first, cold one (the median is reported)")
        ->capture_default_str();
    cmd->add_option("--attention", o->attention,
                    "attention probabilities of these heads, LAYER:HEAD[,LAYER:HEAD...], e.g. "
                    "1:2 (in --json: key 'attention', one T x T matrix each)");
    cmd->add_flag("--json", o->json, "machine-readable output");
    cmd->callback([o] { run(*o); });
}

}  // namespace plab::cli
