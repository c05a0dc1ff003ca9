// What the panels find on ImGui's context while they draw: the UI scale and the frame's
// layout record.
//
// What it teaches: nothing about prefill. A helper deep inside a panel (a legend swatch,
// a probed line of text) has no ViewerState at hand and should not need one, just as
// ImGui's own GetStyle() needs none. What such helpers read hangs on ImGui's context,
// the one place ImGui keeps for an application's own data (io.UserData), rather than in
// a file-scope variable: a pointer to ViewerState::ui_scale (set_ui_scale, ui_scale.h)
// and, in headless runs, the LayoutRecord being filled (set_layout_record,
// layout_probe.h). Both are set by main().
#pragma once

namespace plab::viewer {

struct LayoutRecord;  // checks/layout_record.h

struct UiContext {
    const float* ui_scale = nullptr;  // ViewerState::ui_scale; nullptr: scale 1
    LayoutRecord* layout = nullptr;   // the frame's record; nullptr: not recording
};

// The current ImGui context's UiContext; nullptr when there is no ImGui context or
// nothing has been hung on it yet.
const UiContext* ui_context();
// The same, made and hung on the current ImGui context on first use (main's setters
// only); it is freed with the context (ImGui::DestroyContext).
UiContext& ui_context_to_set();

}  // namespace plab::viewer
