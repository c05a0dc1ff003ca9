// The colours of the panels, so that a colour means the same thing in every panel.
//
// What it teaches: nothing about prefill by itself; the same orange is the current chunk,
// the same blue what is read from the KV cache, the same magenta a prefix-cache hit,
// wherever they appear. The probability colour scale of the heatmaps is here too.
// (tests/viewer/png_check.cpp looks for some of these colours in screenshots.)
#pragma once

#include <imgui.h>

namespace plab::viewer {

namespace colour {
inline constexpr ImU32 kMasked = IM_COL32(70, 70, 78, 255);  // future cells (hatched)
inline constexpr ImU32 kHatch = IM_COL32(120, 120, 132, 255);
inline constexpr ImU32 kPending = IM_COL32(40, 40, 46, 255);       // not computed yet
inline constexpr ImU32 kChunk = IM_COL32(255, 190, 60, 255);       // the current chunk
inline constexpr ImU32 kCached = IM_COL32(90, 170, 255, 255);      // read from the KV cache
inline constexpr ImU32 kDecode = IM_COL32(120, 220, 120, 255);     // a decode step
inline constexpr ImU32 kShared = IM_COL32(230, 110, 220, 255);     // prefix-cache hit
inline constexpr ImU32 kCachedFree = IM_COL32(70, 120, 130, 255);  // free, K/V still findable
inline constexpr ImU32 kRecompute = IM_COL32(215, 95, 95, 255);  // computed again after preemption
inline constexpr ImU32 kTileFull = IM_COL32(80, 160, 220, 255);  // tile map: all visible
inline constexpr ImU32 kTilePartial = IM_COL32(150, 110, 200, 255);  // tile map: some visible
inline constexpr ImU32 kTileEmpty = IM_COL32(34, 34, 40, 255);       // tile map: skipped
inline constexpr ImU32 kFreed = IM_COL32(150, 60, 110, 255);         // KV block a mask gave back
inline constexpr ImU32 kGood = IM_COL32(60, 170, 80, 255);
inline constexpr ImU32 kBad = IM_COL32(200, 60, 60, 255);
inline constexpr ImU32 kClose = IM_COL32(200, 150, 40, 255);
// Speculative decoding's verify steps (panel_kv_verify.cpp).
inline constexpr ImU32 kAccepted = IM_COL32(70, 200, 190, 255);  // a guess the target kept
inline constexpr ImU32 kRejected = IM_COL32(225, 95, 70, 255);   // the first guess it refused
inline constexpr ImU32 kDiscarded = IM_COL32(120, 70, 64, 255);  // a guess after that one
inline constexpr ImU32 kRolledBack = IM_COL32(95, 45, 45, 255);  // a slot a roll-back emptied
// Lesson mode (panel_lesson.cpp): headings, code boxes, Try buttons.
inline constexpr ImU32 kHeading = IM_COL32(255, 214, 120, 255);
inline constexpr ImU32 kCodeBox = IM_COL32(28, 32, 44, 255);
inline constexpr ImU32 kTryButton = IM_COL32(40, 120, 90, 255);
}  // namespace colour

// The colour of request `id` in the serving views (one per request, cycling).
ImU32 request_colour(int id);

// Probability in [0,1] -> colour (dark blue -> teal -> yellow, like viridis).
ImU32 probability_colour(float p, bool sqrt_scale);

}  // namespace plab::viewer
