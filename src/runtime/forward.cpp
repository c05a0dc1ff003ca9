#include "runtime/forward.h"

#include <cmath>
#include <map>
#include <utility>

#include "core/attention_math.h"
#include "core/attention_shape.h"
#include "core/error.h"

namespace plab {

void Workspace::ensure(const ModelConfig& c, int chunk_len) {
    if (chunk_len <= capacity_) return;
    const std::size_t n = static_cast<std::size_t>(chunk_len);
    const std::size_t qd = std::size_t(c.n_heads) * c.head_dim;
    const std::size_t kvd = std::size_t(c.n_kv_heads) * c.head_dim;
    x = DeviceArray(backend_, n * c.dim);            // (C, D) the residual stream
    xb = DeviceArray(backend_, n * c.dim);           // (C, D) normalised input of a sublayer
    q = DeviceArray(backend_, n * qd);               // (C, H, Dh)
    k = DeviceArray(backend_, n * kvd);              // (C, Hkv, Dh)
    v = DeviceArray(backend_, n * kvd);              // (C, Hkv, Dh)
    att = DeviceArray(backend_, n * qd);             // (C, H, Dh) attention output
    proj = DeviceArray(backend_, n * c.dim);         // (C, D) output of o_proj / down_proj
    gate = DeviceArray(backend_, n * c.hidden_dim);  // (C, F)
    up = DeviceArray(backend_, n * c.hidden_dim);    // (C, F)
    capacity_ = chunk_len;
}

void Workspace::ensure_logits(int rows, int vocab) {
    const std::size_t n = std::size_t(rows) * vocab;
    if (n <= logits_capacity_) return;
    logits = DeviceArray(backend_, n);
    logits_capacity_ = n;
}

// The trace's record of one sequence's K/V append in one layer: the blocks
// it touched and the slots it was given, as runs "first-last" of consecutive
// slots (one run per block touched): where each position really went.
static void trace_kv_append(Trace& trace, int layer, const Sequence& seq, int pos0, int n,
                            std::span<const int32_t> slots, int block_size, bool with_seq) {
    std::string blocks;
    for (int b = pos0 / block_size; b <= (pos0 + n - 1) / block_size; ++b) {
        blocks += (blocks.empty() ? "" : ",") + std::to_string(seq.block_table[b]);
    }
    std::string slot_runs;
    for (std::size_t i = 0; i < slots.size(); ++i) {
        if (i > 0 && slots[i] == slots[i - 1] + 1) continue;
        std::size_t e = i;
        while (e + 1 < slots.size() && slots[e + 1] == slots[e] + 1) ++e;
        slot_runs += (slot_runs.empty() ? "" : ",") + std::to_string(slots[i]) + "-" +
                     std::to_string(slots[e]);
    }
    std::map<std::string, std::string> args = {
        {"layer", std::to_string(layer)},
        {"positions", std::to_string(pos0) + "-" + std::to_string(pos0 + n - 1)},
        {"blocks", blocks},
        {"slots", slot_runs}};
    if (with_seq) args["sequence"] = std::to_string(seq.id);
    trace.instant("kv append", "kv", args);
}

namespace {

// Where each sequence's rows sit in the stacked step, and what every layer
// reuses: the cache slots, the RoPE angles, one attention call per sequence.
struct StepPlan {
    int rows = 0;                 // of the step: C for a one-sequence chunk
    std::vector<int> row0, pos0;  // item i: rows row0[i]..row0[i+1]-1, cache offset p = pos0[i]
    std::vector<int32_t> tokens;  // (rows) every item's tokens, stacked
    std::vector<int32_t> slots;   // (rows) where each row's K/V go in the paged cache
    std::vector<int32_t> rope_positions;  // (rows) the angle each row is rotated by
    std::vector<AttentionCall> calls;     // one per item, the same in every layer
};

// Checks the step (all or nothing: a step that cannot get its blocks changes
// no sequence), reserves each new position's slot and lays out the rows.
StepPlan plan_step(const DeviceModel& model, KvCache& cache, std::span<const StepItem> items,
                   Workspace& ws, const ForwardProbes& probes) {
    const ModelConfig& c = model.config();
    PLAB_ASSERT(!items.empty());
    PLAB_CHECK(
        items.size() == 1 || (!probes.all_logits && probes.attention.empty()),
        "probes are for a one-sequence step; this step has " << items.size() << " sequences");
    PLAB_ASSERT(!(probes.skip_logits && probes.all_logits));
    const std::size_t n_items = items.size();
    StepPlan plan;
    plan.row0.assign(n_items + 1, 0);
    plan.pos0.assign(n_items, 0);
    int blocks_needed = 0;
    for (std::size_t i = 0; i < n_items; ++i) {
        const StepItem& it = items[i];
        const int n = static_cast<int>(it.tokens.size());
        PLAB_ASSERT(it.seq != nullptr && n >= 1);
        for (std::size_t j = 0; j < i; ++j) {
            PLAB_ASSERT(items[j].seq != it.seq);  // one span per sequence per step
        }
        PLAB_ASSERT(it.slots.empty() || static_cast<int>(it.slots.size()) == n);
        plan.pos0[i] = it.slots.empty() ? it.seq->length : it.seq->length - n;
        PLAB_CHECK(plan.pos0[i] + n <= c.max_seq_len,
                   "sequence of " << plan.pos0[i] + n
                                  << " tokens exceeds the model's max_seq_len of "
                                  << c.max_seq_len);
        plan.row0[i + 1] = plan.row0[i] + n;
        if (it.slots.empty()) blocks_needed += cache.blocks().new_blocks_for(*it.seq, n);
    }
    PLAB_CHECK(blocks_needed <= cache.blocks().free_blocks(),
               "KV cache is full: this step needs " << blocks_needed << " new blocks of "
                                                    << cache.blocks().block_size() << " but only "
                                                    << cache.blocks().free_blocks() << " of "
                                                    << cache.blocks().num_blocks() << " are free");
    for (const AttentionProbe& p : probes.attention) {
        PLAB_CHECK(p.layer >= 0 && p.layer < c.n_layers && p.head >= 0 && p.head < c.n_heads,
                   "attention probe (layer " << p.layer << ", head " << p.head
                                             << ") out of range: layers 0.." << c.n_layers - 1
                                             << ", heads 0.." << c.n_heads - 1);
    }
    plan.rows = plan.row0[n_items];
    ws.ensure(c, plan.rows);
    const int qd = c.n_heads * c.head_dim;
    for (std::size_t i = 0; i < n_items; ++i) {
        const StepItem& it = items[i];
        const int n = plan.row0[i + 1] - plan.row0[i];
        plan.tokens.insert(plan.tokens.end(), it.tokens.begin(), it.tokens.end());
        // Room in the KV cache for the new positions p..p+C-1 (unless the caller reserved it).
        const std::vector<int32_t> s = it.slots.empty()
                                           ? cache.blocks().reserve(*it.seq, n)
                                           : std::vector<int32_t>(it.slots.begin(), it.slots.end());
        plan.slots.insert(plan.slots.end(), s.begin(), s.end());
        // The angle RoPE rotates each row by: its cache position, or under
        // packed documents its position within its document (mask.rope_position).
        for (int r = 0; r < n; ++r)
            plan.rope_positions.push_back(it.mask.rope_position(plan.pos0[i] + r));
        // Its attention call: its rows of Q and of the output, its block table.
        AttentionCall call;
        call.out = ws.att.buf().slice(std::size_t(plan.row0[i]) * qd, std::size_t(n) * qd);
        call.q = ws.q.buf().slice(std::size_t(plan.row0[i]) * qd, std::size_t(n) * qd);
        call.block_table = it.seq->block_table;
        call.shape = attention_shape(n, plan.pos0[i], c.n_heads, c.n_kv_heads, c.head_dim,
                                     cache.blocks().block_size(), it.mask);
        plan.calls.push_back(call);
    }
    return plan;
}

// The trace's record of every sequence's K/V append in one layer.
void trace_kv_appends(Trace* trace, int layer, const StepPlan& plan,
                      std::span<const StepItem> items, int block_size) {
    if (trace == nullptr || !trace->enabled) return;
    for (std::size_t i = 0; i < items.size(); ++i) {
        const int rows = plan.row0[i + 1] - plan.row0[i];
        trace_kv_append(*trace, layer, *items[i].seq, plan.pos0[i], rows,
                        std::span<const int32_t>(plan.slots)
                            .subspan(std::size_t(plan.row0[i]), std::size_t(rows)),
                        block_size, items.size() > 1);
    }
}

// The probed heads of this layer (a one-sequence step): probabilities, and
// scores when asked, both from the backend that computed the attention.
void probe_attention(Backend& be, const Workspace& ws, const KvCache& cache, int layer,
                     const StepPlan& plan, std::span<const StepItem> items,
                     const ForwardProbes& probes, StepOutput& out) {
    for (const AttentionProbe& p : probes.attention) {
        if (p.layer != layer) continue;
        const AttentionShape& shape = plan.calls[0].shape;
        const std::size_t cells = std::size_t(plan.rows) * shape.n_keys();
        DeviceArray probs(be, cells);
        DeviceArray scores;
        if (probes.attention_scores) scores = DeviceArray(be, cells);
        be.attention_probs(probs.buf(), scores.buf(), ws.q.buf(), cache.storage().k_pool(layer),
                           items[0].seq->block_table, shape, p.head);
        std::vector<float> host(cells);
        be.download(host.data(), probs.buf(), cells);
        out.attention_probs.push_back(std::move(host));
        if (probes.attention_scores) {
            std::vector<float> host_scores(cells);
            be.download(host_scores.data(), scores.buf(), cells);
            out.attention_scores.push_back(std::move(host_scores));
        }
    }
}

// Q (after RoPE), the step's new K (after RoPE) and V as the cache keeps them
// (read back through each row's slot, before any block is forgotten), and the
// attention output of a probed layer, every head: what a tiled kernel read and
// wrote (plab flash --model walks and compares them).
void probe_attention_rows(Backend& be, const Workspace& ws, const KvCache& cache, int layer,
                          const StepPlan& plan, const ForwardProbes& probes, StepOutput& out) {
    const std::size_t n_probes = probes.attention_rows.size();
    out.attention_q.resize(n_probes);
    out.attention_k.resize(n_probes);
    out.attention_v.resize(n_probes);
    out.attention_out.resize(n_probes);
    const AttentionShape& shape = plan.calls[0].shape;
    const std::size_t n = std::size_t(shape.n_heads) * std::size_t(shape.head_dim);
    const std::size_t kv = std::size_t(shape.n_kv_heads) * std::size_t(shape.head_dim);
    const std::size_t rows = std::size_t(plan.rows);
    for (std::size_t i = 0; i < n_probes; ++i) {
        if (probes.attention_rows[i] != layer) continue;
        out.attention_q[i].resize(rows * n);
        out.attention_out[i].resize(rows * n);
        be.download(out.attention_q[i].data(), ws.q.buf(), rows * n);
        be.download(out.attention_out[i].data(), ws.att.buf(), rows * n);
        out.attention_k[i].resize(rows * kv);
        out.attention_v[i].resize(rows * kv);
        for (std::size_t r = 0; r < rows; ++r) {
            const std::size_t at = std::size_t(plan.slots[r]) * kv;
            be.download(out.attention_k[i].data() + r * kv,
                        cache.storage().k_pool(layer).slice(at, kv), kv);
            be.download(out.attention_v[i].data() + r * kv,
                        cache.storage().v_pool(layer).slice(at, kv), kv);
        }
    }
}

// Probes were collected layer by layer; put them back in the caller's order.
void order_probes(StepOutput& out, const ForwardProbes& probes, int n_layers) {
    if (probes.attention.size() <= 1) return;
    std::vector<std::vector<float>> ordered(probes.attention.size());
    std::vector<std::vector<float>> ordered_scores(out.attention_scores.size());
    std::size_t next = 0;
    for (int l = 0; l < n_layers; ++l) {
        for (std::size_t i = 0; i < probes.attention.size(); ++i) {
            if (probes.attention[i].layer != l) continue;
            if (!ordered_scores.empty()) ordered_scores[i] = std::move(out.attention_scores[next]);
            ordered[i] = std::move(out.attention_probs[next++]);
        }
    }
    out.attention_probs = std::move(ordered);
    out.attention_scores = std::move(ordered_scores);
}

// The final norm of the rows the classifier reads — the last position of
// each sequence that wants logits (every position of a one-sequence chunk
// when a probe asks) — gathered into consecutive rows of xb. Returns how many.
int final_norm_rows(Backend& be, const DeviceModel& model, Workspace& ws, const StepPlan& plan,
                    std::span<const StepItem> items, const ForwardProbes& probes) {
    const ModelConfig& c = model.config();
    const int D = c.dim;
    int rows = 0;
    for (std::size_t i = 0; i + 1 < plan.row0.size(); ++i) {
        const bool all = probes.all_logits || items[i].all_logits;
        if (!items[i].wants_logits && !all) continue;
        const int take = all ? plan.row0[i + 1] - plan.row0[i] : 1;
        const int first = plan.row0[i + 1] - take;
        be.rmsnorm(ws.xb.buf().slice(std::size_t(rows) * D, std::size_t(take) * D),
                   ws.x.buf().slice(std::size_t(first) * D, std::size_t(take) * D),
                   model.final_norm.buf(), take, D, c.norm_eps);
        rows += take;
    }
    return rows;
}

// A decode step (one row per sequence, no probes) launches the same kernels
// every step: the backend may record them and replay them as one CUDA graph
// (Backend::begin_step_graph). end() before anything is copied back; an op
// that throws cancels the step instead.
class StepGraphScope {
public:
    StepGraphScope(Backend& be, bool decode) : be_(decode ? &be : nullptr) {
        if (be_ != nullptr) be_->begin_step_graph();
    }
    ~StepGraphScope() {
        if (be_ != nullptr) be_->cancel_step_graph();
    }
    StepGraphScope(const StepGraphScope&) = delete;
    StepGraphScope& operator=(const StepGraphScope&) = delete;
    void end() {
        if (be_ != nullptr) std::exchange(be_, nullptr)->end_step_graph();
    }

private:
    Backend* be_;
};

// What watches a step from outside its layer loop: the trace of each layer's
// K/V appends and the attention probes a caller asked for. The loop tells it
// "layer l has attended"; what is recorded is decided here.
struct LayerWatch {
    Backend& be;
    const Workspace& ws;
    const KvCache& cache;
    const StepPlan& plan;
    std::span<const StepItem> items;
    const ForwardProbes& probes;
    Trace* trace;
    StepOutput& out;
    void attended(int layer) const {
        trace_kv_appends(trace, layer, plan, items, cache.blocks().block_size());
        probe_attention(be, ws, cache, layer, plan, items, probes, out);
        if (!probes.attention_rows.empty())
            probe_attention_rows(be, ws, cache, layer, plan, probes, out);
    }
};

// The layers, narrated. Shapes: n rows (every item's tokens stacked), D model
// dim, H/Hkv query/KV heads of Dh, F SwiGLU hidden dim. Leaves the last
// layer's output in x.
void run_layers(const DeviceModel& model, KvCache& cache, Workspace& ws, const StepPlan& plan,
                const LayerWatch& watch) {
    const ModelConfig& c = model.config();
    Backend& be = model.backend();
    const int n = plan.rows, D = c.dim, F = c.hidden_dim;
    const int qd = c.n_heads * c.head_dim, kvd = c.n_kv_heads * c.head_dim;
    // 1. Token embeddings: x (n, D), one row of the table per token.
    be.embed(ws.x.buf(), plan.tokens, model.tok_embeddings.buf(), D);
    // The first layer's attention norm into xb (n, D); every later norm comes
    // with the residual add before it (add_rmsnorm: one pass over the rows).
    be.rmsnorm(ws.xb.buf(), ws.x.buf(), model.layers[0].attn_norm.buf(), n, D, c.norm_eps);
    for (int l = 0; l < c.n_layers; ++l) {
        const DeviceLayer& w = model.layers[static_cast<std::size_t>(l)];
        // 2. Q (n, H, Dh), K and V (n, Hkv, Dh): one product over all rows of
        //    the step, the three weights in one call.
        const MatmulPart qkv[] = {{ws.q.buf(), w.wq.buf(), qd},
                                  {ws.k.buf(), w.wk.buf(), kvd},
                                  {ws.v.buf(), w.wv.buf(), kvd}};
        be.matmul_parts(ws.xb.buf(), n, D, qkv);
        // 3. RoPE: every row of Q and K rotated by its absolute position;
        // 4. and K and V kept: later chunks and decode steps read them from
        //    the cache (one call: a backend may fuse the three steps).
        be.rope_kv_append({ws.q.buf(), ws.k.buf(), ws.v.buf(), n, c.n_heads, c.n_kv_heads,
                           c.head_dim, plan.rope_positions, model.rope_cos.buf(),
                           model.rope_sin.buf(), cache.storage().k_pool(l),
                           cache.storage().v_pool(l), plan.slots});
        // 5. Masked attention into att (n, H, Dh), per sequence: its queries
        //    over its own cache positions 0..p+C-1 through its own block table
        //    (one call for all, so a backend may run them side by side).
        be.attention_batch(cache.storage().k_pool(l), cache.storage().v_pool(l), plan.calls);
        watch.attended(l);
        // 6. Output projection (n, D), residual into x, the MLP's norm into xb.
        be.matmul(ws.proj.buf(), ws.att.buf(), w.wo.buf(), n, D, qd);
        be.add_rmsnorm(ws.x.buf(), ws.proj.buf(), ws.xb.buf(), w.ffn_norm.buf(), n, D, c.norm_eps);
        // 7. SwiGLU MLP: silu(gate)·up (n, F) from one call (gate and up side by
        //    side, SwiGLU after them), then down (n, D).
        be.matmul_swiglu(ws.gate.buf(), ws.up.buf(), ws.xb.buf(), w.w_gate.buf(), w.w_up.buf(), n,
                         F, D);
        be.matmul(ws.proj.buf(), ws.gate.buf(), w.w_down.buf(), n, D, F);
        // 8. Residual into x, and the next layer's attention norm with it.
        if (l + 1 < c.n_layers) {
            be.add_rmsnorm(ws.x.buf(), ws.proj.buf(), ws.xb.buf(),
                           model.layers[std::size_t(l) + 1].attn_norm.buf(), n, D, c.norm_eps);
        } else {
            be.add(ws.x.buf(), ws.proj.buf(), std::size_t(n) * D);
        }
    }
}

// 9. Final norm and classifier: logits (rows, V) of each sequence's last
//    position only — the first new token comes from its distribution — and
//    only for sequences whose prompt this step finishes or that decode.
//    Returns the number of logits rows (0: nobody reads logits this step).
int classify(const DeviceModel& model, Workspace& ws, const StepPlan& plan,
             std::span<const StepItem> items, const ForwardProbes& probes) {
    // An earlier chunk of a prompt: its K/V were the point, nobody reads its logits.
    if (probes.skip_logits) return 0;
    Backend& be = model.backend();
    const ModelConfig& c = model.config();
    const int rows = final_norm_rows(be, model, ws, plan, items, probes);
    if (rows == 0) return 0;
    ws.ensure_logits(rows, c.vocab_size);
    be.matmul(ws.logits.buf(), ws.xb.buf(), model.classifier_buf(), rows, c.vocab_size, c.dim);
    return rows;
}

// 10. The one copy back per step: rows x V floats of logits to the host, where
//     the sampler reads them (a span of its own, so the trace shows what a copy
//     costs next to the compute around it).
void copy_logits_to_host(Backend& be, const Workspace& ws, int rows, int V, Trace* trace,
                         StepOutput& out) {
    out.logits.resize(std::size_t(rows) * V);
    const double t_copy = trace != nullptr ? trace->now_us() : 0;
    be.download(out.logits.data(), ws.logits.buf(), out.logits.size());
    if (trace != nullptr && trace->enabled)
        trace->span("copy logits to host", "copy", t_copy,
                    {{"bytes", std::to_string(out.logits.size() * sizeof(float))}});
}

}  // namespace

// One step of the forward pass: the layers (run_layers, the numbered loop),
// the classifier on the rows that sample, the logits copied back. Around them,
// not inside: the CUDA graph that may record a decode step's launches, and the
// watch that traces and probes each layer.
StepOutput forward_step(const DeviceModel& model, KvCache& cache, std::span<const StepItem> items,
                        Workspace& ws, const ForwardProbes& probes, Trace* trace) {
    Backend& be = model.backend();
    const StepPlan plan = plan_step(model, cache, items, ws, probes);
    StepOutput out;
    const LayerWatch watch{be, ws, cache, plan, items, probes, trace, out};
    StepGraphScope graph(be, plan.rows == static_cast<int>(items.size()) &&
                                 probes.attention.empty() && !probes.all_logits);
    run_layers(model, cache, ws, plan, watch);
    const int rows = classify(model, ws, plan, items, probes);
    graph.end();
    order_probes(out, probes, model.config().n_layers);
    if (rows > 0 && !probes.logits_stay_on_device)
        copy_logits_to_host(be, ws, rows, model.config().vocab_size, trace, out);
    return out;
}

StepOutput forward_chunk(const DeviceModel& model, KvCache& cache, Sequence& seq,
                         std::span<const int32_t> tokens, Workspace& ws,
                         const ForwardProbes& probes, Trace* trace, const Mask& mask) {
    const StepItem item{&seq, tokens, mask};
    return forward_step(model, cache, std::span<const StepItem>(&item, 1), ws, probes, trace);
}

}  // namespace plab
