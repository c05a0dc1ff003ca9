// The time axis under the timeline panels' lanes: ticks labelled from 0, as many as fit.
//
// What it teaches (lessons/05-ttft-is-not-prefill.md): both timelines, one request and
// four requests through one engine, are read against the same ruler, starting at the
// first arrival, so "TTFT is longer than prefill" is read off one scale.
#pragma once

#include <imgui.h>

namespace plab::viewer {

// A time axis of up to six ticks labelled from 0 at t_begin, as many as fit without
// their labels touching: x = x0 + (us - t_begin) / span * width, labels at axis_y (the
// timeline panels' shared ruler; its labels are recorded for the layout check).
void draw_time_axis(ImDrawList* dl, float x0, float width, float axis_y, double t_begin,
                    double span);

}  // namespace plab::viewer
