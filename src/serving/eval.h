// Evaluation of a trained model on its held-out split: what did it learn?
//
// What it teaches: three ways to look at a small language model, from the
// outside in.
//   1. Next-token accuracy and loss (mean cross-entropy, nats) on held-out
//      stories: how well it predicts text it never saw.
//   2. Templated completions ("Then Ben gave the kite back to" -> " Lily"):
//      the answer is a name mentioned earlier, so the model must look back.
//   3. Attention heads, read through the engine's attention probes:
//      * induction score (Olsson et al. 2022): on [BOS] s s, where s is a
//        sequence of random tokens, the mean attention a query in the second
//        copy pays to the token *after* its previous occurrence — the key a
//        copying head needs;
//      * previous-token score: on held-out text, the mean attention a query
//        pays to the position just before it.
//
// Held-out data lives beside the model: <model>/eval/heldout.txt (one story
// a line) and <model>/eval/completions.tsv (family, prompt, answer), written
// by assets/recipe/train.py from a seed the training split never used.
//
// Left out: sampling-based metrics, calibration, per-token breakdowns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/tokenizers/tokenizer.h"
#include "runtime/device_model.h"
#include "runtime/session.h"

namespace plab {

struct EvalOptions {
    std::string heldout_path;  // one story per line; empty = skip 1 and the previous-token score
    std::string completions_path;  // "family\tprompt\tanswer" lines; empty = skip 2
    int max_stories = 200;         // held-out stories used for loss/accuracy
    int max_completions = 300;
    int induction_len = 32;    // random tokens per copy
    int induction_trials = 8;  // random sequences averaged
    int prev_token_stories = 40;
    std::uint64_t seed = 1;
    // The attention mask of every prefill (runtime/mask_grammar.h), bound to each prompt.
    std::string mask = "causal";
};

struct HeadScore {
    int layer = 0;
    int head = 0;
    double induction = 0;       // mean attention on "the token after the previous occurrence"
    double previous_token = 0;  // mean attention on the position before the query
};

struct CompletionFamily {
    std::string family;
    int correct = 0;
    int total = 0;
};

struct CompletionExample {
    std::string prompt_tail;  // the last words of the prompt
    std::string expected;
    std::string got;
};

struct EvalReport {
    int n_stories = 0;
    long long n_predictions = 0;  // next-token predictions scored
    double next_token_accuracy = 0;
    double loss = 0;  // mean cross-entropy in nats
    int completions_correct = 0;
    int completions_total = 0;
    std::vector<CompletionFamily> families;
    std::vector<CompletionExample> wrong;  // the first few misses, for a person to read
    std::vector<HeadScore> heads;          // every (layer, head), layer-major
    HeadScore best_induction;
    HeadScore best_previous_token;

    double completion_accuracy() const {
        return completions_total > 0 ? double(completions_correct) / completions_total : 0.0;
    }
};

// The head scorers, pure functions of one head's attention map (a probe of a
// prefill: row i is query position query_pos0 + i, column k is key position k)
// and the token ids at those positions. No model runs here, so they are tested
// on synthetic maps (tests/model/test_eval.cpp). Each adds to a running
// mean, so scores over many prompts weigh every query equally.
struct AttentionMean {
    double sum = 0;       // attention weights added
    long long count = 0;  // how many were added
    double value() const { return count > 0 ? sum / double(count) : 0.0; }
};

// Previous-token: for every query t >= 1, the attention it pays to key t-1.
void add_previous_token_attention(const AttentionMap& map, AttentionMean& mean);

// Induction: for every query whose token occurred earlier, the attention it
// pays to the key just after that token's most recent earlier occurrence.
// `ids` holds the token of every key position (at least n_keys of them).
void add_induction_attention(const AttentionMap& map, const std::vector<int32_t>& ids,
                             AttentionMean& mean);

// The default held-out files of a model directory (they may not exist).
EvalOptions default_eval_options(const std::string& model_dir);

EvalReport evaluate(const DeviceModel& model, const Tokenizer& tokenizer,
                    const EvalOptions& options);

}  // namespace plab
