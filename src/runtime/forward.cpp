#include "runtime/forward.h"

#include <cmath>
#include <map>

#include "core/attention_math.h"
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

ChunkOutput forward_step(const DeviceModel& model, KvCache& cache, std::span<const StepItem> items,
                         Workspace& ws, const ForwardProbes& probes, Trace* trace) {
    const ModelConfig& c = model.config();
    Backend& be = model.backend();
    PLAB_ASSERT(!items.empty());
    PLAB_CHECK(
        items.size() == 1 || (!probes.all_logits && probes.attention.empty()),
        "probes are for a one-sequence step; this step has " << items.size() << " sequences");
    // Where each item's rows start in the stacked step, and its offset p.
    const std::size_t n_items = items.size();
    std::vector<int> row0(n_items + 1, 0), pos0(n_items);
    int blocks_needed = 0;
    for (std::size_t i = 0; i < n_items; ++i) {
        const StepItem& it = items[i];
        const int n = static_cast<int>(it.tokens.size());
        PLAB_ASSERT(it.seq != nullptr && n >= 1);
        for (std::size_t j = 0; j < i; ++j) {
            PLAB_ASSERT(items[j].seq != it.seq);  // one span per sequence per step
        }
        PLAB_ASSERT(it.slots.empty() || static_cast<int>(it.slots.size()) == n);
        pos0[i] = it.slots.empty() ? it.seq->length : it.seq->length - n;
        PLAB_CHECK(pos0[i] + n <= c.max_seq_len, "sequence of " << pos0[i] + n
                                                                << " tokens exceeds the model's "
                                                                   "max_seq_len of "
                                                                << c.max_seq_len);
        row0[i + 1] = row0[i] + n;
        if (it.slots.empty()) blocks_needed += cache.new_blocks_for(*it.seq, n);
    }
    // All or nothing: a step that cannot get its blocks changes no sequence.
    PLAB_CHECK(blocks_needed <= cache.free_blocks(),
               "KV cache is full: this step needs "
                   << blocks_needed << " new blocks of " << cache.block_size() << " but only "
                   << cache.free_blocks() << " of " << cache.num_blocks() << " are free");
    for (const AttentionProbe& p : probes.attention) {
        PLAB_CHECK(p.layer >= 0 && p.layer < c.n_layers && p.head >= 0 && p.head < c.n_heads,
                   "attention probe (layer " << p.layer << ", head " << p.head
                                             << ") out of range: layers 0.." << c.n_layers - 1
                                             << ", heads 0.." << c.n_heads - 1);
    }
    const int n = row0[n_items];  // rows of the step: C for a one-sequence chunk
    ws.ensure(c, n);
    const int D = c.dim, F = c.hidden_dim;
    const int qd = c.n_heads * c.head_dim, kvd = c.n_kv_heads * c.head_dim;
    const std::size_t nd = std::size_t(n) * D;

    // 1. Token embeddings: one row of the table per token, every sequence's rows stacked.
    std::vector<int32_t> tokens;
    tokens.reserve(std::size_t(n));
    for (const StepItem& it : items)
        tokens.insert(tokens.end(), it.tokens.begin(), it.tokens.end());
    be.embed(ws.x.buf(), tokens, model.tok_embeddings.buf(), D);

    // 2. Room in the KV cache for each sequence's new positions p..p+C-1.
    std::vector<int32_t> slots;
    slots.reserve(std::size_t(n));
    for (const StepItem& it : items) {
        if (!it.slots.empty()) {
            slots.insert(slots.end(), it.slots.begin(), it.slots.end());
            continue;
        }
        const std::vector<int32_t> s = cache.reserve(*it.seq, static_cast<int>(it.tokens.size()));
        slots.insert(slots.end(), s.begin(), s.end());
    }
    // The angle RoPE rotates each row by: its cache position, or under packed
    // documents its position within its document (mask.rope_position).
    std::vector<int32_t> rope_positions;
    rope_positions.reserve(std::size_t(n));
    for (std::size_t i = 0; i < n_items; ++i)
        for (int r = 0; r < row0[i + 1] - row0[i]; ++r)
            rope_positions.push_back(items[i].mask.rope_position(pos0[i] + r));
    // Rows of sequence i in a (rows, width) activation.
    auto rows_of = [&](Buffer b, std::size_t i, int width) {
        return b.slice(std::size_t(row0[i]) * width, std::size_t(row0[i + 1] - row0[i]) * width);
    };
    // Each sequence's attention call: the same rows, block table and shape in
    // every layer (only the layer's pools change).
    std::vector<AttentionCall> calls(n_items);
    for (std::size_t i = 0; i < n_items; ++i) {
        AttentionCall& call = calls[i];
        call.out = rows_of(ws.att.buf(), i, qd);
        call.q = rows_of(ws.q.buf(), i, qd);
        call.block_table = items[i].seq->block_table;
        AttentionShape& shape = call.shape;
        shape.n_queries = row0[i + 1] - row0[i];
        shape.pos0 = pos0[i];
        shape.n_heads = c.n_heads;
        shape.n_kv_heads = c.n_kv_heads;
        shape.head_dim = c.head_dim;
        shape.block_size = cache.block_size();
        shape.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
        shape.mask = items[i].mask;
    }

    ChunkOutput out;
    // The first layer's attention norm; every later norm comes with the
    // residual add before it (add_rmsnorm: one pass over the rows).
    be.rmsnorm(ws.xb.buf(), ws.x.buf(), model.layers[0].attn_norm.buf(), n, D, c.norm_eps);
    for (int l = 0; l < c.n_layers; ++l) {
        const DeviceLayer& w = model.layers[static_cast<std::size_t>(l)];
        // 3. Attention sublayer: (xb holds the normalised rows) project to Q,
        //    K, V (one product over all rows of the step, the three weights in
        //    one call), rotate every row by its position (one call for all
        //    sequences of the step).
        const MatmulPart qkv[] = {{ws.q.buf(), w.wq.buf(), qd},
                                  {ws.k.buf(), w.wk.buf(), kvd},
                                  {ws.v.buf(), w.wv.buf(), kvd}};
        be.matmul_parts(ws.xb.buf(), n, D, qkv);
        be.rope_rows(ws.q.buf(), n, c.n_heads, c.head_dim, rope_positions, model.rope_cos.buf(),
                     model.rope_sin.buf());
        be.rope_rows(ws.k.buf(), n, c.n_kv_heads, c.head_dim, rope_positions, model.rope_cos.buf(),
                     model.rope_sin.buf());
        // 4. Keep K and V: later chunks and decode steps read them from the cache.
        be.kv_append(cache.k_pool(l), cache.v_pool(l), ws.k.buf(), ws.v.buf(), slots, kvd);
        if (trace != nullptr && trace->enabled) {
            for (std::size_t i = 0; i < n_items; ++i) {
                const int rows = row0[i + 1] - row0[i];
                trace_kv_append(*trace, l, *items[i].seq, pos0[i], rows,
                                std::span<const int32_t>(slots).subspan(std::size_t(row0[i]),
                                                                        std::size_t(rows)),
                                cache.block_size(), n_items > 1);
            }
        }
        // 5. Masked attention, per sequence: its queries over its own cache
        //    positions 0..p+C-1 through its own block table (one call for all
        //    sequences, so a backend may run them side by side).
        be.attention_batch(cache.k_pool(l), cache.v_pool(l), calls);
        for (const AttentionProbe& p : probes.attention) {
            if (p.layer != l) continue;
            // Probabilities and scores both come from the backend that computed them.
            const AttentionShape& shape = calls[0].shape;
            const std::size_t cells = std::size_t(n) * shape.n_keys();
            DeviceArray probs(be, cells);
            DeviceArray scores;
            if (probes.attention_scores) scores = DeviceArray(be, cells);
            be.attention_probs(probs.buf(), scores.buf(), ws.q.buf(), cache.k_pool(l),
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
        // 6. Output projection, residual, and the MLP's norm of the new rows.
        be.matmul(ws.proj.buf(), ws.att.buf(), w.wo.buf(), n, D, qd);
        be.add_rmsnorm(ws.x.buf(), ws.proj.buf(), ws.xb.buf(), w.ffn_norm.buf(), n, D, c.norm_eps);
        // 7. MLP sublayer: SwiGLU, down projection, residual (and the next
        //    layer's attention norm).
        const MatmulPart gate_up[] = {{ws.gate.buf(), w.w_gate.buf(), F},
                                      {ws.up.buf(), w.w_up.buf(), F}};
        be.matmul_parts(ws.xb.buf(), n, D, gate_up);
        be.swiglu(ws.gate.buf(), ws.gate.buf(), ws.up.buf(), std::size_t(n) * F);
        be.matmul(ws.proj.buf(), ws.gate.buf(), w.w_down.buf(), n, D, F);
        if (l + 1 < c.n_layers) {
            be.add_rmsnorm(ws.x.buf(), ws.proj.buf(), ws.xb.buf(),
                           model.layers[std::size_t(l) + 1].attn_norm.buf(), n, D, c.norm_eps);
        } else {
            be.add(ws.x.buf(), ws.proj.buf(), nd);
        }
    }
    // Probes were collected layer by layer; put them back in the caller's order.
    if (probes.attention.size() > 1) {
        std::vector<std::vector<float>> ordered(probes.attention.size());
        std::vector<std::vector<float>> ordered_scores(out.attention_scores.size());
        std::size_t next = 0;
        for (int l = 0; l < c.n_layers; ++l) {
            for (std::size_t i = 0; i < probes.attention.size(); ++i) {
                if (probes.attention[i].layer != l) continue;
                if (!ordered_scores.empty())
                    ordered_scores[i] = std::move(out.attention_scores[next]);
                ordered[i] = std::move(out.attention_probs[next++]);
            }
        }
        out.attention_probs = std::move(ordered);
        out.attention_scores = std::move(ordered_scores);
    }

    // 8. Final norm and classifier: only each sequence's last position (all of
    //    a one-sequence chunk's positions when a probe asks), gathered into
    //    consecutive rows of xb by the norm itself, then one product.
    int rows = 0;
    for (std::size_t i = 0; i < n_items; ++i) {
        const int take = probes.all_logits ? row0[i + 1] - row0[i] : 1;
        const int first = row0[i + 1] - take;
        be.rmsnorm(ws.xb.buf().slice(std::size_t(rows) * D, std::size_t(take) * D),
                   ws.x.buf().slice(std::size_t(first) * D, std::size_t(take) * D),
                   model.final_norm.buf(), take, D, c.norm_eps);
        rows += take;
    }
    const int V = c.vocab_size;
    ws.ensure_logits(rows, V);
    be.matmul(ws.logits.buf(), ws.xb.buf(), model.classifier_buf(), rows, V, D);
    // 9. The one copy back per step: rows x V floats of logits to the host,
    //    where the sampler reads them (a span of its own, so the trace shows
    //    what a copy costs next to the compute around it).
    if (probes.logits_stay_on_device) return out;
    out.logits.resize(std::size_t(rows) * V);
    const double t_copy = trace != nullptr ? trace->now_us() : 0;
    be.download(out.logits.data(), ws.logits.buf(), out.logits.size());
    if (trace != nullptr && trace->enabled)
        trace->span("copy logits to host", "copy", t_copy,
                    {{"bytes", std::to_string(out.logits.size() * sizeof(float))}});
    return out;
}

ChunkOutput forward_chunk(const DeviceModel& model, KvCache& cache, Sequence& seq,
                          std::span<const int32_t> tokens, Workspace& ws,
                          const ForwardProbes& probes, Trace* trace, const Mask& mask) {
    const StepItem item{&seq, tokens, mask};
    return forward_step(model, cache, std::span<const StepItem>(&item, 1), ws, probes, trace);
}

}  // namespace plab
