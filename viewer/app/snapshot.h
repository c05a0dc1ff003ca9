// Snapshot: everything the panels draw, exactly as the engine returned it.
//
// What it teaches: the viewer is a window onto the engine, not a second
// engine. Every probability, output, block table and time below comes from a
// call into src/ (run_toy, Session::prefill with attention probes, the KV
// cache's block table, compare_snapshots, generate's Trace). The panels only
// lay these numbers out; they never recompute softmax, masks or sums.
// Used by every lesson the viewer illustrates (see each panel's "(?)").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/chunk_plan.h"
#include "runtime/engine.h"
#include "runtime/equivalence.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "serving/serve.h"
#include "toy/flash_walk.h"
#include "toy/toy.h"
#include "trace/trace.h"

namespace plab::viewer {

enum class Scene { kToy, kMask, kKv, kEquivalence, kTimeline, kServing, kFlash };
inline constexpr int kSceneCount = 7;

// "toy", "mask", "kv", "equivalence", "timeline", "serving", "flash": from the table of
// scenes (app/scenes.h), as are the titles and the names --scene takes.
const char* scene_name(Scene scene);
const char* scene_title(Scene scene);  // "Toy example", "Mask & attention", ...
std::optional<Scene> parse_scene(std::string_view name);

// Panel 1: the [2,4,8,10] toy, full and chunked, through one backend.
struct ToySnapshot {
    bool ready = false;
    std::string backend;
    bool reference = false;  // the backend promises bitwise results
    ToyInput input;
    ToyRun full;                // plan "full"
    ToyRun chunked;             // the chosen plan
    std::vector<bool> bitwise;  // (T): chunked output has the same bits as full
    bool all_bitwise = false;
    std::vector<std::string> exact;  // (T): "14/3 = mean of v0..v2" or ""
    std::string error;               // bad input, shown instead of the panel
};

// Panel 2's shown (layer, head), pinned query and side-by-side run, asked of
// the engine again whenever one of them changes, each in a Session of its own: the
// self-check (check_mask_view) holds what the panel draws to these fresh answers.
struct MaskViewSnapshot {
    bool ready = false;
    std::string key;  // the choices it was asked for (Controller::refresh_mask_view)
    int layer = 0, head = 0;
    std::vector<float> probe;  // (T, T): a fresh probe of (layer, head), same backend/plan/mask
    int pinned = -1;           // the pinned query row; -1 = none
    // The keys the panel lists for the pinned query: top_keys of the snapshot's row.
    std::vector<int> pinned_keys;
    // Side by side: the same prompt and mask run again with another plan or backend.
    std::string compare;  // "" = none; "plan 16" or "backend cpu": what differs
    std::string compare_backend;
    ChunkPlan compare_plan;
    std::string compare_refusal;  // the compare plan's refusal under the mask ("" = ran as asked)
    bool compare_bitwise_promised = false;  // both runs on reference backends
    std::vector<float> compare_probs;       // (T, T) of (layer, head) in the other run
    // (T, T): 1 where the panel highlights a cell, the shown map's float bits against the
    // other run's; every visible cell is compared, masked ones too (both exactly 0).
    std::vector<unsigned char> differs;
    long long n_differs = 0;
    float compare_max_abs = 0;  // largest |p - p'| over the cells: how far apart, not only whether
    std::string error;
};

// Panel 2: attention probabilities of every (layer, head) of one prefill, under a mask.
struct MaskSnapshot {
    bool ready = false;
    std::string backend;
    std::vector<int32_t> tokens;          // (T)
    std::vector<std::string> token_text;  // (T): how each token is shown
    BoundMask mask;                       // the mask the engine ran under (mask_spec.h)
    ChunkPlan asked_plan;                 // the plan asked for
    // The engine's refusal of `asked_plan` under this mask (check_plan_for_mask's
    // one line); then `plan` is nearest_valid_plan's, run instead. "" = ran as asked.
    std::string refusal;
    ChunkPlan plan;           // the plan the engine ran
    std::string first_token;  // the greedy next token after the prompt under this mask
    int32_t first_token_id = -1;
    std::vector<TokenProb> top;  // top_probs of the last position's logits (plab prefill --top)
    // The fast kernels' view of this mask (runtime/mask_grammar.h): tile_map of T
    // positions in tiles of `tile`, row-major (query tiles down, key tiles across).
    int tile = 0;
    std::vector<TileClass> tiles;
    long long visible_pairs = 0, causal_pairs = 0;  // count_visible_pairs; T(T+1)/2
    // Chunked == full for this mask and `plan`, on cpu-ref (a reference backend):
    // every position's logits of the chunked run have the same bits as the whole
    // prompt at once.
    bool chunked_equals_full = false;
    int n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
    std::vector<AttentionMap> maps;  // (L·H): probs and scores q·k/sqrt(Dh), each (T, T)
    double prefill_us = 0;
    std::string error;
    MaskViewSnapshot view;  // emptied by every refresh of the rest (its key no longer matches)

    const AttentionMap* map(int layer, int head) const;
    const std::vector<float>* scores_of(const AttentionMap& m) const;
    int n_tokens() const { return static_cast<int>(tokens.size()); }
};

// Panel 3: one engine call that wrote to the KV cache, and the cache after it.
struct KvStage {
    bool decode = false;               // false: a prefill chunk; true: a decode step
    int first_pos = 0, n_pos = 0;      // positions this call wrote
    int length = 0;                    // positions cached after it
    std::vector<int32_t> block_table;  // logical block -> physical block (kFreedBlock: given back)
    int freed_blocks = 0;              // kFreedBlock entries: a window-type mask gave them back
    // Blocks held during the call, before the mask's forgotten blocks went back (the
    // "kv free" trace event's blocks_in_use_before; blocks_in_use when none was freed).
    int peak_blocks = 0;
    std::vector<int> ref_counts;  // (blocks of the table): >1 = shared prefix block
    int blocks_in_use = 0;
    std::size_t bytes_in_use = 0;
    std::vector<TraceEvent> appends;  // this call's "kv append" trace events (one per layer)
    // A verify step of speculative decoding (runtime/speculative.h
    // speculative_step): one chunk of the fed token and its guesses at
    // first_pos (n_pos = chunk's size), then the rejected guesses rolled back —
    // `length` and `block_table` are after the roll-back, the K/V of the fed
    // token and the accepted guesses kept.
    bool verify = false;
    std::vector<int32_t> chunk;           // the fed token, then the guesses
    std::vector<std::string> chunk_text;  // (chunk) their text
    int accepted = 0;                     // guesses accepted
    std::vector<int32_t> emitted;         // accepted guesses, then the target's token
    std::string target_text;              // the target's token (replacement or bonus)
    int blocks_verified = 0;              // blocks in use with every guess written
    std::vector<int32_t> table_verified;  // the block table before the roll-back
};

struct KvSnapshot {
    bool ready = false;
    std::string backend;
    int block_size = 0, num_blocks = 0, n_layers = 0;
    std::size_t bytes_per_token = 0;
    int n_prompt = 0;                     // prompt positions (the rest are decoded)
    BoundMask mask;                       // the mask the session ran under
    std::string refusal;                  // the asked plan's refusal ("" = ran as asked)
    ChunkPlan plan;                       // the prefill chunks, one engine call each
    int decode_skipped = 0;               // decode steps asked for but past max_seq_len
    int speculate = 0;                    // guesses a verify step (0: plain decode steps)
    std::string draft;                    // "ngram:N" with speculate > 0
    std::vector<int32_t> plain_tokens;    // with speculate: greedy decoding's tokens, as many
    std::vector<std::string> token_text;  // (prompt + decoded tokens)
    std::vector<KvStage> stages;          // prefill chunks, then decode steps
    std::string error;
};

// Panel 3, shared pool view, and panel 5, several requests: one Engine serving
// a few requests from one small KV block pool (viewer/app/serving_scenario.h).
// Everything here was read from the engine after each of its steps: the
// requests' block tables, BlockManager::ref_count and is_cached per block, the
// StepRecord, pool_stats(), and the step's "kv append" trace events.
enum class PoolBlockState { kFree, kInUse, kCachedFree };

struct PoolBlock {
    PoolBlockState state = PoolBlockState::kFree;
    int ref_count = 0;         // BlockManager::ref_count: block-table entries pointing at it
    bool named = false;        // BlockManager::is_cached: a full block with a hash-chain name
    std::vector<int> owners;   // requests whose block table holds it, by id
    std::vector<int> logical;  // (owners): its logical block index in each owner's table
    // Whose K/V it holds: its owners, or for a free block the requests that
    // held it last (the K/V stay until the block is written again); -1: never used.
    std::vector<int> content;
    int content_logical = -1;          // logical block of `content`: positions l·B .. l·B+B-1
    bool written = false;              // this step appended K/V into it ("kv append" events)
    bool evicted = false;              // named before this step, written with new content in it
    std::vector<int> evicted_content;  // evicted: whose K/V it held before (`content` then)
    int evicted_logical = -1;          // ... at their logical block
    bool hit = false;                  // cached free before this step, taken back by a prefix hit
};

// One request as the engine held it after a step.
struct ServingRequestState {
    RequestState state = RequestState::waiting;
    int length = 0;                    // positions in its KV blocks (seq.length)
    int n_tokens = 0;                  // prompt + new tokens so far
    std::vector<int32_t> block_table;  // seq.block_table: logical -> physical block
    int preemptions = 0;
};

// What one request computed in one step: its "kv append" of layer 0.
struct ServingSpan {
    int request = 0;
    int first_pos = 0, n_pos = 0;
    bool decode = false;      // one new token fed back (else a prefill chunk)
    bool recompute = false;   // positions it had computed before a preemption
    std::vector<int> blocks;  // physical blocks written
};

// The engine after one step (stage 0: after the requests arrived, before any step).
struct ServingStage {
    StepRecord record;              // the engine's StepRecord (stage 0: empty, index -1)
    PoolStats pool;                 // Engine::pool_stats() after the step
    long long evictions = 0;        // this step's evictions: pool counter after minus before
    std::vector<PoolBlock> blocks;  // (num_blocks)
    std::vector<ServingRequestState> requests;  // (requests)
    std::vector<ServingSpan> spans;             // this step's work, in step order
};

// One request of the scenario, as it finished.
struct ServingRequestInfo {
    std::string label;  // "shares the prompt" or "a prompt of its own"
    int n_prompt = 0;
    int shared_prefix = 0;  // most prompt tokens it has in common with another request
    std::vector<std::string> token_text;  // (prompt + new tokens): each token as shown
    std::string output_text;
    // What the engine recorded for it (runtime/request.h's record, as `plab serve`
    // reads it; engine clock): prefix-cache hits, preemptions, tokens computed, times.
    RequestRecord record;
    RequestLatency latency;  // record.latency(), kept for the panels' many reads
};

struct ServingSnapshot {
    bool ready = false;
    std::string backend;
    int block_size = 0, num_blocks = 0, max_step_tokens = 0;
    bool prefix_cache = true;
    int prefix_tokens = 0;  // tokens of the shared prefix (the prompt in the bar)
    std::vector<ServingRequestInfo> requests;
    std::vector<ServingStage> stages;  // steps + 1
    std::string error;
    int n_steps() const { return static_cast<int>(stages.size()) - 1; }
};

// Panel 4: backend × chunk plan, each against cpu-ref with the whole prompt in one chunk.
struct EquivalenceSnapshot {
    bool ready = false;
    int n_tokens = 0;
    std::vector<std::string> backends;  // rows
    std::vector<bool> reference;        // (rows): promises bitwise equality
    std::vector<std::string> plans;     // columns: plan text
    std::vector<Difference> cells;      // (rows, columns) row-major
    std::vector<std::string> errors;    // (rows, columns): non-empty when that run failed
    // (rows, columns): the first 8 hex digits of the sha256 of the run's last-position
    // logits (float32 bytes): one digest per row = the same bits in every plan (lesson 16).
    std::vector<std::string> digests;
    std::string reference_digest;  // cpu-ref's, the whole prompt in one chunk
    // Of cpu-ref's "full" logits, what the fast backends' promise is measured against:
    double logit_scale = 0;     // max |logit|
    double logit_top2_gap = 0;  // largest logit minus the second largest
    std::string error;

    // Whether every fast row shows the same difference from cpu-ref in every
    // column that ran: what chunk-invariant kernels give (lesson 15). Read from
    // the table the engine filled, so the panel's words follow the numbers.
    bool fast_rows_same_in_every_plan() const {
        const std::size_t cols = plans.size();
        for (std::size_t r = 0; r < backends.size(); ++r) {
            if (reference[r]) continue;
            const Difference* first = nullptr;
            for (std::size_t c = 0; c < cols; ++c) {
                if (!errors[r * cols + c].empty()) continue;
                const Difference& d = cells[r * cols + c];
                if (first == nullptr) first = &d;
                if (d.logits_max_abs != first->logits_max_abs || d.kv_max_abs != first->kv_max_abs)
                    return false;
            }
        }
        return true;
    }
};

// Panel 5: the trace of one whole request.
struct TimelineSnapshot {
    bool ready = false;
    std::string backend;
    std::string plan;
    std::string mask = "causal";  // the mask spec of the request
    std::string refusal;          // the asked plan's refusal ("" = ran as asked)
    std::vector<TraceEvent> events;
    double ttft_us = 0;     // GenerateResult::ttft_us
    double prefill_us = 0;  // GenerateResult::prefill_us
    int n_prompt = 0;
    std::string output_text;
    std::string error;
};

// Panel 6: a generated workload served by plab::serve on the virtual clock
// (viewer/app/serving_replay.h). Every time and count is the ServeReport's.
struct ReplaySpan {
    int step = 0;  // StepRecord::index
    double start_us = 0, us = 0;
    int tokens = 0;       // StepRecord::tokens of this request in that step
    bool decode = false;  // StepRecord::decode: its newest token fed back (else a prompt chunk)
};

struct ReplayRow {
    int id = 0;
    double arrival_us = 0, first_scheduled_us = 0;  // queued: arrival -> first step began
    std::vector<ReplaySpan> spans;                  // the steps it was in, in order
    std::vector<double> preempted_us;               // starts of the steps that preempted it
    std::vector<double> token_us;                   // each new token sampled (engine's clock)
    double client_first_token_us = 0;               // arrival + ttft_client_ms: the client has it
    int prompt_tokens = 0, cached_tokens = 0, new_tokens = 0;
    int computed_tokens = 0;  // the engine's count, recomputation included
    int preemptions = 0;
};

struct ReplaySnapshot {
    bool ready = false;
    std::string backend, policy, workload;
    int token_budget = 0;  // max_step_tokens of this policy's engine
    int pool_blocks = 0, block_size = 0;
    double network_delay_ms = 0;
    ServeReport report;
    std::vector<ReplayRow> rows;          // (requests)
    std::vector<double> ttft_ms, itl_ms;  // sorted: the distributions drawn
    Percentiles ttft_pct, itl_pct;        // percentile() of the drawn values
    double end_us = 0;                    // the time axis: 0 .. the last token at the client
    double rerun_ms = 0;                  // wall time of this replay (generate + serve)
    std::string error;
};

// What run_flash_head said of a model head's walk (toy/flash_head.h), beside the walk:
// where its states came from and how its output compares, without the (T, Dh) arrays.
struct FlashHeadSummary {
    int layer = 0, head = 0, kv_head = 0, head_dim = 0;
    std::string backend;      // "gpu (emulated)" or "gpu (native)"
    int kernel_key_tile = 0;  // the gpu kernel's own key tile on this device
    bool recorded = false;    // the states were read from the emulated kernel (its own tile)
    long long kernel_states = 0;
    bool port_matches_kernel = false;  // recorded: the CPU port's states are the kernel's bits
    FlashHeadDiff vs_reference;        // the walk's output (T, Dh) against cpu-ref's
    FlashHeadDiff vs_gpu;              // and against the gpu backend's own output
    long long skipped = 0, unreached = 0, partial = 0, full = 0;  // tiles, every chunk
};

// Panel 7: FlashAttention by hand (lesson 17). One head's attention walked key tile by
// key tile in a kernel's order, each step's online-softmax state (m, l, the rescale,
// the output so far) as the engine recorded it: run_flash_toy + flash_walk_of on the
// toy, or run_flash_head + flash_walk_of on a model head (`model_head`). The panel
// draws `walk`, the same FlashWalk for either.
struct FlashSnapshot {
    bool ready = false;
    // The inputs it was asked for (flash_inputs_key, app/flash_view.h): the panel asks
    // again when they move (the toy's values edited, the mask changed in the Mask panel).
    std::string key;
    FlashWalk walk;
    int tile = 0;                 // keys per tile asked for (a model head: 0 = the kernel's)
    std::string mask = "causal";  // the mask spec it ran under
    ToyInput input;               // the toy it walked (the command's --q, --k, --v)
    std::string error;            // bad input (a mask the toy cannot bind), shown instead
    // A model head (the prompt of the model scenes, in the gpu kernel's order).
    bool model_head = false;
    FlashHeadSummary head;
    std::vector<int32_t> tokens;  // (T): the prompt it prefilled
    ChunkPlan plan;               // the plan the engine ran
    std::string refusal;          // the asked plan's refusal under the mask ("" = ran as asked)
};

struct Snapshot {
    std::string model_summary;  // ModelConfig::summary()
    std::string model_source;
    bool random_model = false;  // no trained model was found: random weights
    std::vector<std::string> backend_names;
    int n_layers = 0, n_heads = 0;
    std::string head_hint;  // why the attention panel opened on its head ("induction head")
    ToySnapshot toy;
    MaskSnapshot mask;
    KvSnapshot kv;
    ServingSnapshot serving;
    EquivalenceSnapshot equivalence;
    TimelineSnapshot timeline;
    ReplaySnapshot replay;
    FlashSnapshot flash;
};

}  // namespace plab::viewer
