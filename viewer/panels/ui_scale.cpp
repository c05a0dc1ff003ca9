// The UI scale (see ui_scale.h).
#include "panels/ui_scale.h"

#include "panels/ui_context.h"

namespace plab::viewer {

void set_ui_scale(ViewerState& state, float scale) {
    state.ui_scale = scale;
    ui_context_to_set().ui_scale = &state.ui_scale;
}

float ui_scale() {
    const UiContext* ui = ui_context();
    return ui != nullptr && ui->ui_scale != nullptr ? *ui->ui_scale : 1.0f;
}

}  // namespace plab::viewer
