#include "cli/generate_speculative.h"

#include <cstdio>

namespace plab::cli {

void print_speculative_text(const SpeculativeReport& r) {
    const SpeculativeStats& s = r.stats;
    const double alpha = s.acceptance_rate();
    std::printf("speculative decoding: up to %d guesses per verify step, draft %s\n", s.k,
                s.draft.c_str());
    std::printf(
        "  %lld verify steps (target forwards after the first token; plain decoding: %lld), "
        "%lld guesses proposed, %lld accepted: acceptance rate %.3f\n",
        s.verify_steps, s.tokens_after_first, s.proposed, s.accepted, alpha);
    std::printf(
        "  %.3f tokens per verify step (guesses accepted independently at that rate would give "
        "%.3f); %lld target forwards saved%s\n",
        s.tokens_per_verify(), SpeculativeStats::iid_tokens_per_verify(alpha, s.k),
        s.forwards_saved(),
        s.draft_forwards > 0
            ? (", for " + std::to_string(s.draft_forwards) + " draft forwards").c_str()
            : "");
    if (r.greedy) {
        std::printf("  greedy: the same tokens as plain decoding: %s\n",
                    r.same_tokens_as_plain ? "yes" : "NO");
    } else {
        std::printf(
            "  sampling: the tokens follow the target's distribution (speculative sampling's "
            "rule), not plain decoding's draws\n");
    }
    const double ratio =
        r.plain_decode_tokens_per_s > 0 ? r.decode_tokens_per_s / r.plain_decode_tokens_per_s : 0;
    std::printf(
        "  decode %.1f tokens/s, plain decoding %.1f tokens/s in the same run: %.2fx\n"
        "  (on this CPU the small model stays in cache, so a forward over K+1 rows costs more\n"
        "  than one row's and little or no speed-up is expected; while decode is memory-bound\n"
        "  on a GPU a verify step costs about one decode step: lesson 18)\n",
        r.decode_tokens_per_s, r.plain_decode_tokens_per_s, ratio);
}

nlohmann::json speculative_json(const SpeculativeReport& r) {
    const SpeculativeStats& s = r.stats;
    nlohmann::json j;
    j["k"] = s.k;
    j["draft"] = s.draft;
    j["verify_steps"] = s.verify_steps;
    j["proposed"] = s.proposed;
    j["accepted"] = s.accepted;
    j["acceptance_rate"] = s.acceptance_rate();
    j["accepted_per_step"] = s.accepted_per_step;
    j["tokens_per_verify"] = s.tokens_per_verify();
    j["iid_tokens_per_verify"] = SpeculativeStats::iid_tokens_per_verify(s.acceptance_rate(), s.k);
    j["target_forwards"] = s.verify_steps;
    j["plain_target_forwards"] = s.tokens_after_first;
    j["forwards_saved"] = s.forwards_saved();
    j["draft_forwards"] = s.draft_forwards;
    j["greedy"] = r.greedy;
    if (r.greedy) j["same_tokens_as_plain"] = r.same_tokens_as_plain;
    j["plain_tokens"] = r.plain_tokens;
    j["decode_tokens_per_s"] = r.decode_tokens_per_s;
    j["plain_decode_tokens_per_s"] = r.plain_decode_tokens_per_s;
    j["speed_up"] =
        r.plain_decode_tokens_per_s > 0 ? r.decode_tokens_per_s / r.plain_decode_tokens_per_s : 0;
    return j;
}

}  // namespace plab::cli
