#include "serving/workload_formats.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/random.h"
#include "serving/json_lines.h"

namespace plab {
namespace {

constexpr long long kMaxTokens = 1 << 20;  // as serving/workload.cpp

// The first non-blank character after a byte order mark.
char first_char(std::string_view text) {
    if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
    for (char c : text)
        if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return c;
    return '\0';
}

// Poisson arrivals, the first at 0: benchmark_serving's --request-rate.
void add_arrivals(Workload& w, const WorkloadFormatOptions& o) {
    PLAB_CHECK(std::isfinite(o.rate) && o.rate > 0,
               w.source << " has no arrival times: they come from --rate, which must be > 0 "
                           "requests per second (got "
                        << o.rate << ")");
    random::Engine rng(o.seed ^ 0xa5a5a5a5a5a5a5a5ULL);
    double t = 0;
    for (std::size_t i = 0; i < w.requests.size(); ++i) {
        if (i > 0) t += random::exponential(rng, o.rate);
        w.requests[i].arrival_s = t;
    }
}

// A turn's length in tokens: its "tokens" count, else its words × the factor
// (at least one token for a non-empty turn).
int turn_tokens(const nlohmann::json& turn, double tokens_per_word, const std::string& at) {
    if (turn.contains("tokens")) {
        PLAB_CHECK(is_whole_in_range(turn["tokens"], 1, kMaxTokens),
                   at << "\"tokens\" " << turn["tokens"].dump()
                      << " must be a whole number between 1 and " << kMaxTokens);
        return turn["tokens"].get<int>();
    }
    std::istringstream words(turn["value"].get<std::string>());
    long long n = 0;
    for (std::string word; words >> word;) ++n;
    return static_cast<int>(
        std::min<double>(kMaxTokens, std::max(1.0, std::round(double(n) * tokens_per_word))));
}

Workload read_sharegpt(std::string_view text, const std::string& where,
                       const WorkloadFormatOptions& o) {
    PLAB_CHECK(std::isfinite(o.tokens_per_word) && o.tokens_per_word > 0,
               "--tokens-per-word " << o.tokens_per_word << " must be > 0");
    nlohmann::json all;
    try {
        all = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        PLAB_CHECK(false, where << ": not a ShareGPT JSON array (" << e.what()
                                << "); a file starting with '[' is read as ShareGPT");
    }
    PLAB_CHECK(all.is_array(), where << ": a ShareGPT file is one JSON array of conversations");
    Workload w;
    int skipped = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
        const std::string at = where + " conversation " + std::to_string(i) + ": ";
        const nlohmann::json& c = all[i];
        PLAB_CHECK(c.is_object(), at << a_type(c)
                                     << ", not a conversation object (a file starting with '[' "
                                        "is read as ShareGPT; a plab workload is one JSON object "
                                        "per line)");
        PLAB_CHECK(c.contains("conversations") && c["conversations"].is_array(),
                   at << "needs \"conversations\": [{\"from\": \"human\", \"value\": \"...\"}, "
                         "{\"from\": \"gpt\", \"value\": \"...\"}]");
        const nlohmann::json& turns = c["conversations"];
        for (const nlohmann::json& t : turns)
            PLAB_CHECK(t.is_object() && t.contains("from") && t["from"].is_string() &&
                           t.contains("value") && t["value"].is_string(),
                       at << "every turn needs a string \"from\" and a string \"value\"");
        // The first human turn with an answer after it.
        std::size_t k = 0;
        while (k + 1 < turns.size() && turns[k]["from"] != "human") ++k;
        if (k + 1 >= turns.size() || turns[k]["from"] != "human") {
            ++skipped;
            continue;
        }
        WorkloadRequest r;
        r.prompt_tokens = turn_tokens(turns[k], o.tokens_per_word, at);
        r.max_new_tokens = turn_tokens(turns[k + 1], o.tokens_per_word, at);
        r.line = static_cast<int>(i) + 1;
        w.requests.push_back(r);
    }
    PLAB_CHECK(!w.requests.empty(),
               where << ": no conversation has a human turn followed by an answer");
    std::ostringstream src;
    src << where << " (ShareGPT: " << w.requests.size() << " conversations, " << skipped
        << " skipped; turns without a token count at " << o.tokens_per_word
        << " tokens a word; Poisson arrivals at " << o.rate << "/s, seed " << o.seed << ")";
    w.source = src.str();
    add_arrivals(w, o);
    return w;
}

Workload read_input_len_lines(std::string_view text, const std::string& where,
                              const WorkloadFormatOptions& o) {
    static const std::string kExample = R"(; write one object per line, e.g. {"input_len": 1024, )"
                                        R"("output_len": 128})";
    Workload w;
    for (const TextLine& line : split_lines(text)) {
        if (is_blank(line.text)) continue;
        const std::string at = where + " line " + std::to_string(line.number) + ": ";
        const nlohmann::json j = parse_object_line(line.text, at, kExample);
        check_known_keys(j, {"input_len", "output_len"}, at,
                         "the keys are \"input_len\" and \"output_len\" (vLLM benchmark_serving's "
                         "request lengths)");
        WorkloadRequest r;
        r.line = line.number;
        for (const char* key : {"input_len", "output_len"})
            PLAB_CHECK(
                j.contains(key) && is_whole_in_range(j[key], 1, kMaxTokens),
                at << "\"" << key << "\" must be a whole number between 1 and " << kMaxTokens);
        r.prompt_tokens = j["input_len"].get<int>();
        r.max_new_tokens = j["output_len"].get<int>();
        w.requests.push_back(r);
    }
    PLAB_CHECK(!w.requests.empty(), where << ": no request in the workload");
    std::ostringstream src;
    src << where << " (input_len/output_len lines; Poisson arrivals at " << o.rate << "/s, seed "
        << o.seed << ")";
    w.source = src.str();
    add_arrivals(w, o);
    return w;
}

}  // namespace

std::string workload_format(std::string_view text) {
    if (first_char(text) == '[') return "sharegpt";
    for (const TextLine& line : split_lines(text)) {
        if (is_blank(line.text)) continue;
        return line.text.find("\"input_len\"") != std::string_view::npos ? "input_len" : "plab";
    }
    return "plab";
}

Workload read_workload(std::string_view text, const std::string& where,
                       const WorkloadFormatOptions& options) {
    const std::string format = workload_format(text);
    if (format == "sharegpt") return read_sharegpt(text, where, options);
    if (format == "input_len") return read_input_len_lines(text, where, options);
    return parse_workload(text, where);
}

std::string workload_jsonl(const Workload& w) {
    std::string out;
    for (const WorkloadRequest& r : w.requests) {
        nlohmann::ordered_json j;
        j["arrival_s"] = r.arrival_s;
        if (r.prompt_tokens > 0) {
            j["prompt_tokens"] = r.prompt_tokens;
            if (r.prefix_tokens > 0) {
                j["prefix"] = r.prefix;
                j["prefix_tokens"] = r.prefix_tokens;
            }
        } else {
            j["prompt"] = r.prompt;
        }
        j["max_new_tokens"] = r.max_new_tokens;
        out += j.dump() + "\n";
    }
    return out;
}

}  // namespace plab
