// The workloads serving benchmarks use, read as plab workloads, and a replayed
// workload written back out (`plab serve --workload FILE`, `--export-workload`).
//
// What it teaches: a serving result is only as good as its workload. Three
// formats, told apart by their first non-blank character and keys:
//   * plab's own JSON Lines (serving/workload.h): arrivals and lengths given.
//   * ShareGPT (a JSON array of {"conversations": [{"from": "human", "value":
//     ...}, {"from": "gpt", "value": ...}, ...]}), the chat logs vLLM's
//     benchmark_serving samples: the first human turn is the prompt, the
//     answer after it the output. Their lengths in tokens come from the turn's
//     "tokens" count when the file gives one, else from its words times
//     `tokens_per_word` (a stand-in for the shape's tokenizer, stated in the
//     workload's source); a conversation without a human turn followed by an
//     answer is skipped and counted.
//   * JSON Lines of {"input_len": 1024, "output_len": 128} (vLLM
//     benchmark_serving's random and sonnet datasets written out): lengths only.
// The two benchmark formats carry no arrival times: requests arrive as a
// Poisson process at `rate` from `seed`, as benchmark_serving's
// --request-rate draws them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "serving/workload.h"

namespace plab {

struct WorkloadFormatOptions {
    double rate = 4;               // arrivals per second for files without arrival times
    std::uint64_t seed = 1;        // of those arrivals
    double tokens_per_word = 1.3;  // ShareGPT turns without a "tokens" count
};

// Which format `text` is in: "plab", "sharegpt" or "input_len".
std::string workload_format(std::string_view text);

// Reads any of the three formats; one plab::Error line naming `where`, the
// line or conversation, and what is wrong.
Workload read_workload(std::string_view text, const std::string& where,
                       const WorkloadFormatOptions& options);

// `w` as plab JSON Lines: one line per request, its arrival, its length (or
// text) and shared prefix, its new tokens — what `--workload` reads back to
// the same replay, and what a script turns into a real engine's requests
// (prompt_tokens is benchmark_serving's input_len, max_new_tokens its
// output_len, arrival_s its send time).
std::string workload_jsonl(const Workload& w);

}  // namespace plab
