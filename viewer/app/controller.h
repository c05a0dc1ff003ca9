// Controller: the viewer's only door into the engine.
//
// What it teaches: how a tool drives prefill from outside — load a model,
// load it once per backend (runtime/loaded_model.h, the registry makes the
// backend), run a Session chunk by chunk with probes, read the
// cache's block table after each call, run a whole request under a Trace. Each
// refresh_* fills one part of the Snapshot and prints that scene's self-check
// (a property the engine's answer must have, e.g. "chunked == full bitwise").
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "app/snapshot.h"
#include "app/viewer_state.h"
#include "core/backend.h"
#include "model/model_io.h"
#include "runtime/engine.h"
#include "runtime/loaded_model.h"

namespace plab::viewer {

class Controller {
public:
    // Loads `model_path`; "" means the default model, and falls back to seeded
    // random weights (flagged in the Snapshot) when no trained model is shipped.
    explicit Controller(const std::string& model_path);
    // Uses an already loaded model (tests: a small seeded random model).
    explicit Controller(Model model);

    void fill_model_info(Snapshot& snap) const;

    // Re-asks the engine for every part marked dirty (and clears the marks).
    void refresh(const ViewerState& state, Dirty& dirty, Snapshot& snap, bool print_checks,
                 bool& checks_failed);

    void refresh_toy(const ViewerState& state, ToySnapshot& out);
    void refresh_mask(const ViewerState& state, MaskSnapshot& out);
    // mask_view.cpp: the mask panel's shown layer and head, pinned query and
    // side-by-side run, asked again when one of them differs from `mask.view`'s; then
    // checked (check_mask_view) and its line printed. A no-op until `mask` is ready.
    void refresh_mask_view(const ViewerState& state, MaskSnapshot& mask, bool print_checks,
                           bool& checks_failed);
    void refresh_kv(const ViewerState& state, KvSnapshot& out);
    // Four requests through one Engine with a small pool (serving_scenario.h):
    // three continue the prompt in the bar, one has a prompt of its own.
    void refresh_serving(const ViewerState& state, ServingSnapshot& out);
    void refresh_equivalence(const ViewerState& state, EquivalenceSnapshot& out);
    void refresh_timeline(const ViewerState& state, TimelineSnapshot& out);
    // A generated workload served on the virtual clock (serving_replay.h).
    void refresh_replay(const ViewerState& state, ReplaySnapshot& out);
    // flash_scene.cpp: the toy walked key tile by key tile (run_flash_toy, flash_walk_of),
    // the whole softmax on cpu-ref beside it; with state.flash_model_head a model head of
    // the prompt instead, in the gpu kernel's order (run_flash_head).
    void refresh_flash(const ViewerState& state, FlashSnapshot& out);

    const Model& model() const { return model_; }
    // The tokens the model scenes run: the prompt tokenized (BOS first), cut or repeated
    // to --prompt-tokens (the command for this view passes them as --tokens).
    std::vector<int32_t> encode(const ViewerState& state) const;

    // Prefill snapshots kept for the equivalence matrix before the cache is emptied.
    static constexpr std::size_t kMaxSnapshots = 64;
    std::size_t cached_snapshots() const { return snapshots_.size(); }

    // The head the attention panel opens on: <model dir>/viewer.json, e.g.
    // {"attention_layer": 1, "attention_head": 2, "why": "induction head"}; none when absent.
    struct HeadHint {
        int layer = 0, head = 0;
        std::string why;
    };
    std::optional<HeadHint> head_hint() const { return head_hint_; }

private:
    // The model loaded on each backend, on first use: every scene's sessions
    // run on it (each with a KV cache of its own).
    const LoadedModel& loaded(const std::string& backend_name);
    // The viewer's --mask spec bound to this prompt (docs:bos reads its BOS ids,
    // ALiBi its heads); a bad spec throws plab::Error with the CLI's one line.
    BoundMask mask_for(const ViewerState& state, const std::vector<int32_t>& tokens) const;
    // Shared, not borrowed: the cache may drop its entries while a caller still
    // holds one (the equivalence matrix keeps its reference across 16 lookups).
    std::shared_ptr<const PrefillSnapshot> prefill_snapshot(const std::string& backend,
                                                            const std::vector<int32_t>& tokens,
                                                            const ChunkPlan& plan);
    // flash_scene.cpp: refresh_flash for a model head (the mask scene's tokens, plan and mask).
    void refresh_flash_head(const ViewerState& state, FlashSnapshot& out);

    Model model_;
    bool random_model_ = false;
    std::optional<HeadHint> head_hint_;
    std::map<std::string, std::unique_ptr<LoadedModel>> loaded_;
    // backend|plan|tokens -> result; at most kMaxSnapshots, then emptied.
    std::map<std::string, std::shared_ptr<const PrefillSnapshot>> snapshots_;
};

// The plan the engine runs for `asked` under `mask`: `asked` itself, or, when
// check_plan_for_mask refuses it (a chunk boundary inside a prefix-LM prefix),
// nearest_valid_plan's, with the refusal's one line in `refusal`. Never
// silently: every scene shows (and headless prints) the refusal.
ChunkPlan allowed_plan(const Mask& mask, const ChunkPlan& asked, std::string& refusal);

// Reads a prompt file; throws plab::Error with the path when it cannot.
std::string read_prompt_file(const std::string& path);

}  // namespace plab::viewer
