// `plab bench --attention-ladder` (cmd_bench_ladder.cpp), called by cmd_bench.cpp.
#pragma once

#include <cstdint>
#include <string>

namespace plab::cli {

struct LadderCliOptions {
    std::string model;                 // empty: the named shape
    std::string shape = "stories15m";  // --shape
    int length = 256;                  // queries of the prefill (--lengths, its first)
    std::uint64_t seed = 1;
    bool json = false;
};

void run_attention_ladder_bench(const LadderCliOptions& options);

}  // namespace plab::cli
