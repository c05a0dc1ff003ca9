// Session: one sequence's prefill and decode over a paged KV cache.
//
// What it teaches: prefill walks the prompt chunk by chunk (a chunk plan) and
// leaves every position's K/V in the cache; the first new token is sampled
// from the last position's logits; each decode step then adds one position,
// reusing the cache instead of recomputing the prefix.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/chunk_plan.h"
#include "runtime/forward.h"
#include "runtime/loaded_model.h"
#include "runtime/mask_grammar.h"

namespace plab {

struct SessionOptions {
    int block_size = 16;  // B: positions per KV block
    int num_blocks = 0;   // blocks in the pool; 0 = enough for max_seq_len
    BoundMask mask{};     // the attention mask (runtime/mask_grammar.h); causal by default
};

// Attention probabilities of one (layer, head) over a prefill. Row i is the
// query at position query_pos0 + i; column j is key position j; masked cells 0
// (under prefix-LM a prefix query's row has cells right of the diagonal too).
struct AttentionMap {
    AttentionProbe probe;
    int query_pos0 = 0;
    int n_queries = 0;
    int n_keys = 0;
    std::vector<float> probs;  // (n_queries, n_keys)
    // With ForwardProbes::attention_scores: (n_queries, n_keys) scaled q·k/sqrt(Dh), masked -inf.
    std::vector<float> scores;
};

// Q after RoPE, K and V, and the attention output of one layer over a
// prefill, every head: row i is position query_pos0 + i (ForwardProbes::attention_rows).
struct AttentionRows {
    int layer = 0;
    std::vector<float> q, out;  // (T, H·Dh) each
    std::vector<float> k, v;    // (T, Hkv·Dh): as cached when the position was prefilled
};

struct PrefillResult {
    std::vector<float> last_logits;  // (V) of the last prompt position
    std::vector<float> all_logits;   // (T, V) when asked: one row per prefilled position
    std::vector<AttentionMap> attention;
    std::vector<AttentionRows> attention_rows;  // one per ForwardProbes::attention_rows
    ChunkPlan plan;
    double prefill_us = 0;  // wall time of the prefill chunks only
};

class Session {
public:
    // On a loaded model (runtime/loaded_model.h), which must outlive the session.
    Session(const LoadedModel& model, SessionOptions options = {}, Trace* trace = nullptr);
    // On a device model over a backend the caller made (tests that build one by hand).
    Session(const DeviceModel& model, SessionOptions options = {}, Trace* trace = nullptr);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Prefills `tokens` (appended after whatever is cached) chunk by chunk.
    // A plan the mask does not allow (a chunk boundary inside a prefix-LM
    // prefix) is refused with a plab::Error naming a plan that works.
    PrefillResult prefill(std::span<const int32_t> tokens, const ChunkPlan& plan,
                          const ForwardProbes& probes = {});
    // One decode step: appends `token` and returns the logits (V) of its position.
    std::vector<float> decode_step(int32_t token);
    // Speculative decoding's verify (runtime/speculative.h): appends `tokens`
    // (the last accepted token, then the guesses) as one chunk, the same
    // forward as a prefill chunk, and returns every position's logits (n, V).
    // Blocks the mask forgets are kept until roll_back: positions past the
    // ones kept still need them.
    std::vector<float> verify(std::span<const int32_t> tokens);
    // Keeps positions 0..new_length-1 and forgets the rest (the rejected
    // guesses): their blocks go back to the pool (BlockManager::truncate).
    void roll_back(int new_length);

    const DeviceModel& model() const { return model_; }
    int length() const { return seq_.length; }
    const Sequence& sequence() const { return seq_; }
    const KvCache& cache() const { return cache_; }
    const BoundMask& mask() const { return mask_; }
    // K or V of every cached position of one layer: (length, Hkv·Dh).
    std::vector<float> read_kv(int layer, KvPart part) const {
        return cache_.storage().read(seq_, layer, part);
    }

private:
    void check_tokens(std::span<const int32_t> tokens) const;
    void check_mask_limit(int n_new) const;
    void forget_blocks(const Mask& mask);

    const DeviceModel& model_;
    Trace* trace_;
    BoundMask mask_;
    KvCache cache_;
    Sequence seq_;
    Workspace ws_;
};

}  // namespace plab
