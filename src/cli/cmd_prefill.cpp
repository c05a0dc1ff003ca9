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

void run(const PrefillOptions& o) {
    const Model model = load_model_or_default(o.model);
    const std::vector<int32_t> tokens = o.prompt.resolve(model);
    const int t = static_cast<int>(tokens.size());
    const ChunkPlan plan = parse_chunk_plan(o.chunks, t);
    const BoundMask mask = resolve_mask(o.mask, tokens, model);
    check_plan_for_mask(mask.view(), plan);
    // The plan we compare against: the whole prompt at once, or, when the
    // plan *is* the whole prompt, one token at a time (as far as the mask
    // allows: a prefix-LM prefix stays in one chunk).
    const ChunkPlan other = plan.lengths.size() == 1
                                ? nearest_valid_plan(mask.view(), fixed_chunk_plan(t, 1))
                                : ChunkPlan{{t}};
    PLAB_CHECK(o.top >= 1, "--top " << o.top << " must be at least 1");
    PLAB_CHECK(o.repeats >= 1 && o.repeats <= 1000,
               "--repeats " << o.repeats << " must be between 1 and 1000 (warm runs to time)");

    // The model loaded once on the backend (runtime/loaded_model.h); each session
    // below keeps a KV cache of its own, whose block numbers the chunk lines print.
    const LoadedModel loaded(model.weights, o.backend, parse_kernels(o.kernels));
    const Backend* backend = &loaded.backend();
    const DeviceModel& dm = loaded.device();
    Trace trace;
    // A trace file also gets the GPU backends' device time of every op, on its
    // own track (CUDA events; a little slower, so only when a trace is asked for).
    trace.device_ops = !o.trace.empty();
    SessionOptions so;
    so.block_size = o.block_size;
    so.mask = mask;
    Session session(dm, so, &trace);
    const PrefillResult r = session.prefill(tokens, plan);
    // Timing: the run above is the first, cold one (caches, the allocator and
    // the thread pool not yet warm); what a prompt's prefill costs is the
    // median of warm runs, each on a fresh KV cache (a cold prompt, not a
    // prefix hit). Both are printed: they are different measurement conditions.
    std::vector<double> warm_us;
    for (int i = 0; i < o.repeats; ++i) {
        Session warm(dm, so, nullptr);
        warm_us.push_back(warm.prefill(tokens, plan).prefill_us);
    }
    const double prefill_us = percentile(warm_us, 0.5);
    const PrefillSnapshot mine = snapshot_of(session, r);
    const PrefillSnapshot ref = run_prefill_snapshot(dm, tokens, other, so);
    const Difference d = compare_snapshots(mine, ref);
    const int32_t first = argmax(r.last_logits);
    const auto top = top_probs(r.last_logits, o.top);
    // FLOPs and attention pairs of this prompt under its mask: a window or
    // a document boundary removes pairs (the causal count stays beside it).
    const PrefillCost causal_cost = prefill_cost(model.weights.config, t);
    // Each chunk reads every layer's weights again: what small chunks cost
    // besides the pairs (which any plan adds up to the same).
    const PrefillWeightReads reads =
        prefill_weight_reads(model.weights.config, static_cast<int>(plan.lengths.size()));
    const PrefillCost cost = mask.is_causal()
                                 ? causal_cost
                                 : with_visible_pairs(causal_cost, model.weights.config,
                                                      double(count_visible_pairs(mask.view(), t)));
    if (!o.trace.empty()) trace.write_chrome_json(o.trace);
    const Tokenizer& tok = *model.tokenizer;
    // Attention probes: one more run of the same plan (the timed ones stay unprobed).
    const std::vector<AttentionProbe> probes = parse_probes(o.attention, model.weights.config);
    PrefillResult probed;
    if (!probes.empty()) {
        ForwardProbes fp;
        fp.attention = probes;
        Session s(dm, so, nullptr);
        probed = s.prefill(tokens, plan, fp);
    }

    if (o.json) {
        nlohmann::json j;
        j["backend"] = backend->name();
        j["model"] = model.source;
        j["tokens"] = tokens;
        j["mask"] = o.mask;
        j["plan"] = plan.to_string();
        j["compared_plan"] = other.to_string();
        j["prefill_ms"] = prefill_us / 1000;  // median of the warm runs
        j["cold_prefill_ms"] = r.prefill_us / 1000;
        j["warm_runs"] = o.repeats;
        j["flops"] = cost.total();
        j["attention_pairs"] = cost.attention_pairs;  // visible under the mask
        j["causal_attention_pairs"] = causal_cost.attention_pairs;
        j["weight_bytes_read"] = reads.total();  // every chunk reads every layer's weights
        j["kv_blocks"] = session.cache().blocks_in_use();
        j["kv_bytes"] = session.cache().bytes_in_use();
        j["first_token"] = {{"id", first}, {"text", tok.token_text(first)}};
        nlohmann::json tj = nlohmann::json::array();
        for (const auto& p : top)
            tj.push_back({{"id", p.token}, {"text", tok.token_text(p.token)}, {"prob", p.prob}});
        j["top"] = tj;
        j["equivalence"] = {{"logits_max_abs_diff", d.logits_max_abs},
                            {"kv_max_abs_diff", d.kv_max_abs},
                            {"logits_bitwise", d.logits_bitwise},
                            {"kv_bitwise", d.kv_bitwise},
                            {"same_first_token", d.same_argmax}};
        if (!probes.empty()) {
            nlohmann::json aj = nlohmann::json::array();
            for (const AttentionProbe& p : probes)
                aj.push_back(
                    {{"layer", p.layer}, {"head", p.head}, {"probs", whole_map(probed, p, t)}});
            j["attention"] = aj;
        }
        print_json(j);
        return;
    }
    const ModelConfig& c = model.weights.config;
    std::printf("Model: %s (%s)\nBackend: %s\n", model.source.c_str(), c.summary().c_str(),
                backend->name().c_str());
    std::printf("Prompt: %d tokens (%s tokenizer); chunk plan %s (%zu chunk%s)%s%s\n", t,
                tok.kind().c_str(), plan.to_string().c_str(), plan.lengths.size(),
                plan.lengths.size() == 1 ? "" : "s", mask.is_causal() ? "" : "; mask ",
                mask.is_causal() ? "" : o.mask.c_str());
    // Whole numbers below 2^53, so %.0f prints them exactly.
    if (mask.is_causal()) {
        std::printf(
            "Prefill: %.3f ms, %.0f tokens/s, %.0f FLOP (%.0f causal attention pairs per head "
            "and layer)\n",
            prefill_us / 1000, t / (prefill_us * 1e-6), cost.total(), cost.attention_pairs);
    } else {
        std::printf(
            "Prefill: %.3f ms, %.0f tokens/s, %.0f FLOP (%.0f attention pairs per head and layer "
            "visible under %s; causal: %.0f)\n",
            prefill_us / 1000, t / (prefill_us * 1e-6), cost.total(), cost.attention_pairs,
            o.mask.c_str(), causal_cost.attention_pairs);
    }
    std::printf("  FLOP = projections %.0f + attention %.0f + logits %.0f\n", cost.projection_flops,
                cost.attention_flops, cost.logits_flops);
    std::printf(
        "  weights read: %d chunk%s x %.0f bytes of layers + %.0f bytes of final norm and "
        "classifier (the last chunk only) = %.0f bytes\n",
        reads.chunks, reads.chunks == 1 ? "" : "s", reads.layer_bytes, reads.head_bytes,
        reads.total());
    std::printf(
        "  time: median of %d warm runs, each on a fresh KV cache; the first, cold run "
        "took %.3f ms\n",
        o.repeats, r.prefill_us / 1000);
    std::printf("KV cache: %d block%s of %d positions in use, %zu bytes (%zu bytes per token)\n",
                session.cache().blocks_in_use(), session.cache().blocks_in_use() == 1 ? "" : "s",
                session.cache().block_size(), session.cache().bytes_in_use(),
                session.cache().bytes_per_token());
    // Where each chunk's K/V went (layer 0; every layer uses the same slots).
    int chunk = 0;
    const int shown_chunks = 12;
    for (const TraceEvent& e : trace.events()) {
        if (e.name != "kv append" || e.args.at("layer") != "0") continue;
        if (chunk < shown_chunks) {
            const std::string& blocks = e.args.at("blocks");
            std::printf("  chunk %d: positions %s -> block%s %s\n", chunk,
                        e.args.at("positions").c_str(),
                        blocks.find(',') == std::string::npos ? "" : "s", blocks.c_str());
        }
        ++chunk;
    }
    if (chunk > shown_chunks) std::printf("  ... %d more chunks\n", chunk - shown_chunks);
    std::printf("First token (greedy, from the last position's distribution): %s (id %d)\n",
                quoted_token(tok, first).c_str(), first);
    std::printf("Top-%d:", o.top);
    for (const auto& p : top) std::printf("  %s %.4f", quoted_token(tok, p.token).c_str(), p.prob);
    std::printf("\n\nEquivalence: plan %s vs plan %s on %s\n", plan.to_string().c_str(),
                other.to_string().c_str(), backend->name().c_str());
    std::printf("  last-position logits: max |diff| %.3g, bitwise equal: %s\n", d.logits_max_abs,
                d.logits_bitwise ? "yes" : "no");
    std::printf("  K/V cache (%d layers x %d positions): max |diff| %.3g, bitwise equal: %s\n",
                c.n_layers, t, d.kv_max_abs, d.kv_bitwise ? "yes" : "no");
    std::printf("  same first token: %s\n", d.same_argmax ? "yes" : "no");
    if (backend->is_reference()) {
        std::printf(
            "  (reference backend: every sum in one fixed order, so chunking cannot change a "
            "bit)\n");
    } else if (o.kernels == "fastest") {
        std::printf(
            "  (fastest kernels: each product goes to the library's kernel for its shape, and\n"
            "   the order of its adds with it, so a chunk plan can change the bits: lesson 16)\n");
    } else {
        std::printf(
            "  (fast backend: its sums differ from cpu-ref's in the last bits (rel 1e-5 on\n"
            "   logits), but its key tiles and vector lanes are aligned to position 0, so\n"
            "   chunking cannot change a bit: lesson 15)\n");
    }
    for (const AttentionProbe& p : probes) {
        std::printf(
            "\nAttention of layer %d, head %d (row: query position; column: key; "
            "masked cells 0)\n",
            p.layer, p.head);
        const auto rows = whole_map(probed, p, t);
        for (int q = 0; q < t; ++q) {
            std::printf("  q%-3d", q);
            for (float x : rows[std::size_t(q)]) std::printf(" %5.3f", x);
            std::printf("\n");
        }
    }
    if (!o.trace.empty()) std::printf("Trace written to %s (open in Perfetto)\n", o.trace.c_str());
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
