// Self-checks: one property each scene's engine answer must have.
//
// What it teaches: a picture can lie; a check cannot. Every time the viewer
// asks the engine for a scene, it checks the answer and prints one line
// ("toy: chunked == full bitwise: yes"). Headless runs (tests, screenshots)
// exit non-zero when a line says "no", so a wrong picture never ships.
#pragma once

#include <string>

#include "snapshot.h"

namespace plab::viewer {

struct CheckResult {
    bool ok = false;
    std::string line;  // "<scene>: <property>: yes|no (<details>)"
};

// Chunked outputs have the bits of the full prefill (required of reference backends).
CheckResult check_toy(const ToySnapshot& toy);
// Rows sum to 1; future cells have probability 0 and score -inf.
CheckResult check_mask(const MaskSnapshot& mask);
// After every call the block table holds ceil(length/B) blocks; decode adds one slot.
CheckResult check_kv(const KvSnapshot& kv);
// Reference backends are bitwise equal to cpu-ref "full" for every plan.
CheckResult check_equivalence(const EquivalenceSnapshot& eq);
// TTFT and prefill are different spans, and TTFT contains prefill.
CheckResult check_timeline(const TimelineSnapshot& tl);

}  // namespace plab::viewer
