// `plab generate --speculate K --draft SOURCE`: what a lecturer shows of a
// speculative run — guesses, acceptance, tokens per target forward — beside
// plain decoding of the same prompt, timed in the same run.
// Lesson: lessons/18-speculative-decoding.md.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/kernel_choice.h"
#include "model/model_io.h"
#include "runtime/generate.h"
#include "runtime/loaded_model.h"
#include "serving/speculative_roofline.h"

namespace plab::cli {

// A draft model named by --draft MODEL, loaded for as long as the run needs it.
struct LoadedDraft {
    std::optional<Model> model;
    std::unique_ptr<LoadedModel> loaded;
};
// --speculate K --draft SOURCE as the runtime takes them (`given`: whether
// either flag was given; K 0 and nothing loaded when neither was). Each needs
// the other, one line. A draft model is loaded on `backend` with `kernels`.
SpeculativeOptions speculative_options(bool speculate_given, int k, bool draft_given,
                                       const std::string& draft, const std::string& backend,
                                       Kernels kernels, LoadedDraft& loaded);

// The counts of a run's speculation (JSON "speculative" of plab generate
// --prompts and plab serve, and the first keys of the one-prompt report).
nlohmann::json speculative_stats_json(const SpeculativeStats& s);
// One line of the same, for text output.
std::string speculative_stats_line(const SpeculativeStats& s);

struct SpeculativeReport {
    SpeculativeStats stats;        // the last warm run's (every run makes the same)
    bool greedy = true;            // temperature 0: the tokens must equal plain decoding's
    bool fastest_kernels = false;  // --kernels fastest: rows may follow the chunk's size
    bool same_tokens_as_plain = false;
    std::vector<int32_t> plain_tokens;
    double decode_tokens_per_s = 0;        // speculative, median of the warm runs
    double plain_decode_tokens_per_s = 0;  // plain decoding, same runs count, same process
    // With --hardware CARD --shape SHAPE: the curve on the roofline clock.
    std::string roofline;  // "llama3-8b bf16 on h100-sxm, roofline"
    double draft_ratio = 0;
    int context = 0;
    std::vector<SpeculativePoint> curve;
};
// The batches the roofline curve is drawn at.
inline const std::vector<int> kSpeculativeBatches = {1, 4, 16, 64, 256};

void print_speculative_text(const SpeculativeReport& r);
nlohmann::json speculative_json(const SpeculativeReport& r);

}  // namespace plab::cli
