// The UiContext hung on ImGui's context (see ui_context.h).
#include "panels/ui_context.h"

#include <imgui.h>
#include <imgui_internal.h>  // context hooks: how a context frees what hangs on it

namespace plab::viewer {
namespace {

// Called by ImGui::DestroyContext: the UiContext goes with the context it hung on.
void free_ui_context(ImGuiContext*, ImGuiContextHook* hook) {
    IM_DELETE(static_cast<UiContext*>(hook->UserData));
}

}  // namespace

const UiContext* ui_context() {
    return ImGui::GetCurrentContext() ? static_cast<const UiContext*>(ImGui::GetIO().UserData)
                                      : nullptr;
}

UiContext& ui_context_to_set() {
    ImGuiIO& io = ImGui::GetIO();
    if (io.UserData == nullptr) {
        UiContext* made = IM_NEW(UiContext)();
        io.UserData = made;
        ImGuiContextHook on_shutdown;
        on_shutdown.Type = ImGuiContextHookType_Shutdown;
        on_shutdown.Callback = free_ui_context;
        on_shutdown.UserData = made;
        ImGui::AddContextHook(ImGui::GetCurrentContext(), &on_shutdown);
    }
    return *static_cast<UiContext*>(io.UserData);
}

}  // namespace plab::viewer
