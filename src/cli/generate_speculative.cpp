#include "cli/generate_speculative.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"

namespace plab::cli {

namespace {

void print_speculative_curve(const SpeculativeReport& r) {
    const double alpha = r.stats.acceptance_rate();
    std::printf(
        "\nOn the roofline clock: %s, %d cached positions a sequence, acceptance rate %.3f\n"
        "(this run's), a draft step %.3f of a target step%s. Speed-up over plain decoding, "
        "tokens/s:\n",
        r.roofline.c_str(), r.context, alpha, r.draft_ratio,
        r.draft_ratio == 0 ? " (prompt lookup)" : " (the draft's weights over the target's)");
    std::printf("  batch  decode µs");
    int k_max = 0;
    for (const SpeculativePoint& p : r.curve) k_max = std::max(k_max, p.k);
    for (int k = 1; k <= k_max; ++k) std::printf("   K=%d", k);
    std::printf("   best K  verify at best K\n");
    for (std::size_t i = 0; i < r.curve.size(); i += static_cast<std::size_t>(k_max)) {
        const SpeculativePoint& first = r.curve[i];
        std::printf("  %5d  %9.1f", first.batch, first.decode_us);
        const SpeculativePoint* best = &first;
        for (int k = 0; k < k_max; ++k) {
            const SpeculativePoint& p = r.curve[i + static_cast<std::size_t>(k)];
            std::printf(" %5.2f", p.speed_up);
            if (p.speed_up > best->speed_up) best = &p;
        }
        if (best->speed_up > 1.0) {
            std::printf("   %6d  %s-bound\n", best->k, best->verify_bound.c_str());
        } else {
            std::printf("     none  (every K slower: the verify is %s-bound)\n",
                        best->verify_bound.c_str());
        }
    }
    std::printf(
        "A verify step costs about one decode step while the step is memory-bound; as the batch\n"
        "grows it turns compute-bound and costs up to K+1 steps: the speed-up turns there.\n");
}

}  // namespace

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
        if (r.fastest_kernels) {
            std::printf(
                "  (--kernels fastest: a verify chunk's products have K+1 rows, a decode step's\n"
                "  one, and the library may take another kernel for each, adding in another\n"
                "  order; a row's last bits may then differ, and at a near tie a token turns.\n"
                "  --kernels invariant keeps every row's bits whatever its chunk: lesson 16)\n");
        }
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
    if (!r.curve.empty()) print_speculative_curve(r);
}

SpeculativeOptions speculative_options(bool speculate_given, int k, bool draft_given,
                                       const std::string& draft, const std::string& backend,
                                       Kernels kernels, LoadedDraft& loaded) {
    SpeculativeOptions so;
    if (!speculate_given && !draft_given) return so;
    PLAB_CHECK(speculate_given,
               "--draft " << draft << " names the guesses of --speculate K; give both");
    so.k = k;
    so.draft = parse_draft_source(draft_given ? draft : "");
    check_speculative(so);
    if (!so.draft.model.empty()) {
        loaded.model = load_model(so.draft.model);
        loaded.loaded = std::make_unique<LoadedModel>(loaded.model->weights, backend, kernels);
        so.draft_model = &loaded.loaded->device();
    }
    return so;
}

nlohmann::json speculative_stats_json(const SpeculativeStats& s) {
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
    return j;
}

std::string speculative_stats_line(const SpeculativeStats& s) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%lld verify steps, %lld of %lld guesses accepted (acceptance rate %.3f), "
                  "%.3f tokens per verify step, %lld target forwards saved",
                  s.verify_steps, s.accepted, s.proposed, s.acceptance_rate(),
                  s.tokens_per_verify(), s.forwards_saved());
    return buf;
}

nlohmann::json speculative_json(const SpeculativeReport& r) {
    const SpeculativeStats& s = r.stats;
    nlohmann::json j = speculative_stats_json(s);
    j["greedy"] = r.greedy;
    if (r.greedy) j["same_tokens_as_plain"] = r.same_tokens_as_plain;
    j["plain_tokens"] = r.plain_tokens;
    j["decode_tokens_per_s"] = r.decode_tokens_per_s;
    j["plain_decode_tokens_per_s"] = r.plain_decode_tokens_per_s;
    j["speed_up"] =
        r.plain_decode_tokens_per_s > 0 ? r.decode_tokens_per_s / r.plain_decode_tokens_per_s : 0;
    if (!r.curve.empty()) {
        nlohmann::json roof;
        roof["clock"] = r.roofline;
        roof["context"] = r.context;
        roof["acceptance_rate"] = s.acceptance_rate();
        roof["draft_ratio"] = r.draft_ratio;
        for (const SpeculativePoint& p : r.curve) {
            roof["points"].push_back({{"batch", p.batch},
                                      {"k", p.k},
                                      {"decode_us", p.decode_us},
                                      {"verify_us", p.verify_us},
                                      {"draft_us", p.draft_us},
                                      {"verify_bound", p.verify_bound},
                                      {"tokens_per_verify", p.tokens_per_verify},
                                      {"speed_up", p.speed_up}});
        }
        j["roofline"] = roof;
    }
    return j;
}

}  // namespace plab::cli
