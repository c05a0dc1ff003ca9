#include "runtime/drafter.h"

#include <algorithm>
#include <span>

#include "core/error.h"
#include "runtime/speculative_rule.h"

namespace plab {

DraftSource parse_draft_source(const std::string& text) {
    DraftSource d;
    d.text = text;
    if (text == "ngram") {
        d.ngram = kDefaultNgram;
        return d;
    }
    if (text.rfind("ngram:", 0) == 0) {
        const std::string n = text.substr(6);
        const bool digits =
            !n.empty() && n.size() <= 2 &&
            std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; });
        const int value = digits ? std::stoi(n) : 0;
        PLAB_CHECK(value >= 1 && value <= 16,
                   "--draft " << text
                              << ": ngram:N takes N from 1 to 16 (the "
                                 "length of the n-gram looked up), e.g. ngram:3");
        d.ngram = value;
        return d;
    }
    PLAB_CHECK(!text.empty(), "--draft needs a source: ngram[:N] or a draft model file");
    d.model = text;
    return d;
}

Draft NgramDrafter::propose(const std::vector<int32_t>& context, int k) {
    Draft d;
    const int len = static_cast<int>(context.size());
    if (k <= 0 || len <= n_) return d;
    const std::span<const int32_t> tail(context.data() + len - n_, static_cast<std::size_t>(n_));
    // The most recent earlier occurrence: start i < len - n_ (not the tail itself).
    for (int i = len - n_ - 1; i >= 0; --i) {
        if (!std::equal(tail.begin(), tail.end(), context.begin() + i)) continue;
        for (int j = i + n_; j < len && static_cast<int>(d.guesses.size()) < k; ++j)
            d.guesses.push_back(context[static_cast<std::size_t>(j)]);
        break;
    }
    return d;
}

void check_draft_vocabulary(int draft_vocab, int target_vocab) {
    PLAB_CHECK(draft_vocab == target_vocab,
               "--draft model has a vocabulary of "
                   << draft_vocab << " tokens, the target " << target_vocab
                   << ": a draft must share the target's tokenizer (the same ids)");
}

namespace {
const DeviceModel& same_vocabulary(const DeviceModel& draft, int target_vocab) {
    check_draft_vocabulary(draft.config().vocab_size, target_vocab);
    return draft;
}
}  // namespace

ModelDrafter::ModelDrafter(const DeviceModel& model, int target_vocab, SessionOptions session,
                           SamplerOptions sampler)
    : session_(same_vocabulary(model, target_vocab), std::move(session)),
      sampler_(sampler),
      // Its own stream: the draft's draws never shift the target's.
      rng_(sampler.seed ^ 0x9e3779b97f4a7c15ull),
      max_seq_len_(model.config().max_seq_len) {}

Draft ModelDrafter::propose(const std::vector<int32_t>& context, int k) {
    Draft d;
    // In step with the target: every context token but the last in the cache.
    const int want = static_cast<int>(context.size()) - 1;
    if (session_.length() > want) session_.roll_back(want);
    if (session_.length() < want) {
        const std::span<const int32_t> missing(context.data() + session_.length(),
                                               static_cast<std::size_t>(want - session_.length()));
        session_.prefill(missing, parse_chunk_plan("full", static_cast<int>(missing.size())));
        ++forwards_;
    }
    k = std::min(k, max_seq_len_ - want);  // the draft's own context ends too
    int32_t last = context.back();
    for (int i = 0; i < k; ++i) {
        const std::vector<float> logits = session_.decode_step(last);
        ++forwards_;
        std::vector<double> q = sampling_distribution(logits, sampler_);
        last = draw_from(q, double(rng_() >> 11) * (1.0 / 9007199254740992.0));
        d.guesses.push_back(last);
        d.q.push_back(std::move(q));
    }
    return d;
}

}  // namespace plab
