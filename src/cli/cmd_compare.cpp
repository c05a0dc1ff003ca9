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
std::string short_number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    std::string s = buf;
    const std::size_t e = s.find("e-0");
    if (e != std::string::npos) s.erase(e + 2, 1);
    return s;
}

// What a fast row must keep (the "promise" column, the summary, the error).
std::string fast_promise(double tolerance) {
    return "relative " + short_number(tolerance) +
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

struct Row {
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
struct Tally {
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

void run(const CompareOptions& o) {
    PLAB_CHECK(o.repeats >= 1, "--repeats " << o.repeats << " must be at least 1");
    PLAB_CHECK(std::isfinite(o.tolerance) && o.tolerance >= 0,
               "--tolerance " << o.tolerance
                              << " must be a finite number >= 0, like 1e-5 (relative to the "
                                 "largest |cpu-ref logit|)");
    // 1. The model and the prompts.
    Model model;
    if (o.random.empty()) {
        model = load_model_or_default(o.model);
    } else {
        model.weights = make_random_weights(named_shape(o.random), o.seed);
        model.source = "random stories15M shape, seed " + std::to_string(o.seed);
    }
    const ModelConfig& c = model.weights.config;
    std::vector<std::vector<int32_t>> prompts;
    if (!o.lengths.empty()) {
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
    } else {
        PLAB_CHECK(model.tokenizer != nullptr,
                   "a random model has no tokenizer: give --lengths for random prompts");
        prompts.push_back(o.prompt.resolve(model));
    }
    std::vector<std::string> names = o.backends == "all" ? backend_names() : split_list(o.backends);
    SessionOptions so;
    so.block_size = o.block_size;

    // 2. Every backend and plan against cpu-ref's full prefill.
    std::vector<Row> rows;
    Tally reference_tally, fast_tally;
    // Every backend gets the model loaded once (runtime/loaded_model.h); the
    // sessions below keep KV caches of their own.
    const LoadedModel ref_loaded(model.weights, "cpu-ref");
    const DeviceModel& ref_model = ref_loaded.device();
    for (const auto& tokens : prompts) {
        const int t = static_cast<int>(tokens.size());
        MaskContext mc;  // a random model has no tokenizer, hence no BOS for docs:bos
        mc.tokens = tokens;
        mc.bos_id = model.tokenizer ? model.tokenizer->bos_id() : -1;
        mc.n_heads = c.n_heads;
        so.mask = make_mask(o.mask, mc);
        const PrefillSnapshot ref = run_prefill_snapshot(ref_model, tokens, ChunkPlan{{t}}, so);
        double scale = 0;
        for (float x : ref.last_logits) scale = std::max(scale, double(std::fabs(x)));
        for (const std::string& name : names) {
            const LoadedModel loaded(model.weights, name);
            const Backend* backend = &loaded.backend();
            const DeviceModel& dm = loaded.device();
            // This backend's whole prefill, which every plan's row must equal bit for
            // bit; it is also the first (warm-up) run of a "full" row.
            double own_full_us = 0;
            const PrefillSnapshot own_full =
                run_prefill_snapshot(dm, tokens, ChunkPlan{{t}}, so, &own_full_us);
            for (const std::string& plan_text : split_plans(o.plans)) {
                const ChunkPlan plan = parse_chunk_plan(plan_text, t);
                const bool whole = plan.lengths.size() == 1;
                double us = own_full_us;
                PrefillSnapshot s = whole ? own_full  // + warm-up
                                          : run_prefill_snapshot(dm, tokens, plan, so, &us);
                std::vector<double> times;
                for (int i = 0; i < o.repeats && o.repeats > 1; ++i) {
                    s = run_prefill_snapshot(dm, tokens, plan, so, &us);
                    times.push_back(us / 1000);
                }
                if (times.empty()) times.push_back(us / 1000);
                std::sort(times.begin(), times.end());
                Row row;
                row.tokens = t;
                row.backend = backend->name();
                row.reference = backend->is_reference();
                row.plan = plan.to_string();
                row.diff = compare_snapshots(s, ref);
                row.own_full_bitwise = compare_snapshots(s, own_full).bitwise();
                row.logits_rel = scale > 0 ? row.diff.logits_max_abs / scale : 0;
                row.median_ms = times[times.size() / 2];
                // The promise, computed: bits for reference backends; for fast ones
                // the stated tolerance on logits, the same greedy token, and no bit
                // changed by the chunk plan.
                row.promise_kept = row.reference ? row.diff.bitwise()
                                                 : row.logits_rel <= o.tolerance &&
                                                       row.diff.same_argmax && row.own_full_bitwise;
                Tally& tally = row.reference ? reference_tally : fast_tally;
                ++tally.rows;
                if (!row.promise_kept) ++tally.broken;
                rows.push_back(row);
            }
        }
    }

    // 3. The matrix.
    if (o.json) {
        nlohmann::json j;
        j["model"] = model.source;
        j["gpu_form"] = gpu_form_description();
        j["block_size"] = o.block_size;
        j["mask"] = o.mask;
        for (const Row& r : rows) {
            j["rows"].push_back(
                {{"tokens", r.tokens},
                 {"backend", r.backend},
                 {"reference", r.reference},
                 {"plan", r.plan},
                 {"logits_max_abs_diff", r.diff.logits_max_abs},
                 {"logits_max_diff_relative", r.logits_rel},
                 {"kv_max_abs_diff", r.diff.kv_max_abs},
                 {"logits_bitwise", r.diff.logits_bitwise},
                 {"kv_bitwise", r.diff.kv_bitwise},
                 {"same_first_token", r.diff.same_argmax},
                 {"bitwise_to_own_full", r.own_full_bitwise},
                 {"promise", r.reference ? "bitwise equal to cpu-ref" : fast_promise(o.tolerance)},
                 {"promise_kept", r.promise_kept},
                 {"median_ms", r.median_ms},
                 {"tokens_per_s", r.tokens / (r.median_ms * 1e-3)}});
        }
        j["reference_backends_bitwise"] = reference_tally.kept();
        j["fast_tolerance"] = o.tolerance;
        j["fast_backends_within_tolerance"] = fast_tally.kept();
        print_json(j);
    } else {
        std::printf("Model: %s (%s)\nGPU backends: %s\n", model.source.c_str(), c.summary().c_str(),
                    gpu_form_description().c_str());
        if (o.mask != "causal") std::printf("Mask: %s\n", o.mask.c_str());
        std::printf(
            "Each row: last-position logits and every cached K/V against cpu-ref's full "
            "prefill\n(KV blocks of %d positions; time: median of %d run%s%s).\n\n",
            o.block_size, o.repeats, o.repeats > 1 ? "s" : "",
            o.repeats > 1 ? " after a warm-up" : "");
        std::printf("  %6s  %-20s %-12s %13s %13s  %-8s %-8s %-6s %-8s %10s %11s\n", "tokens",
                    "backend", "plan", "logits |diff|", "K/V |diff|", "bitwise", "vs full", "token",
                    "promise", "ms", "tokens/s");
        double worst_rel = -1;
        for (const Row& r : rows) {
            std::string plan = r.plan.size() > 12 ? r.plan.substr(0, 9) + "..." : r.plan;
            std::printf("  %6d  %-20s %-12s %13.3g %13.3g  %-8s %-8s %-6s %-8s %10.2f %11.0f\n",
                        r.tokens, r.backend.c_str(), plan.c_str(), r.diff.logits_max_abs,
                        r.diff.kv_max_abs, r.diff.bitwise() ? "yes" : "no",
                        r.own_full_bitwise ? "same" : "DIFF", r.diff.same_argmax ? "same" : "DIFF",
                        r.promise_kept ? "kept" : "BROKEN", r.median_ms,
                        r.tokens / (r.median_ms * 1e-3));
            if (!r.reference) worst_rel = std::max(worst_rel, r.logits_rel);
        }
        std::printf("\nReference backends (cpu-ref, gpu-ref) promise bitwise equality: %s.\n",
                    reference_tally.text().c_str());
        std::printf("Fast backends (cpu, gpu) promise %s: %s.\n", fast_promise(o.tolerance).c_str(),
                    fast_tally.text().c_str());
        if (worst_rel >= 0) {
            std::printf("Largest fast-row logits difference: %.2g of max |cpu-ref logit|.\n",
                        worst_rel);
        }
    }
    std::fflush(stdout);  // the table first, then the one error line
    PLAB_CHECK(reference_tally.kept(), "a reference backend is not bitwise equal to cpu-ref: "
                                           << reference_tally.text() << " (see the table)");
    PLAB_CHECK(fast_tally.kept(), "a fast backend broke its promise of "
                                      << fast_promise(o.tolerance) << ": " << fast_tally.text()
                                      << " (see the table)");
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
