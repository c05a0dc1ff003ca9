// The mask panel's view asked of the engine: the shown (layer, head), the
// pinned query's most-read keys and a second run side by side. See controller.h.
//
// What it teaches: a picture is only as good as its source. Each choice the student makes
// in the panel (↓ to the next layer, a click on a row, a second chunk plan) is asked of the
// engine again in a fresh Session with one probe, so the self-check can hold the drawn
// numbers to an answer they were not drawn from. Side by side, two chunk plans on cpu-ref
// must agree to the last bit (lesson 3: chunked == full); cpu-ref against a fast backend
// may differ in the last bits (lesson 4), and the panel counts and highlights those cells.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "app/controller.h"
#include "app/heatmap_view.h"
#include "checks/self_check.h"
#include "core/error.h"
#include "runtime/session.h"

namespace plab::viewer {
namespace {

// One (layer, head) probe of a fresh prefill of `tokens` under `mask` with `plan`.
std::vector<float> fresh_probe(const DeviceModel& model, const BoundMask& mask,
                               const std::vector<int32_t>& tokens, const ChunkPlan& plan, int layer,
                               int head) {
    ForwardProbes probes;
    probes.attention.push_back({layer, head});
    SessionOptions options;
    options.mask = mask;
    Session session(model, options);
    PrefillResult r = session.prefill(tokens, plan, probes);
    PLAB_ASSERT(r.attention.size() == 1);
    return std::move(r.attention[0].probs);
}

}  // namespace

void Controller::refresh_mask_view(const ViewerState& state, MaskSnapshot& mask, bool print_checks,
                                   bool& checks_failed) {
    if (!mask.ready) return;
    const int layer = std::clamp(state.attn_layer, 0, mask.n_layers - 1);
    const int head = std::clamp(state.attn_head, 0, mask.n_heads - 1);
    const std::string key = std::to_string(layer) + "/" + std::to_string(head) + "/" +
                            std::to_string(state.pinned_query) + "/" + state.compare_chunks + "/" +
                            state.compare_backend;
    if (mask.view.key == key) return;
    MaskViewSnapshot& out = mask.view;
    out = MaskViewSnapshot{};
    out.key = key;
    out.layer = layer;
    out.head = head;
    try {
        const int t = mask.n_tokens();
        PLAB_CHECK(state.pinned_query < t, "--pin-query " << state.pinned_query
                                                          << ": the prompt has " << t
                                                          << " tokens (rows 0.." << t - 1 << ")");
        // 1. The shown head again, from a Session of its own.
        out.probe = fresh_probe(loaded(state.backend).device(), mask.mask, mask.tokens, mask.plan,
                                layer, head);
        // 2. The pinned row's keys, ranked from what the panel draws (the snapshot's map).
        const AttentionMap* map = mask.map(layer, head);
        PLAB_ASSERT(map != nullptr);
        out.pinned = state.pinned_query;
        if (out.pinned >= 0)
            out.pinned_keys =
                top_keys(&map->probs[static_cast<size_t>(out.pinned) * t], t, kPinnedKeys);
        // 3. The second run: another plan on this backend, or this plan on another backend.
        if (!state.compare_chunks.empty() || !state.compare_backend.empty()) {
            out.compare_backend =
                state.compare_backend.empty() ? state.backend : state.compare_backend;
            out.compare_plan =
                state.compare_chunks.empty()
                    ? mask.plan
                    : allowed_plan(mask.mask.view(), parse_chunk_plan(state.compare_chunks, t),
                                   out.compare_refusal);
            out.compare = state.compare_chunks.empty() ? "backend " + out.compare_backend
                                                       : "plan " + out.compare_plan.to_string();
            const LoadedModel& other = loaded(out.compare_backend);
            out.compare_bitwise_promised =
                loaded(state.backend).backend().is_reference() && other.backend().is_reference();
            out.compare_probs =
                fresh_probe(other.device(), mask.mask, mask.tokens, out.compare_plan, layer, head);
            // The highlight: the shown map's bits against the other run's, cell by cell.
            out.differs.resize(map->probs.size());
            for (size_t i = 0; i < out.differs.size(); ++i) {
                out.differs[i] =
                    std::memcmp(&map->probs[i], &out.compare_probs[i], sizeof(float)) != 0;
                out.n_differs += out.differs[i];
                out.compare_max_abs =
                    std::max(out.compare_max_abs, std::fabs(map->probs[i] - out.compare_probs[i]));
            }
        }
        out.ready = true;
    } catch (const std::exception& e) {
        out.error = e.what();
    }
    const CheckResult r =
        out.ready ? check_mask_view(mask) : CheckResult{false, "mask view: error: " + out.error};
    if (print_checks) {
        std::printf("%s\n", r.line.c_str());
        std::fflush(stdout);
    }
    if (!r.ok) checks_failed = true;
}

}  // namespace plab::viewer
