// `plab compare`: one prompt on every backend and several chunk plans, each
// measured against cpu-ref's full prefill.
//
// What it teaches: the promise of the course in one table. Reference backends
// (cpu-ref, gpu-ref) must show 0 and "bitwise yes" in every row, whatever the
// plan or device; fast backends (cpu, gpu) show how far reordered sums drift
// (about 1e-6), that the greedy first token stays the same, and — their
// kernels being chunk-invariant (lesson 15) — that every plan gives the bits
// of their own full prefill (the "vs full" column). The GPU rows
// say whether the kernels ran natively or emulated on the CPU. With
// --lengths, random prompts of those lengths replace the prompt, and the
// tokens/s column (median of --repeats runs after a warm-up) gives the speed
// table of kernels/device-check.sh. Lesson: 04-bitwise-equivalence.md.
//
// Every promise is checked, not recited: each row's "promise" column and the
// two summary lines are computed from the measured differences. A reference
// row keeps its promise when logits and every cached K/V are bitwise equal to
// cpu-ref; a fast row when its largest logits difference is at most
// --tolerance (default 1e-5) times the largest |cpu-ref logit|, its greedy
// first token is cpu-ref's, and its logits and K/V are bitwise those of the
// same backend's full prefill. Exit status 1 when any row breaks its promise
// (after the table, so the broken row can be read); a tighter --tolerance
// shows a fast backend's promise breaking on purpose.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/common.h"
#include "core/error.h"
#include "model/shapes.h"
#include "runtime/engine.h"
#include "runtime/equivalence.h"
#include "runtime/registry.h"

namespace plab::cli {
namespace {

struct CompareOptions {
    PromptOptions prompt;
    std::string model;
    std::string random;   // "stories15m": random weights of that shape instead of --model
    std::string lengths;  // "128,512": random prompts of these lengths instead of the prompt
    std::string backends = "all";
    std::string plans = "full,1,5,16";
    int block_size = 16;
    int repeats = 1;
    std::uint64_t seed = 15;
    double tolerance = 1e-5;  // the fast backends' promise, relative to max |cpu-ref logit|
    std::string mask = "causal";
    bool json = false;
};

// 1e-05 -> "1e-5": the tolerance as the lessons and the README write it.
std::string compare_short_number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    std::string s = buf;
    const std::size_t e = s.find("e-0");
    if (e != std::string::npos) s.erase(e + 2, 1);
    return s;
}

// What a fast row must keep (the "promise" column, the summary, the error).
std::string fast_promise(double tolerance) {
    return "relative " + compare_short_number(tolerance) +
           " on logits, the same first token, and the bits of the backend's own full prefill in "
           "every plan";
}

// Plans are separated by ';' when one of them lists lengths ("full;3,1,4"),
// by ',' otherwise ("full,1,5,16": a list of fixed chunk sizes).
std::vector<std::string> split_plans(const std::string& s) {
    if (s.find(';') == std::string::npos) return split_list(s);
    std::vector<std::string> out;
    std::size_t start = 0;
    for (;;) {
        const std::size_t semi = s.find(';', start);
        out.push_back(s.substr(start, semi == std::string::npos ? semi : semi - start));
        if (semi == std::string::npos) return out;
        start = semi + 1;
    }
}

struct CompareRow {
    int tokens = 0;
    std::string backend;
    bool reference = false;
    std::string plan;
    Difference diff;
    bool own_full_bitwise = false;  // logits and K/V bitwise equal to this backend's full prefill
    double logits_rel = 0;  // logits max |diff| / max |cpu-ref logit|: the fast backends' promise
    bool promise_kept = false;  // bitwise (reference) or within --tolerance + same token (fast)
    double median_ms = 0;
};

// The tally of one kind of backend for a summary line: "kept in 4 of 4 rows".
struct CompareTally {
    int rows = 0;
    int broken = 0;
    bool kept() const { return broken == 0; }
    std::string text() const {
        if (rows == 0) return "no rows (no such backend in --backends)";
        const std::string of = " of " + std::to_string(rows) + (rows == 1 ? " row" : " rows");
        return (broken == 0 ? "kept in " + std::to_string(rows)
                            : "BROKEN in " + std::to_string(broken)) +
               of;
    }
};

// Everything `plab compare` shows, text or JSON: one row per prompt, backend
// and plan, and the two promises tallied.
struct CompareResult {
    std::string model_source;
    ModelConfig config;
    std::string gpu_form;  // native or emulated, as the registry describes it
    int block_size = 0;
    int repeats = 0;
    std::string mask_spec;
    double tolerance = 0;  // the fast backends' promise
    std::vector<CompareRow> rows;
    CompareTally reference_tally, fast_tally;
    double worst_fast_rel = -1;  // the largest fast row's logits_rel; -1: no fast row
};

// --model, or --random weights of that shape.
Model compare_model(const CompareOptions& o) {
    Model model;
    if (o.random.empty()) {
        model = load_model_or_default(o.model);
    } else {
        model.weights = make_random_weights(named_shape(o.random), o.seed);
        model.source = "random stories15M shape, seed " + std::to_string(o.seed);
    }
    return model;
}

// --lengths: random prompts of those lengths; else the one prompt given.
std::vector<std::vector<int32_t>> compare_prompts(const CompareOptions& o, const Model& model) {
    const ModelConfig& c = model.weights.config;
    std::vector<std::vector<int32_t>> prompts;
    if (o.lengths.empty()) {
        PLAB_CHECK(model.tokenizer != nullptr,
                   "a random model has no tokenizer: give --lengths for random prompts");
        prompts.push_back(o.prompt.resolve(model));
        return prompts;
    }
    std::uint64_t state = o.seed * 2654435761u + 1;
    for (int n : parse_int_list(o.lengths, "--lengths")) {
        PLAB_CHECK(n >= 1 && n <= c.max_seq_len,
                   "--lengths: " << n << " is not in 1.." << c.max_seq_len);
        std::vector<int32_t> t(static_cast<std::size_t>(n));
        for (auto& id : t) {  // a small LCG: the same prompt on every machine
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            id = static_cast<int32_t>((state >> 33) % static_cast<std::uint64_t>(c.vocab_size));
        }
        prompts.push_back(std::move(t));
    }
    return prompts;
}

// One prompt's yardstick: cpu-ref's full prefill under the prompt's mask.
struct CompareReference {
    std::vector<int32_t> tokens;
    SessionOptions so;  // the block size and the mask bound to these tokens
    PrefillSnapshot snapshot;
    double scale = 0;  // max |cpu-ref logit|: what the fast rows' tolerance is relative to
};

CompareReference compare_reference(const CompareOptions& o, const Model& model,
                                   const DeviceModel& ref_model, std::vector<int32_t> tokens) {
    CompareReference ref;
    ref.tokens = std::move(tokens);
    const int t = static_cast<int>(ref.tokens.size());
    MaskContext mc;  // a random model has no tokenizer, hence no BOS for docs:bos
    mc.tokens = ref.tokens;
    mc.bos_id = model.tokenizer ? model.tokenizer->bos_id() : -1;
    mc.n_heads = model.weights.config.n_heads;
    ref.so.block_size = o.block_size;
    ref.so.mask = make_mask(o.mask, mc);
    ref.snapshot = run_prefill_snapshot(ref_model, ref.tokens, ChunkPlan{{t}}, ref.so);
    for (float x : ref.snapshot.last_logits) ref.scale = std::max(ref.scale, double(std::fabs(x)));
    return ref;
}

// One backend on one prompt: its whole prefill, which every plan's row must
// equal bit for bit; it is also the first (warm-up) run of a "full" row.
struct CompareBackendRun {
    const Backend& backend;
    const DeviceModel& dm;
    PrefillSnapshot own_full;
    double own_full_us = 0;
};

// One row: a plan on a backend, timed (median of --repeats after a warm-up),
// against cpu-ref's full prefill and the backend's own.
CompareRow compare_plan_row(const CompareReference& ref, const CompareBackendRun& b,
                            const std::string& plan_text, const CompareOptions& o) {
    const int t = static_cast<int>(ref.tokens.size());
    const ChunkPlan plan = parse_chunk_plan(plan_text, t);
    const bool whole = plan.lengths.size() == 1;
    double us = b.own_full_us;
    PrefillSnapshot s = whole ? b.own_full  // + warm-up
                              : run_prefill_snapshot(b.dm, ref.tokens, plan, ref.so, &us);
    std::vector<double> times;
    for (int i = 0; i < o.repeats && o.repeats > 1; ++i) {
        s = run_prefill_snapshot(b.dm, ref.tokens, plan, ref.so, &us);
        times.push_back(us / 1000);
    }
    if (times.empty()) times.push_back(us / 1000);
    std::sort(times.begin(), times.end());
    CompareRow row;
    row.tokens = t;
    row.backend = b.backend.name();
    row.reference = b.backend.is_reference();
    row.plan = plan.to_string();
    row.diff = compare_snapshots(s, ref.snapshot);
    row.own_full_bitwise = compare_snapshots(s, b.own_full).bitwise();
    row.logits_rel = ref.scale > 0 ? row.diff.logits_max_abs / ref.scale : 0;
    row.median_ms = times[times.size() / 2];
    // The promise, computed: bits for reference backends; for fast ones the
    // stated tolerance on logits, the same greedy token, and no bit changed by
    // the chunk plan.
    row.promise_kept = row.reference ? row.diff.bitwise()
                                     : row.logits_rel <= o.tolerance && row.diff.same_argmax &&
                                           row.own_full_bitwise;
    return row;
}

void compare_add_row(CompareResult& r, const CompareRow& row) {
    CompareTally& tally = row.reference ? r.reference_tally : r.fast_tally;
    ++tally.rows;
    if (!row.promise_kept) ++tally.broken;
    if (!row.reference) r.worst_fast_rel = std::max(r.worst_fast_rel, row.logits_rel);
    r.rows.push_back(row);
}

CompareResult compute_compare(const CompareOptions& o) {
    PLAB_CHECK(o.repeats >= 1, "--repeats " << o.repeats << " must be at least 1");
    PLAB_CHECK(std::isfinite(o.tolerance) && o.tolerance >= 0,
               "--tolerance " << o.tolerance
                              << " must be a finite number >= 0, like 1e-5 (relative to the "
                                 "largest |cpu-ref logit|)");
    // 1. The model and the prompts.
    const Model model = compare_model(o);
    std::vector<std::vector<int32_t>> prompts = compare_prompts(o, model);
    const std::vector<std::string> names =
        o.backends == "all" ? backend_names() : split_list(o.backends);
    // 2. Every backend and plan against cpu-ref's full prefill. Every backend
    // gets the model loaded once (runtime/loaded_model.h); the sessions below
    // keep KV caches of their own.
    CompareResult r;
    const LoadedModel ref_loaded(model.weights, "cpu-ref");
    for (std::vector<int32_t>& tokens : prompts) {
        const CompareReference ref =
            compare_reference(o, model, ref_loaded.device(), std::move(tokens));
        const int t = static_cast<int>(ref.tokens.size());
        for (const std::string& name : names) {
            const LoadedModel loaded(model.weights, name);
            CompareBackendRun b{loaded.backend(), loaded.device(), {}, 0};
            b.own_full =
                run_prefill_snapshot(b.dm, ref.tokens, ChunkPlan{{t}}, ref.so, &b.own_full_us);
            for (const std::string& plan_text : split_plans(o.plans))
                compare_add_row(r, compare_plan_row(ref, b, plan_text, o));
        }
    }
    r.model_source = model.source;
    r.config = model.weights.config;
    r.gpu_form = gpu_form_description();
    r.block_size = o.block_size;
    r.repeats = o.repeats;
    r.mask_spec = o.mask;
    r.tolerance = o.tolerance;
    return r;
}

nlohmann::json compare_json(const CompareResult& r) {
    nlohmann::json j;
    j["model"] = r.model_source;
    j["gpu_form"] = r.gpu_form;
    j["block_size"] = r.block_size;
    j["mask"] = r.mask_spec;
    for (const CompareRow& row : r.rows) {
        j["rows"].push_back(
            {{"tokens", row.tokens},
             {"backend", row.backend},
             {"reference", row.reference},
             {"plan", row.plan},
             {"logits_max_abs_diff", row.diff.logits_max_abs},
             {"logits_max_diff_relative", row.logits_rel},
             {"kv_max_abs_diff", row.diff.kv_max_abs},
             {"logits_bitwise", row.diff.logits_bitwise},
             {"kv_bitwise", row.diff.kv_bitwise},
             {"same_first_token", row.diff.same_argmax},
             {"bitwise_to_own_full", row.own_full_bitwise},
             {"promise", row.reference ? "bitwise equal to cpu-ref" : fast_promise(r.tolerance)},
             {"promise_kept", row.promise_kept},
             {"median_ms", row.median_ms},
             {"tokens_per_s", row.tokens / (row.median_ms * 1e-3)}});
    }
    j["reference_backends_bitwise"] = r.reference_tally.kept();
    j["fast_tolerance"] = r.tolerance;
    j["fast_backends_within_tolerance"] = r.fast_tally.kept();
    return j;
}

void print_compare_text(const CompareResult& r) {
    std::printf("Model: %s (%s)\nGPU backends: %s\n", r.model_source.c_str(),
                r.config.summary().c_str(), r.gpu_form.c_str());
    if (r.mask_spec != "causal") std::printf("Mask: %s\n", r.mask_spec.c_str());
    std::printf(
        "Each row: last-position logits and every cached K/V against cpu-ref's full "
        "prefill\n(KV blocks of %d positions; time: median of %d run%s%s).\n\n",
        r.block_size, r.repeats, r.repeats > 1 ? "s" : "", r.repeats > 1 ? " after a warm-up" : "");
    std::printf("  %6s  %-20s %-12s %13s %13s  %-8s %-8s %-6s %-8s %10s %11s\n", "tokens",
                "backend", "plan", "logits |diff|", "K/V |diff|", "bitwise", "vs full", "token",
                "promise", "ms", "tokens/s");
    for (const CompareRow& row : r.rows) {
        std::string plan = row.plan.size() > 12 ? row.plan.substr(0, 9) + "..." : row.plan;
        std::printf("  %6d  %-20s %-12s %13.3g %13.3g  %-8s %-8s %-6s %-8s %10.2f %11.0f\n",
                    row.tokens, row.backend.c_str(), plan.c_str(), row.diff.logits_max_abs,
                    row.diff.kv_max_abs, row.diff.bitwise() ? "yes" : "no",
                    row.own_full_bitwise ? "same" : "DIFF", row.diff.same_argmax ? "same" : "DIFF",
                    row.promise_kept ? "kept" : "BROKEN", row.median_ms,
                    row.tokens / (row.median_ms * 1e-3));
    }
    std::printf("\nReference backends (cpu-ref, gpu-ref) promise bitwise equality: %s.\n",
                r.reference_tally.text().c_str());
    std::printf("Fast backends (cpu, gpu) promise %s: %s.\n", fast_promise(r.tolerance).c_str(),
                r.fast_tally.text().c_str());
    if (r.worst_fast_rel >= 0) {
        std::printf("Largest fast-row logits difference: %.2g of max |cpu-ref logit|.\n",
                    r.worst_fast_rel);
    }
}

// Exit status 1 when a row broke its promise: after the table, so the broken
// row can be read.
void check_compare_promises(const CompareResult& r) {
    PLAB_CHECK(r.reference_tally.kept(), "a reference backend is not bitwise equal to cpu-ref: "
                                             << r.reference_tally.text() << " (see the table)");
    PLAB_CHECK(r.fast_tally.kept(), "a fast backend broke its promise of "
                                        << fast_promise(r.tolerance) << ": " << r.fast_tally.text()
                                        << " (see the table)");
}

void run(const CompareOptions& o) {
    const CompareResult r = compute_compare(o);
    if (o.json)
        print_json(compare_json(r));
    else
        print_compare_text(r);
    std::fflush(stdout);  // the table first, then the one error line
    check_compare_promises(r);
}

}  // namespace

void add_compare_command(CLI::App& app) {
    auto o = std::make_shared<CompareOptions>();
    CLI::App* cmd = app.add_subcommand(
        "compare", "every backend x chunk plan vs cpu-ref: max |diff| of logits and K/V, bitwise");
    o->prompt.add_to(cmd);
    add_model_option(cmd, o->model);
    cmd->add_option("--random", o->random,
                    "use random weights of this shape instead of --model: stories15m");
    cmd->add_option("--lengths", o->lengths,
                    "random prompts of these lengths instead of the prompt, e.g. 128,512,2048");
    cmd->add_option("--backends", o->backends, "'all' or a comma-separated list")
        ->capture_default_str();
    cmd->add_option("--plans", o->plans,
                    "chunk plans: 'full,1,5,16' (sizes), or ';'-separated with explicit lengths "
                    "'full;3,1,4'")
        ->capture_default_str();
    cmd->add_option("--block-size", o->block_size, "KV cache block size")->capture_default_str();
    cmd->add_option("--repeats", o->repeats, "timed runs per row (median, after a warm-up)")
        ->capture_default_str();
    cmd->add_option("--seed", o->seed, "seed of --random weights and --lengths prompts")
        ->capture_default_str();
    cmd->add_option("--tolerance", o->tolerance,
                    "the fast backends' promise: largest logits |diff| relative to the largest "
                    "|cpu-ref logit|")
        ->capture_default_str();
    add_mask_option(cmd, o->mask);
    cmd->add_flag("--json", o->json, "machine-readable output");
    cmd->callback([o] { run(*o); });
}

}  // namespace plab::cli
