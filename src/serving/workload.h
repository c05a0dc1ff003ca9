// Workload: the requests a serving experiment replays, and when they arrive.
//
// What it teaches: a server's latency depends on its load as much as on its
// model — when requests arrive (a Poisson process at a rate, as most serving
// benchmarks assume), how long their prompts are, how many tokens each wants.
// A workload is a JSON Lines file, one request per line:
//   {"arrival_s": 0.25, "prompt": "Once upon a time", "max_new_tokens": 32}
// or, instead of "prompt", "prompt_tokens": 300 (that many random token ids,
// drawn from the workload's seed) — or it is generated from a rate. A
// "prompt_tokens" request may name a shared prefix, "prefix": "system-a",
// "prefix_tokens": 2000: every request naming it starts with the same 2000
// ids (a system prompt, a shared document), the rest its own.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace plab {

struct WorkloadRequest {
    double arrival_s = 0;
    std::string prompt;     // text, encoded with the model's tokenizer (BOS first)
    int prompt_tokens = 0;  // > 0: that many random ids instead of a text prompt
    int max_new_tokens = 32;
    int line = 0;           // 1-based line of the file it came from (0: generated)
    std::string prefix;     // with prompt_tokens: the name of a prefix shared with others
    int prefix_tokens = 0;  // ... its length: the first ids, the same for every request naming it
};

struct Workload {
    std::vector<WorkloadRequest> requests;  // sorted by arrival
    std::string source;                     // file name, or how it was generated
};

// Parses JSON Lines; each problem is one plab::Error naming `where`, the line
// and what is wrong (unsorted arrivals, negative lengths, malformed JSON, ...).
Workload parse_workload(std::string_view text, const std::string& where);

struct WorkloadGenerator {
    double rate = 4;  // requests per second, Poisson arrivals (exponential gaps)
    int requests = 16;
    std::uint64_t seed = 1;
    int prompt_min = 16, prompt_max = 128;  // prompt tokens, uniform
    int new_min = 8, new_max = 32;          // new tokens, uniform
};
Workload generate_workload(const WorkloadGenerator& g);

// The ids of a "prompt_tokens" request (index `index` of its workload): drawn
// from `seed` and the index in [0, vocab), the first prefix_tokens from its
// prefix's name instead — the same for every request naming that prefix.
std::vector<int32_t> synthetic_prompt(const WorkloadRequest& w, std::size_t index, int vocab,
                                      std::uint64_t seed);

// The long-prompt experiment: `decoders` short requests
// start decoding, then one prompt of `long_prompt` tokens arrives among them.
Workload long_prompt_workload(int long_prompt, int decoders, int new_tokens);

}  // namespace plab
