// `plab eval`: what the model learned, measured on its held-out split.
//
// Prints next-token accuracy and loss, templated-completion accuracy (the
// answer is a name mentioned earlier), and every head's induction and
// previous-token scores (definitions in src/serving/eval.h). `--json` for tests.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <memory>

#include "cli/common.h"
#include "runtime/engine.h"
#include "runtime/loaded_model.h"
#include "serving/eval.h"

namespace plab::cli {
namespace {

std::string fixed3(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", v);
    return buf;
}

struct EvalCliOptions {
    std::string model;
    std::string backend = "cpu";
    std::string heldout;
    std::string completions;
    int stories = 200;
    int completions_max = 300;
    int trials = 8;
    int induction_len = 32;
    std::string mask = "causal";
    bool json = false;
};

// Everything `plab eval` shows, text or JSON: the report of serving/eval.h
// and the run it came from.
struct EvalResult {
    std::string model;    // where the weights came from
    std::string backend;  // as the backend names itself
    std::string mask;     // the spec every prefill ran under
    std::string heldout;  // the held-out stories' file
    int induction_len = 0;
    EvalReport report;
};

EvalResult compute_eval(const EvalCliOptions& o) {
    const Model m = load_model_or_default(o.model);
    EvalOptions eo = default_eval_options(o.model.empty() ? default_model_path() : o.model);
    if (!o.heldout.empty()) eo.heldout_path = o.heldout;
    if (!o.completions.empty()) eo.completions_path = o.completions;
    eo.max_stories = o.stories;
    eo.max_completions = o.completions_max;
    eo.induction_trials = o.trials;
    eo.induction_len = o.induction_len;
    eo.mask = o.mask;
    const LoadedModel loaded(m.weights, o.backend);
    EvalResult r;
    r.report = evaluate(loaded.device(), *m.tokenizer, eo);
    r.model = m.source;
    r.backend = loaded.backend().name();
    r.mask = o.mask;
    r.heldout = eo.heldout_path;
    r.induction_len = eo.induction_len;
    return r;
}

nlohmann::json eval_json(const EvalResult& res) {
    const EvalReport& r = res.report;
    nlohmann::json j;
    j["model"] = res.model;
    j["backend"] = res.backend;
    j["mask"] = res.mask;
    j["heldout"] = res.heldout;
    j["stories"] = r.n_stories;
    j["predictions"] = r.n_predictions;
    j["next_token_accuracy"] = r.next_token_accuracy;
    j["loss"] = r.loss;
    j["completions"] = {{"correct", r.completions_correct},
                        {"total", r.completions_total},
                        {"accuracy", r.completion_accuracy()}};
    for (const auto& f : r.families)
        j["completions"]["families"][f.family] = {{"correct", f.correct}, {"total", f.total}};
    for (const auto& h : r.heads)
        j["heads"].push_back({{"layer", h.layer},
                              {"head", h.head},
                              {"induction", h.induction},
                              {"previous_token", h.previous_token}});
    j["best_induction"] = {{"layer", r.best_induction.layer},
                           {"head", r.best_induction.head},
                           {"score", r.best_induction.induction}};
    j["best_previous_token"] = {{"layer", r.best_previous_token.layer},
                                {"head", r.best_previous_token.head},
                                {"score", r.best_previous_token.previous_token}};
    return j;
}

// "Best induction head: layer 2 head 0 (0.659); best previous-token head: ...".
// A head scoring 0 is not a "best" anything (a window shorter than the
// distance to the earlier copy hides it from every head): say so instead.
std::string eval_best_heads_line(const EvalReport& r) {
    auto best = [](const char* what, int layer, int head, double score) {
        if (score > 0)
            return std::string("best ") + what + " head: layer " + std::to_string(layer) +
                   " head " + std::to_string(head) + " (" + fixed3(score) + ")";
        return std::string("no ") + what + " head (every head scores 0.000)";
    };
    std::string line = best("induction", r.best_induction.layer, r.best_induction.head,
                            r.best_induction.induction) +
                       "; " +
                       best("previous-token", r.best_previous_token.layer,
                            r.best_previous_token.head, r.best_previous_token.previous_token);
    line[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(line[0])));
    return line;
}

void print_eval_text(const EvalResult& res) {
    const EvalReport& r = res.report;
    std::printf("Model: %s (backend %s)\n", res.model.c_str(), res.backend.c_str());
    if (res.mask != "causal")
        std::printf("Mask: %s (the model was trained causal: this is an experiment)\n",
                    res.mask.c_str());
    if (r.n_stories > 0) {
        std::printf("Held-out next-token prediction (%d stories, %lld predictions):\n", r.n_stories,
                    r.n_predictions);
        std::printf("  accuracy %.1f%%, loss %.3f nats/token (perplexity %.2f)\n",
                    100 * r.next_token_accuracy, r.loss, std::exp(r.loss));
    }
    if (r.completions_total > 0) {
        std::printf("Templated completions (answer = a name mentioned earlier): %d/%d = %.1f%%\n",
                    r.completions_correct, r.completions_total, 100 * r.completion_accuracy());
        for (const auto& f : r.families)
            std::printf("  %-10s %d/%d\n", f.family.c_str(), f.correct, f.total);
        for (const auto& w : r.wrong)
            std::printf("  miss: \"%s\" -> expected \"%s\", got \"%s\"\n", w.prompt_tail.c_str(),
                        w.expected.c_str(), w.got.c_str());
    }
    std::printf(
        "Attention heads (induction: attention to the token after the previous occurrence\n"
        "  on [BOS] s s with %d random tokens; previous token: attention to position t-1):\n",
        res.induction_len);
    std::printf("  layer head  induction  prev-token\n");
    for (const auto& h : r.heads) {
        std::printf("  %5d %4d  %9.3f  %10.3f%s%s\n", h.layer, h.head, h.induction,
                    h.previous_token, h.induction >= 0.5 ? "  <- induction head" : "",
                    h.previous_token >= 0.5 ? "  <- previous-token head" : "");
    }
    std::printf("%s\n", eval_best_heads_line(r).c_str());
}

void run(const EvalCliOptions& o) {
    const EvalResult r = compute_eval(o);
    if (o.json) {
        print_json(eval_json(r));
    } else {
        print_eval_text(r);
    }
}

}  // namespace

void add_eval_command(CLI::App& app) {
    auto o = std::make_shared<EvalCliOptions>();
    CLI::App* cmd = app.add_subcommand(
        "eval",
        "held-out loss/accuracy, templated completions, induction and previous-token heads");
    add_model_option(cmd, o->model);
    cmd->add_option("--backend", o->backend, "backend to run on (cpu-ref, cpu, ...)");
    cmd->add_option("--heldout", o->heldout,
                    "held-out stories, one per line (default <model>/eval/heldout.txt)");
    cmd->add_option("--completions", o->completions,
                    "family<TAB>prompt<TAB>answer lines (default <model>/eval/completions.tsv)");
    cmd->add_option("--stories", o->stories, "held-out stories scored for loss and accuracy")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--max-completions", o->completions_max, "templated completions scored")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--trials", o->trials, "random repeated sequences for the induction score")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--induction-len", o->induction_len, "random tokens per copy")
        ->check(CLI::Range(2, 1000));
    add_mask_option(cmd, o->mask);
    cmd->add_flag("--json", o->json, "machine-readable output");
    cmd->callback([o] { run(*o); });
}

}  // namespace plab::cli
