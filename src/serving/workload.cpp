#include "serving/workload.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/random.h"
#include "serving/json_lines.h"

namespace plab {
namespace {

// 2^20: the longest max_seq_len a model may have (cli/common.h's prompt file
// limit says the same), so no count above it can be served.
constexpr long long kMaxWorkloadTokens = 1 << 20;

}  // namespace

Workload parse_workload(std::string_view text, const std::string& where) {
    static const std::string kExample =
        R"(; write one object per line, e.g. {"arrival_s": 0.5, "prompt": "...", )"
        R"("max_new_tokens": 32})";
    Workload w;
    w.source = where;
    for (const TextLine& line : split_lines(text)) {
        if (is_blank(line.text)) continue;
        const std::string at = where + " line " + std::to_string(line.number) + ": ";
        const nlohmann::json j = parse_object_line(line.text, at, kExample);
        check_known_keys(
            j,
            {"arrival_s", "prompt", "prompt_tokens", "prefix", "prefix_tokens", "max_new_tokens"},
            at,
            "the keys are \"arrival_s\", \"prompt\" or \"prompt_tokens\" (with \"prefix\" and "
            "\"prefix_tokens\"), and \"max_new_tokens\"");
        WorkloadRequest r;
        r.line = line.number;
        PLAB_CHECK(j.contains("arrival_s") && j["arrival_s"].is_number(),
                   at << "needs a number \"arrival_s\" (seconds from the start)");
        r.arrival_s = j["arrival_s"].get<double>();
        PLAB_CHECK(std::isfinite(r.arrival_s) && r.arrival_s >= 0,
                   at << "arrival_s " << r.arrival_s << " must be >= 0");
        const bool has_text = j.contains("prompt"), has_len = j.contains("prompt_tokens");
        PLAB_CHECK(has_text != has_len,
                   at << "give exactly one of \"prompt\" (text) or \"prompt_tokens\" (a length)");
        if (has_text) {
            PLAB_CHECK(j["prompt"].is_string() && !j["prompt"].get<std::string>().empty(),
                       at << "\"prompt\" must be a non-empty string");
            r.prompt = j["prompt"].get<std::string>();
        } else {
            PLAB_CHECK(is_whole_in_range(j["prompt_tokens"], 1, kMaxWorkloadTokens),
                       at << "prompt_tokens " << j["prompt_tokens"].dump()
                          << " must be a whole number between 1 and " << kMaxWorkloadTokens);
            r.prompt_tokens = j["prompt_tokens"].get<int>();
        }
        PLAB_CHECK(j.contains("prefix") == j.contains("prefix_tokens"),
                   at << "a shared prefix needs both \"prefix\" (its name) and \"prefix_tokens\" "
                         "(its length)");
        if (j.contains("prefix")) {
            PLAB_CHECK(has_len, at << "a shared prefix is a count of synthetic ids: give "
                                      "\"prompt_tokens\", not a text \"prompt\"");
            PLAB_CHECK(j["prefix"].is_string() && !j["prefix"].get<std::string>().empty(),
                       at << "\"prefix\" must be a non-empty string naming the shared prefix");
            r.prefix = j["prefix"].get<std::string>();
            PLAB_CHECK(is_whole_in_range(j["prefix_tokens"], 1, r.prompt_tokens),
                       at << "prefix_tokens " << j["prefix_tokens"].dump()
                          << " must be a whole number between 1 and the prompt's "
                          << r.prompt_tokens << " tokens");
            r.prefix_tokens = j["prefix_tokens"].get<int>();
        }
        if (j.contains("max_new_tokens")) {
            PLAB_CHECK(is_whole_in_range(j["max_new_tokens"], 1, kMaxWorkloadTokens),
                       at << "max_new_tokens " << j["max_new_tokens"].dump()
                          << " must be a whole number between 1 and " << kMaxWorkloadTokens);
            r.max_new_tokens = j["max_new_tokens"].get<int>();
        }
        if (!w.requests.empty()) {
            const WorkloadRequest& prev = w.requests.back();
            PLAB_CHECK(r.arrival_s >= prev.arrival_s,
                       at << "arrival_s " << r.arrival_s << " is before line " << prev.line << "'s "
                          << prev.arrival_s << "; sort the lines by arrival");
        }
        w.requests.push_back(std::move(r));
    }
    PLAB_CHECK(!w.requests.empty(), where << ": no request in the workload; give one JSON object "
                                             "per line");
    return w;
}

Workload generate_workload(const WorkloadGenerator& g) {
    PLAB_CHECK(std::isfinite(g.rate) && g.rate > 0,
               "request rate " << g.rate << " must be > 0 requests per second");
    PLAB_CHECK(g.requests >= 1, "requests " << g.requests << " must be at least 1");
    PLAB_CHECK(g.prompt_min >= 1 && g.prompt_min <= g.prompt_max,
               "prompt lengths " << g.prompt_min << ".." << g.prompt_max
                                 << " must satisfy 1 <= min <= max");
    PLAB_CHECK(g.new_min >= 1 && g.new_min <= g.new_max, "new token counts "
                                                             << g.new_min << ".." << g.new_max
                                                             << " must satisfy 1 <= min <= max");
    Workload w;
    std::ostringstream src;
    src << "Poisson arrivals at " << g.rate << "/s, seed " << g.seed;
    w.source = src.str();
    random::Engine rng(g.seed);
    double t = 0;
    for (int i = 0; i < g.requests; ++i) {
        WorkloadRequest r;
        if (i > 0) t += random::exponential(rng, g.rate);  // the first arrives at 0
        r.arrival_s = t;
        r.prompt_tokens = int(random::uniform_int(rng, g.prompt_min, g.prompt_max));
        r.max_new_tokens = int(random::uniform_int(rng, g.new_min, g.new_max));
        w.requests.push_back(r);
    }
    return w;
}

std::vector<int32_t> synthetic_prompt(const WorkloadRequest& w, std::size_t index, int vocab,
                                      std::uint64_t seed) {
    random::Engine rng(seed * 0x9e3779b97f4a7c15ULL + index);
    std::vector<int32_t> ids(static_cast<std::size_t>(w.prompt_tokens));
    for (int32_t& t : ids) t = int32_t(random::uniform_int(rng, 0, vocab - 1));
    if (w.prefix_tokens > 0) {
        // FNV-1a of the name: the prefix's own stream, whatever request names it.
        std::uint64_t h = 0xcbf29ce484222325ULL;
        for (unsigned char c : w.prefix) h = (h ^ c) * 0x100000001b3ULL;
        random::Engine prefix_rng(seed ^ h);
        for (int i = 0; i < w.prefix_tokens; ++i)
            ids[static_cast<std::size_t>(i)] =
                int32_t(random::uniform_int(prefix_rng, 0, vocab - 1));
    }
    return ids;
}

Workload long_prompt_workload(int long_prompt, int decoders, int new_tokens) {
    Workload w;
    w.source = "long-prompt experiment";
    for (int i = 0; i < decoders; ++i) {
        WorkloadRequest r;
        r.arrival_s = 0;
        r.prompt_tokens = 8;
        r.max_new_tokens = new_tokens;
        w.requests.push_back(r);
    }
    WorkloadRequest big;
    big.arrival_s = 1e-3;  // once the others decode
    big.prompt_tokens = long_prompt;
    big.max_new_tokens = 4;
    w.requests.push_back(big);
    return w;
}

}  // namespace plab
