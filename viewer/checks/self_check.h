// Self-checks: one property each scene's engine answer must have.
//
// What it teaches: a picture can lie; a check cannot. Every time the viewer
// asks the engine for a scene, it checks the answer and prints one line
// ("kv: ... match the plan and B after every call: yes"), comparing the engine's
// answer with facts known without it. Headless runs (tests, screenshots)
// exit non-zero when a line says "no", so a wrong picture never ships.
#pragma once

#include <string>

#include "app/snapshot.h"
#include "checks/layout_record.h"

namespace plab::viewer {

struct CheckResult {
    bool ok = false;
    std::string line;  // "<scene>: <property>: yes|no (<details>)"
};

// The toy's outputs are the means known by hand (2, 3, 14/3, 6 for the default
// input): bitwise on reference backends, within a stated bound on fast ones; future
// keys get probability 0; chunked == full bitwise on reference backends.
CheckResult check_toy(const ToySnapshot& toy);
// The mask scene under any mask (self_check_mask.cpp): every row sums to 1; a
// cell the mask hides has probability exactly 0 and score -inf; a visible cell
// has a finite score and a probability above 0 (unless exp underflows: its
// score 80+ below the row's best); the tile map agrees with visible() on every
// cell (empty: none visible, full: all, partial: some) and the pair count is
// the visible cells'. A refused plan is named with the plan run instead.
CheckResult check_mask(const MaskSnapshot& mask);
// The mask panel's view (self_check_mask.cpp), against mask.view's fresh
// probes: the shown (layer, head) map has the float bits of a fresh probe of that
// layer and head (so ↓/↑ show that layer's values, not a neighbour's); the pinned
// query's listed keys are that fresh row's largest, in order, and their listed
// probabilities its values bit for bit; side by side, the highlighted cells are exactly
// those whose bits differ between the fresh probe and the second run, and none differ
// when both runs are on reference backends (chunked == full, bitwise, on any plan).
CheckResult check_mask_view(const MaskSnapshot& mask);
// After every engine call: the session's length is what the plan (or one decode
// step) implies; the block table holds ceil(length/B) blocks and only grows; the
// call's "kv append" events (one per layer) name the implied positions and the
// slots block_table[p/B]*B + p%B; no live slot is written twice. Under a
// window-type mask, exactly the full blocks whose every position the mask
// forgets (Mask::forgets) are given back (kFreedBlock), and blocks in use are
// the table's other entries.
CheckResult check_kv(const KvSnapshot& kv);
// After every step of the shared-pool scenario: each block's reference count
// equals the block-table entries that hold it; a shared block is named and at
// one logical position; blocks in use and cached free are the pool's counts;
// the named blocks written again are the pool's eviction count; a preempted
// request holds no block. After the last step every request has finished and
// no block is in use.
CheckResult check_serving(const ServingSnapshot& sv);
// Reference backends are bitwise equal to cpu-ref "full" for every plan; fast
// backends keep their promise: logits within 1e-5 of max |logit|, the same greedy
// token unless the top two logits are near-tied.
CheckResult check_equivalence(const EquivalenceSnapshot& eq);
// TTFT and prefill are different spans, and TTFT contains prefill.
CheckResult check_timeline(const TimelineSnapshot& tl);
// The Serving panel (self_check_replay.cpp): every request's spans are in time
// order without overlap and its queued span ends where its first span starts;
// its tokens over its spans are what its prompt, cache hits, new tokens and
// preemptions imply; every step is within the token budget; the drawn
// distributions' p50/p90/p99 are the report's summary.
CheckResult check_replay(const ReplaySnapshot& rp);
// The FlashAttention scene (self_check_flash.cpp), on the walk it draws: each row's m_old
// is the m the step before left, the max never goes down, the rescale is exp(m_old - m)
// (0 before the first key) and `rescaled` says when a later tile raised the max, l stays
// at 1 or more; every tile lies in the grid, no wider than the key tile, and its class
// agrees with the scores the mask left (empty: none visible, and no row changed; full:
// all); the rescales and skipped tiles counted are the steps'; the table after the last
// step shows each output, and the ulps are those between it and the whole softmax. On
// the toy, the whole softmax gives the means known by hand (2, 3, 14/3, 6) bitwise.
CheckResult check_flash(const FlashSnapshot& flash);
// What a frame laid out (self_check_layout.cpp), as a reader sees it: every
// window inside the display, none cut off or scrolled sideways; every text and control
// inside the part of the screen it is drawn into; wrapped text broken between words,
// never inside one ("positi/on"); every table column as wide as its widest word; chart
// labels inside their chart, apart, and crossed by no line; every colour a chart asks a
// legend for has an entry; every number shown for the step in view the same. The line
// names the first failures; "...: yes" or "...: NO".
CheckResult check_layout(const LayoutRecord& record);
// The window rules alone ("" when they pass): the --scale line's "nothing cut off".
std::string window_failures(const LayoutRecord& record);

}  // namespace plab::viewer
