// The forward pass over one step, written once for every backend.
//
// What it teaches: prefill of a chunk is the same computation as decoding,
// for C tokens at once. Per layer:
//
//   // clang-format off
//   x ─► RMSNorm ─► Q,K,V projections ─► RoPE(Q,K) ─► append K,V to the KV cache
//     ─► masked attention of the chunk's C queries over cache positions 0..p+C-1
//     ─► output projection ─► + x ─► RMSNorm ─► SwiGLU MLP ─► + x
//   // clang-format on
//
// then a final RMSNorm and the classifier for the *last* position only:
// the first new token comes from the last position's distribution, so the
// other C-1 rows of logits would be wasted work (a probe can ask for them).
//
// A step may hold several sequences ("varlen", as vLLM and SARATHI run
// them): prefill chunks of some requests and single decode tokens of others.
// Their rows are stacked, so every projection and the MLP is one matrix
// product over all rows of the step — the weights are read once per step,
// which is why batching decode helps — while attention runs per sequence over
// its own block table. The one-sequence chunk is the one-item case.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/device_model.h"
#include "runtime/kv_cache.h"
#include "trace/trace.h"

namespace plab {

struct AttentionProbe {
    int layer = 0;
    int head = 0;
};

// What a caller may ask to see besides the last position's logits.
struct ForwardProbes {
    bool all_logits = false;                // logits of every position of the chunk
    std::vector<AttentionProbe> attention;  // probabilities of these (layer, head)s
    bool attention_scores = false;          // also their scaled scores q·k/sqrt(Dh) (viewer)
    // Layers whose attention inputs and outputs come back: Q after RoPE and the
    // attention's output (C, H·Dh), the step's K and V as cached (C, Hkv·Dh)
    // (plab flash --model).
    std::vector<int> attention_rows;
    // Leave each item's last-position logits on the backend (Workspace::logits,
    // one row per item) and copy nothing back: a caller that only needs the
    // greedy token takes Backend::argmax of each row (4 bytes back instead of
    // V floats). StepOutput::logits is then empty.
    bool logits_stay_on_device = false;
    // A prefill chunk that is not the prompt's last: nobody reads its logits
    // (the first new token comes from the last position), so the step stops
    // after the layers — no final norm, no classifier, no copy back.
    // StepOutput::logits is then empty. Not with all_logits.
    bool skip_logits = false;
};

// What one forward step hands back to the host: the logits of the rows that
// sample (one per sequence that finishes its prompt or decodes), and the probes.
struct StepOutput {
    std::vector<float> logits;  // (rows, V), or (C, V) with probes.all_logits
    // One per probe in ForwardProbes::attention: (C, pos0 + C), masked cells 0.
    std::vector<std::vector<float>> attention_probs;
    // With probes.attention_scores, one per probe: (C, pos0 + C), masked cells -inf.
    std::vector<std::vector<float>> attention_scores;
    // One of each per ForwardProbes::attention_rows entry, in its order: q and
    // out (C, H·Dh), the step's new k and v as cached (C, Hkv·Dh).
    std::vector<std::vector<float>> attention_q, attention_k, attention_v, attention_out;
};

// Activation buffers, grown to the largest step seen (in rows) and reused.
class Workspace {
public:
    explicit Workspace(Backend& backend) : backend_(backend) {}
    void ensure(const ModelConfig& config, int chunk_len);
    void ensure_logits(int rows, int vocab);

    DeviceArray x, xb, q, k, v, att, proj, gate, up;  // see forward.cpp for shapes
    DeviceArray logits;                               // (rows, V)

private:
    Backend& backend_;
    int capacity_ = 0;
    std::size_t logits_capacity_ = 0;
};

// One sequence's share of a step: a chunk of its tokens (a prefill chunk, or
// the one token of a decode step) appended after its cached positions.
struct StepItem {
    Sequence* seq = nullptr;
    std::span<const int32_t> tokens;
    Mask mask{};  // which keys its queries see (core/mask.h; causal by default)
    // Empty: forward_step reserves the positions. Otherwise the caller already
    // did (BlockManager::reserve, so seq->length counts them) and these are its
    // slots — the engine reserves while it schedules, so that a request
    // admitted later in the same step can find these blocks in the prefix cache.
    std::span<const int32_t> slots{};
    // Whether anyone reads this item's last-position logits: a prefill chunk
    // that is not its prompt's last has none worth computing (the first new
    // token comes from the last position), so the classifier skips its row.
    bool wants_logits = true;
    // A verify chunk (speculative decoding): every row's logits are read —
    // row i is the target's distribution after tokens[i].
    bool all_logits = false;
};

// Runs one step over `items` (distinct sequences, any order): appends each
// item's K/V to its sequence and returns the logits of the last position of
// each item that wants them (every position of an all_logits item), in item
// order: (rows, V). Probes are for a one-item step only.
// Refuses (plab::Error, nothing changed) a step whose new blocks exceed the
// pool's free ones. On reference backends an item's logits and K/V are
// bitwise the same whatever else shares the step, in whatever order.
StepOutput forward_step(const DeviceModel& model, KvCache& cache, std::span<const StepItem> items,
                        Workspace& ws, const ForwardProbes& probes, Trace* trace);

// Runs one chunk of `tokens` for `seq` (whose cached length is the chunk's
// offset p), appending its K/V to the cache. Emits per-layer KV append events.
// `mask` (core/mask.h; causal by default) decides which keys each query sees;
// the caller has checked that every key it allows is in the cache by the end
// of this chunk (runtime/mask_grammar.h, check_plan_for_mask).
StepOutput forward_chunk(const DeviceModel& model, KvCache& cache, Sequence& seq,
                         std::span<const int32_t> tokens, Workspace& ws,
                         const ForwardProbes& probes, Trace* trace, const Mask& mask = {});

}  // namespace plab
