// The attention ladder as host code sees it (kernels/attention_ladder.h has
// the device side): the rungs, one problem, what a run returns, and the
// runner in each build of the kernels. No CUDA or emulator header here.
#pragma once

#include <cstdint>
#include <vector>

#include "core/attention_shape.h"

namespace plab {

// The rungs, in ladder order.
enum class LadderRung { naive, online, tiled, flash };
inline constexpr LadderRung kLadderRungs[] = {LadderRung::naive, LadderRung::online,
                                              LadderRung::tiled, LadderRung::flash};
inline const char* ladder_rung_name(LadderRung r) {
    switch (r) {
        case LadderRung::naive:
            return "naive";
        case LadderRung::online:
            return "online";
        case LadderRung::tiled:
            return "tiled";
        case LadderRung::flash:
            return "flash";
    }
    return "?";
}

// One attention call on the host: q (C, H, Dh), the paged K/V pools, the
// block table, the shape (and mask) of the call.
struct LadderProblem {
    AttentionShape s;
    std::vector<int32_t> table;
    std::vector<float> q, k_pool, v_pool;
};

// What the emulated rungs counted (kernels/attention_ladder.h).
struct LadderCounts {
    long long kv_bytes = 0;  // K and V rows read from global memory
    long long flops = 0;     // executed floating-point operations
};

// One rung run: its output (C, H, Dh), its counts (emulated; zero natively)
// and the launch's wall time.
struct LadderRun {
    std::vector<float> out;
    LadderCounts counts;
    double seconds = 0;
};

// One rung on a host problem: upload, launch, download (attention_ladder.cu).
namespace gpu_native {
LadderRun run_attention_rung(LadderRung rung, const LadderProblem& problem);
}
namespace gpu_emulated {
LadderRun run_attention_rung(LadderRung rung, const LadderProblem& problem);
}

}  // namespace plab
