// `plab toy`: the one-head, dimension-1 attention example, full and chunked.
// Lesson: lessons/01-toy-example.md.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

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

bool toy_bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Everything `plab toy` shows, text or JSON: the input, the full prefill, and
// one run per chunk plan with its verdict against the full one.
struct ToyResult {
    std::string backend;
    std::string mask_spec;  // as given on the command line
    BoundMask mask;
    ToyInput input;
    int refused = 0;                 // plans the mask does not allow (--chunks all)
    ToyRun full;                     // the whole prompt as one chunk
    std::vector<std::string> exact;  // (T): the exact output as a fraction, or ""
    std::vector<ToyRun> runs;        // one per chunk plan
    std::vector<bool> equal;         // (runs): bitwise equal to `full`
    bool all_equal = true;
};

ToyInput toy_input(const ToyOptions& o) {
    ToyInput in;
    in.values = parse_float_list(o.values, "--values");
    const std::size_t n = in.values.size();
    in.queries =
        o.queries.empty() ? std::vector<float>(n, 1.0f) : parse_float_list(o.queries, "--queries");
    in.keys = o.keys.empty() ? std::vector<float>(n, 1.0f) : parse_float_list(o.keys, "--keys");
    in.validate();
    return in;
}

// The plans to run: every plan of t positions the mask allows (counting the
// refused ones), or the one plan given.
std::vector<ChunkPlan> toy_plans(const std::string& chunks, const Mask& mask, int t, int* refused) {
    std::vector<ChunkPlan> plans;
    if (chunks != "all") {
        plans.push_back(parse_chunk_plan(chunks, t));
        check_plan_for_mask(mask, plans.back());  // refused with the rule and a plan that works
        return plans;
    }
    PLAB_CHECK(t <= 12, "--chunks all: " << t
                                         << " positions have too many plans to list; give a "
                                            "plan such as 2,2 or a chunk size");
    // Every plan the mask allows (a prefix-LM prefix must stay in one chunk).
    for (ChunkPlan& p : all_chunk_plans(t)) {
        try {
            check_plan_for_mask(mask, p);
            plans.push_back(std::move(p));
        } catch (const Error&) {
            ++*refused;
        }
    }
    return plans;
}

ToyResult compute_toy(const ToyOptions& o) {
    ToyResult r;
    r.input = toy_input(o);
    const ToyInput& in = r.input;
    const int t = in.n_tokens();
    // The toy has no tokenizer (docs:bos cannot apply) and one head (ALiBi slope 1/256).
    r.mask_spec = o.mask;
    r.mask = make_mask_one_head(o.mask, t);
    const Mask mask = r.mask.view();
    const std::vector<ChunkPlan> plans = toy_plans(o.chunks, mask, t, &r.refused);
    auto backend = make_backend(o.backend);
    r.backend = backend->name();
    r.full = run_toy(*backend, in, ChunkPlan{{t}}, mask);
    for (int p = 0; p < t; ++p) r.exact.push_back(toy_exact_output(in, p, mask));
    for (const ChunkPlan& p : plans) {
        r.runs.push_back(run_toy(*backend, in, p, mask));
        r.equal.push_back(toy_bitwise_equal(r.runs.back().outputs, r.full.outputs));
        r.all_equal = r.all_equal && r.equal.back();
    }
    return r;
}

nlohmann::json toy_json(const ToyResult& r) {
    nlohmann::json j;
    j["backend"] = r.backend;
    j["mask"] = r.mask_spec;
    j["plans_refused_by_mask"] = r.refused;
    j["values"] = r.input.values;
    j["queries"] = r.input.queries;
    j["keys"] = r.input.keys;
    j["full"] = r.full.outputs;
    j["probs"] = r.full.probs;
    j["exact"] = r.exact;
    nlohmann::json chunked = nlohmann::json::array();
    for (std::size_t i = 0; i < r.runs.size(); ++i) {
        chunked.push_back({{"plan", r.runs[i].plan.to_string()},
                           {"outputs", r.runs[i].outputs},
                           {"bitwise_equal_to_full", bool(r.equal[i])}});
    }
    j["chunked"] = chunked;
    j["all_bitwise_equal"] = r.all_equal;
    return j;
}

// The heading: which keys a query sees, and the score each weight comes from
// as the mask's modifiers change it (core/mask.h: ALiBi adds -slope * distance,
// soft-capping squashes).
void print_toy_heading(const ToyResult& r) {
    if (r.mask.is_causal()) {
        std::cout << "Toy example: one head, head dimension 1, causal attention (backend "
                  << r.backend << ")\n"
                  << "Query p attends to keys 0..p only; weights are softmax(q_p * k_j) over "
                     "those.\n\n";
        return;
    }
    const Mask m = r.mask.view();
    std::string score = "q_p * k_j";
    if (m.alibi) score += " - slope * |p - j|";
    if (m.softcap > 0) score = "cap * tanh((" + score + ") / cap)";
    std::cout << "Toy example: one head, head dimension 1, mask " << r.mask_spec << " (backend "
              << r.backend << ")\n"
              << "Query p attends to the keys the mask lets it see; weights are softmax(" << score
              << ") over those.\n\n";
}

void print_toy_text(const ToyResult& r) {
    print_toy_heading(r);
    const ToyInput& in = r.input;
    std::cout << "  pos        q        k        v   output (full prefill)   exact\n";
    for (int p = 0; p < in.n_tokens(); ++p) {
        std::printf("  %3d %8s %8s %8s   %-22s  %s\n", p, exact(in.queries[p]).c_str(),
                    exact(in.keys[p]).c_str(), exact(in.values[p]).c_str(),
                    exact(r.full.outputs[p]).c_str(), r.exact[std::size_t(p)].c_str());
    }
    std::cout << "\nChunked prefill: each chunk's queries read earlier keys from the KV cache.\n";
    for (std::size_t i = 0; i < r.runs.size(); ++i) {
        std::printf("  plan %-10s outputs", r.runs[i].plan.to_string().c_str());
        for (float x : r.runs[i].outputs) std::printf(" %s", exact(x).c_str());
        std::printf("   bitwise equal to full: %s\n", r.equal[i] ? "yes" : "NO");
    }
    if (r.runs.size() == 1) {
        std::cout << "\nThe chunk plan " << r.runs[0].plan.to_string()
                  << (r.all_equal ? " is" : " is NOT") << " bitwise equal to the full prefill.\n";
    } else {
        std::cout << "\n"
                  << (r.all_equal ? "All " : "NOT all ") << r.runs.size()
                  << " chunk plans are bitwise equal to the full prefill.\n";
    }
    if (r.refused > 0) {
        std::cout << r.refused << " plans were refused: they split the mask's bidirectional part, "
                  << "where a query needs keys after its chunk.\n";
    }
}

void run(const ToyOptions& o) {
    const ToyResult r = compute_toy(o);
    if (o.json) {
        print_json(toy_json(r));
        return;
    }
    print_toy_text(r);
    // After the table, so the differing run can be read.
    if (!r.all_equal) throw Error("toy: a chunked run differs from the full run");
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
