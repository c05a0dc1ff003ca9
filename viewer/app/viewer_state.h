// ViewerState: what the person at the screen has chosen, owned by main().
//
// What it teaches: nothing about prefill itself; it is the one place where the
// viewer keeps state between frames (inputs sent to the engine, the step
// cursor, view options, GL textures), so panels stay free functions
// draw_<panel>(const Snapshot&, ViewerState&) with no hidden statics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "app/heatmap_view.h"
#include "app/serving_replay.h"
#include "app/snapshot.h"
#include "toy/toy.h"

namespace plab::viewer {

// Which parts of the Snapshot must be asked of the engine again.
struct Dirty {
    bool toy = true, mask = true, kv = true, equivalence = true, timeline = true;
    bool serving = true;  // the shared-pool scenario (KV and timeline panels)
    bool replay = true;   // the Serving panel's workload replay
    bool flash = true;    // the FlashAttention panel's tiled walk
    void all() { toy = mask = kv = equivalence = timeline = serving = replay = flash = true; }
};

// The Mask panel's picker (panel_mask_explorer.cpp): up to two masks and how
// they compose; the spec text is built from them and sent to the engine.
struct MaskExplorer {
    int kind[2] = {1, -1};   // index into the picker's kinds; second: -1 = none
    int a[2] = {8, 4};       // first parameter (W, L, P, documents)
    int b[2] = {2, 2};       // second parameter (sinks S, spacing D)
    bool use_or = false;     // compose with OR ('|') instead of AND ('+')
    bool alibi = false;      // score modifier '+alibi'
    int softcap = 0;         // score modifier '+softcap:C'; 0 = none
    bool paint = false;      // a click on the heatmap toggles that cell (a custom mask)
    int paint_version = 0;   // bumped by every painted cell (the file's name stays the same)
    char text[256] = "";     // the spec as shown (editable)
    std::string text_error;  // why the edited text was not taken
    std::string synced;      // the spec `text` was last filled from
};

// A texture holding one attention heatmap, re-uploaded when its key changes.
struct HeatmapTexture {
    unsigned int id = 0;  // GL texture name; 0 = none yet
    int width = 0, height = 0;
    int cell_px = 1;  // texture pixels per heatmap cell
    std::string key;  // what it shows: layer, head, prompt, plan, colour scale
};

// ViewerState::stage before anyone chose one: the scene's opening step (step_view): its
// end, or in the KV panel's shared pool the first step that shares the most blocks
// (serving_scenario.h's opening_stage), so a newcomer sees sharing, not the last step's
// empty pool.
inline constexpr int kOpeningStage = -1;

struct ViewerState {
    Scene scene = Scene::kToy;

    // ---- what the engine is asked (a change marks `dirty`) --------------------
    std::string prompt;
    int prompt_tokens = 0;     // > 0: cut (or repeat) the tokenized prompt to this many tokens
    std::string chunks = "8";  // chunk plan text for the model scenes: "full", "8", "3,1,4"
    int chunk_size = 8;        // the slider; 0 = full
    std::string backend = "cpu-ref";
    // The attention mask of the mask, KV and timeline scenes (runtime/mask_grammar.h
    // grammar, as `plab --mask`): the engine runs under it, the panels draw it.
    std::string mask = "causal";
    // Tile size of the Mask panel's tile map. The fast kernels use 32; the default
    // prompt is about 30 tokens, so 8 shows a map with every kind of tile.
    int mask_tile = 8;
    MaskExplorer explorer;
    ToyInput toy;
    std::string toy_chunks = "2";
    // Keys per tile of the FlashAttention panel's walk (`plab flash --tile`): 2 on the
    // 4-position toy takes each query's keys in two tiles, so a later tile can rescale.
    int flash_tile = 2;
    // The FlashAttention panel walks a model head instead of the toy: the loaded model on
    // the prompt, chunk plan and mask of the model scenes, head attn_head of layer
    // attn_layer, in the gpu kernel's order (run_flash_head). Set by --layer or --head on
    // the command line, or the panel's "walk" switch.
    bool flash_model_head = false;
    // Keys per tile of a model head's walk; 0: the gpu kernel's own (--flash-tile when given).
    int flash_head_tile = 0;
    // B of the KV panel. 16 (vLLM's default) against the default chunk size 8:
    // every other chunk starts inside a half-filled block, the case a paged cache
    // must get right (the chunk continues that block, the table only grows).
    int block_size = 16;
    int decode_steps = 4;  // decode steps after prefill in the KV panel
    // Speculative decoding in the KV panel (runtime/speculative.h): each decode
    // step verifies up to `speculate` guesses of prompt lookup over the last
    // `draft_ngram` tokens; 0: plain decode steps.
    int speculate = 0;
    int draft_ngram = 1;
    int new_tokens = 8;  // tokens the timeline's request generates
    // The shared-pool scenario: four requests through one Engine (serving_scenario.h).
    int serving_block_size = 4;  // B of its pool: small, so the prompt spans several blocks
    int serving_kv_blocks = 0;   // blocks in its pool; 0 = the scenario's default
    bool serving_prefix_cache = true;
    int serving_step_tokens = 16;  // token budget of one engine step
    // The Serving panel: a Poisson workload through plab::serve (serving_replay.h).
    ReplayOptions replay;
    Dirty dirty;
    bool slow_refresh_announced = false;  // a "computing..." frame was shown before a slow refresh

    // ---- the step cursor: `stage` engine calls done, plus `layer` layers of the next
    int stage = kOpeningStage;  // panels clamp it
    int layer = 0;
    bool playing = false;
    double play_clock = 0;  // seconds since the last automatic step
    float seconds_per_step = 0.75f;

    // ---- view options ----------------------------------------------------------
    int attn_layer = 0;
    int attn_head = 0;
    bool sqrt_colours = true;  // colour by sqrt(probability): small weights stay visible
    bool timeline_to_first_token = false;  // timeline: zoom onto request start .. first token
    // KV and timeline panels: several requests through one engine (the shared
    // pool) instead of one sequence.
    bool serving_view = false;
    HeatmapTexture heatmap;
    // text and scale. The model directory the viewer loaded (the "command for
    // this view" names it) and the control bar's Reset button as last drawn, in pixels
    // (the --scale self-check measures a real widget, not the style's numbers).
    std::string model_dir;
    std::vector<int32_t> prompt_ids;  // Controller::encode of the prompt (main keeps it current)
    float reset_button_w = 0, reset_button_h = 0;
    // The UI scale (--scale x the monitor's content scale; Ctrl +/-/0 change it), set by
    // main() through set_ui_scale: px() multiplies the panels' own pixel constants by it
    // (panels/ui_scale.h says how px() finds it).
    float ui_scale = 1.0f;
    // the mask panel's heatmap zoomed and panned (span 0: fit, or the asked zoom),
    // the query row pinned by a click, and a second run beside it.
    HeatmapView heatmap_view;
    int heatmap_view_tokens = 0;     // the prompt length T it was sized for
    float zoom = 1;                  // asked zoom (--zoom), applied when the view is sized
    float zoom_q = -1, zoom_k = -1;  // and its centre cell (-1: the pinned row, or middle)
    int pinned_query = -1;           // -1 = none
    std::string compare_chunks;      // "" = no second run; else its chunk plan
    std::string compare_backend;     // "" = the same backend; else the second run's
    HeatmapTexture heatmap_compare;  // the second run's texture
    HeatmapTexture flash_heatmap;    // the FlashAttention panel's masked cells (a model head)
    bool print_checks = false;       // print each scene's self-check line when refreshed
    bool checks_failed = false;
};

}  // namespace plab::viewer
