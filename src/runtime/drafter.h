// Where speculative decoding's guesses come from (runtime/speculative.h).
//
// What it teaches: any cheap guesser will do — the target checks every guess,
// so a bad draft costs time, never correctness. Two kinds:
//   - ngram:N, prompt lookup (Saxena 2023; vLLM's "ngram" speculator): find
//     the last N tokens' previous occurrence in the context and propose the
//     tokens that followed it. No model at all: it pays off where text repeats
//     (summaries, code edits, a story that reuses its names).
//   - a draft model: a smaller model with the same vocabulary, run one token
//     at a time on its own KV cache (a Session), kept in step with the
//     target's accepted tokens (its rejected guesses rolled back too).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/session.h"

namespace plab {

// --draft SOURCE as given: ngram[:N], or the path of a model file.
struct DraftSource {
    int ngram = 0;      // N of ngram:N; 0 = a draft model
    std::string model;  // the draft model's path
    std::string text;   // as given (printed, JSON "draft")
};
inline constexpr int kDefaultNgram = 3;
// Parses --draft: "ngram" (N = 3), "ngram:N" (1 <= N <= 16), anything else a
// model path. A malformed ngram is one plab::Error line naming the form.
DraftSource parse_draft_source(const std::string& text);
// A draft must share the target's token ids: one plab::Error line naming both
// vocabulary sizes when they differ.
void check_draft_vocabulary(int draft_vocab, int target_vocab);

// The guesses of one step and, for a draft model, the distribution each was
// drawn from (dense over the vocabulary, after temperature, top-k, top-p);
// empty q: point masses (prompt lookup).
struct Draft {
    std::vector<int32_t> guesses;
    std::vector<std::vector<double>> q;
};

class Drafter {
public:
    virtual ~Drafter() = default;
    // Up to k guesses for the tokens after `context` (prompt and tokens made
    // so far; its last token is not yet in the target's cache).
    virtual Draft propose(const std::vector<int32_t>& context, int k) = 0;
    // Forward passes the draft has run (0 for prompt lookup).
    virtual long long forwards() const { return 0; }
};

// Prompt lookup over the context (no model).
class NgramDrafter : public Drafter {
public:
    explicit NgramDrafter(int n) : n_(n) {}
    Draft propose(const std::vector<int32_t>& context, int k) override;

private:
    int n_;
};

// A draft model's guesses, drawn with the target's sampling settings (greedy:
// its argmax) from its own random stream.
class ModelDrafter : public Drafter {
public:
    // `model` must outlive the drafter; its vocabulary is checked against the
    // target's (`target_vocab`) with one line naming both sizes.
    ModelDrafter(const DeviceModel& model, int target_vocab, SessionOptions session,
                 SamplerOptions sampler);
    Draft propose(const std::vector<int32_t>& context, int k) override;
    long long forwards() const override { return forwards_; }

private:
    Session session_;
    SamplerOptions sampler_;
    std::mt19937_64 rng_;
    int max_seq_len_;
    long long forwards_ = 0;
};

}  // namespace plab
