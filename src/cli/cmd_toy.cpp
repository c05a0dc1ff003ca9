// `plab toy`: the one-head, dimension-1 attention example, full and chunked.
// Lesson: lessons/01-toy-example.md.
#include <cstring>
#include <iostream>
#include <memory>

#include "cli/common.h"
#include "core/error.h"
#include "runtime/mask_grammar.h"
#include "runtime/registry.h"
#include "toy/toy.h"

namespace plab::cli {
namespace {

struct ToyOptions {
    std::string values = "2,4,8,10";
    std::string queries;  // default: all 1
    std::string keys;     // default: all 1
    std::string chunks = "all";
    std::string backend = "cpu-ref";
    std::string mask = "causal";
    bool json = false;
};

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void run(const ToyOptions& o) {
    ToyInput in;
    in.values = parse_float_list(o.values, "--values");
    const std::size_t n = in.values.size();
    in.queries =
        o.queries.empty() ? std::vector<float>(n, 1.0f) : parse_float_list(o.queries, "--queries");
    in.keys = o.keys.empty() ? std::vector<float>(n, 1.0f) : parse_float_list(o.keys, "--keys");
    in.validate();
    const int t = in.n_tokens();

    // The toy has no tokenizer (docs:bos cannot apply) and one head (ALiBi slope 1/256).
    const std::vector<int32_t> positions(static_cast<std::size_t>(t), 0);
    MaskContext mc;
    mc.tokens = positions;
    mc.n_heads = 1;
    const BoundMask bound = make_mask(o.mask, mc);
    const Mask mask = bound.view();
    std::vector<ChunkPlan> plans;
    int refused = 0;
    if (o.chunks == "all") {
        PLAB_CHECK(t <= 12, "--chunks all: " << t
                                             << " positions have too many plans to list; give a "
                                                "plan such as 2,2 or a chunk size");
        // Every plan the mask allows (a prefix-LM prefix must stay in one chunk).
        for (ChunkPlan& p : all_chunk_plans(t)) {
            try {
                check_plan_for_mask(mask, p);
                plans.push_back(std::move(p));
            } catch (const Error&) {
                ++refused;
            }
        }
    } else {
        plans.push_back(parse_chunk_plan(o.chunks, t));
        check_plan_for_mask(mask, plans.back());  // refused with the rule and a plan that works
    }
    auto backend = make_backend(o.backend);
    const ToyRun full = run_toy(*backend, in, ChunkPlan{{t}}, mask);
    std::vector<ToyRun> runs;
    bool all_equal = true;
    for (const ChunkPlan& p : plans) {
        runs.push_back(run_toy(*backend, in, p, mask));
        all_equal = all_equal && bitwise_equal(runs.back().outputs, full.outputs);
    }

    if (o.json) {
        nlohmann::json j;
        j["backend"] = backend->name();
        j["mask"] = o.mask;
        j["plans_refused_by_mask"] = refused;
        j["values"] = in.values;
        j["queries"] = in.queries;
        j["keys"] = in.keys;
        j["full"] = full.outputs;
        j["probs"] = full.probs;
        nlohmann::json exacts = nlohmann::json::array();
        for (int p = 0; p < t; ++p) exacts.push_back(toy_exact_output(in, p, mask));
        j["exact"] = exacts;
        nlohmann::json chunked = nlohmann::json::array();
        for (const ToyRun& r : runs) {
            chunked.push_back({{"plan", r.plan.to_string()},
                               {"outputs", r.outputs},
                               {"bitwise_equal_to_full", bitwise_equal(r.outputs, full.outputs)}});
        }
        j["chunked"] = chunked;
        j["all_bitwise_equal"] = all_equal;
        print_json(j);
        return;
    }
    if (bound.is_causal()) {
        std::cout << "Toy example: one head, head dimension 1, causal attention (backend "
                  << backend->name() << ")\n"
                  << "Query p attends to keys 0..p only; weights are softmax(q_p * k_j) over "
                     "those.\n\n";
    } else {
        // The score each weight comes from, as the mask's modifiers change it
        // (core/mask.h: ALiBi adds -slope * distance, soft-capping squashes).
        const Mask m = bound.view();
        std::string score = "q_p * k_j";
        if (m.alibi) score += " - slope * |p - j|";
        if (m.softcap > 0) score = "cap * tanh((" + score + ") / cap)";
        std::cout << "Toy example: one head, head dimension 1, mask " << o.mask << " (backend "
                  << backend->name() << ")\n"
                  << "Query p attends to the keys the mask lets it see; weights are softmax("
                  << score << ") over those.\n\n";
    }
    std::cout << "  pos        q        k        v   output (full prefill)   exact\n";
    for (int p = 0; p < t; ++p) {
        std::printf("  %3d %8s %8s %8s   %-22s  %s\n", p, exact(in.queries[p]).c_str(),
                    exact(in.keys[p]).c_str(), exact(in.values[p]).c_str(),
                    exact(full.outputs[p]).c_str(), toy_exact_output(in, p, mask).c_str());
    }
    std::cout << "\nChunked prefill: each chunk's queries read earlier keys from the KV cache.\n";
    for (const ToyRun& r : runs) {
        std::printf("  plan %-10s outputs", r.plan.to_string().c_str());
        for (float x : r.outputs) std::printf(" %s", exact(x).c_str());
        std::printf("   bitwise equal to full: %s\n",
                    bitwise_equal(r.outputs, full.outputs) ? "yes" : "NO");
    }
    if (runs.size() == 1) {
        std::cout << "\nThe chunk plan " << runs[0].plan.to_string()
                  << (all_equal ? " is" : " is NOT") << " bitwise equal to the full prefill.\n";
    } else {
        std::cout << "\n"
                  << (all_equal ? "All " : "NOT all ") << runs.size()
                  << " chunk plans are bitwise equal to the full prefill.\n";
    }
    if (refused > 0) {
        std::cout << refused << " plans were refused: they split the mask's bidirectional part, "
                  << "where a query needs keys after its chunk.\n";
    }
    if (!all_equal) throw Error("toy: a chunked run differs from the full run");
}

}  // namespace

void add_toy_command(CLI::App& app) {
    auto o = std::make_shared<ToyOptions>();
    CLI::App* cmd = app.add_subcommand("toy", "the [2,4,8,10] attention example, full and chunked");
    cmd->add_option("--values", o->values, "values v_p, one per position")->capture_default_str();
    cmd->add_option("--queries", o->queries, "queries q_p (default: all 1)");
    cmd->add_option("--keys", o->keys, "keys k_p (default: all 1)");
    cmd->add_option("--chunks", o->chunks,
                    "'all' (every chunk plan), or one plan: 'full', '2', '1,3'")
        ->capture_default_str();
    cmd->add_option("--backend", o->backend, "backend running the attention op")
        ->capture_default_str();
    add_mask_option(cmd, o->mask);
    cmd->add_flag("--json", o->json, "machine-readable output");
    cmd->callback([o] { run(*o); });
}

}  // namespace plab::cli
