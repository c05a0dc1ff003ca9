#include "runtime/forward.h"

#include <cmath>

#include "core/attention_spec.h"
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

// RoPE for rows 0..n-1 at cache positions pos0.., each rotated by its
// mask.rope_position: one rope call per run of consecutive positions (the
// whole chunk under every mask but packed documents, whose positions restart
// at each document's first token).
static void rope_by_document(Backend& be, Buffer x, int n, int n_heads, int head_dim, int pos0,
                             const Mask& mask, const DeviceModel& model) {
    const std::size_t row = std::size_t(n_heads) * head_dim;
    int i = 0;
    while (i < n) {
        const int start = mask.rope_position(pos0 + i);
        int j = i + 1;
        while (j < n && mask.rope_position(pos0 + j) == start + (j - i)) ++j;
        be.rope(x.slice(std::size_t(i) * row, std::size_t(j - i) * row), j - i, n_heads, head_dim,
                start, model.rope_cos.buf(), model.rope_sin.buf());
        i = j;
    }
}

ChunkOutput forward_chunk(const DeviceModel& model, KvCache& cache, Sequence& seq,
                          std::span<const int32_t> tokens, Workspace& ws,
                          const ForwardProbes& probes, Trace* trace, const Mask& mask) {
    const ModelConfig& c = model.config();
    Backend& be = model.backend();
    const int n = static_cast<int>(tokens.size());  // C
    const int pos0 = seq.length;                    // p: positions already cached
    PLAB_ASSERT(n >= 1);
    PLAB_CHECK(pos0 + n <= c.max_seq_len, "sequence of " << pos0 + n
                                                         << " tokens exceeds the model's "
                                                            "max_seq_len of "
                                                         << c.max_seq_len);
    for (const AttentionProbe& p : probes.attention) {
        PLAB_CHECK(p.layer >= 0 && p.layer < c.n_layers && p.head >= 0 && p.head < c.n_heads,
                   "attention probe (layer " << p.layer << ", head " << p.head
                                             << ") out of range: layers 0.." << c.n_layers - 1
                                             << ", heads 0.." << c.n_heads - 1);
    }
    ws.ensure(c, n);
    const int D = c.dim, F = c.hidden_dim;
    const int qd = c.n_heads * c.head_dim, kvd = c.n_kv_heads * c.head_dim;
    const std::size_t nd = std::size_t(n) * D;

    // 1. Token embeddings: one row of the table per token.
    be.embed(ws.x.buf(), tokens, model.tok_embeddings.buf(), D);

    // 2. Room in the KV cache for the chunk's positions pos0..pos0+n-1.
    const std::vector<int32_t> slots = cache.reserve(seq, n);
    AttentionShape shape;
    shape.n_queries = n;
    shape.pos0 = pos0;
    shape.n_heads = c.n_heads;
    shape.n_kv_heads = c.n_kv_heads;
    shape.head_dim = c.head_dim;
    shape.block_size = cache.block_size();
    shape.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    shape.mask = mask;

    ChunkOutput out;
    for (int l = 0; l < c.n_layers; ++l) {
        const DeviceLayer& w = model.layers[static_cast<std::size_t>(l)];
        // 3. Attention sublayer: normalise, project to Q, K, V, rotate by position
        //    (the position within its document under packed documents).
        be.rmsnorm(ws.xb.buf(), ws.x.buf(), w.attn_norm.buf(), n, D, c.norm_eps);
        be.matmul(ws.q.buf(), ws.xb.buf(), w.wq.buf(), n, qd, D);
        be.matmul(ws.k.buf(), ws.xb.buf(), w.wk.buf(), n, kvd, D);
        be.matmul(ws.v.buf(), ws.xb.buf(), w.wv.buf(), n, kvd, D);
        rope_by_document(be, ws.q.buf(), n, c.n_heads, c.head_dim, pos0, mask, model);
        rope_by_document(be, ws.k.buf(), n, c.n_kv_heads, c.head_dim, pos0, mask, model);
        // 4. Keep K and V: later chunks and decode steps read them from the cache.
        be.kv_append(cache.k_pool(l), cache.v_pool(l), ws.k.buf(), ws.v.buf(), slots, kvd);
        if (trace != nullptr && trace->enabled) {
            std::string blocks;
            for (int b = pos0 / shape.block_size; b <= (pos0 + n - 1) / shape.block_size; ++b) {
                blocks += (blocks.empty() ? "" : ",") + std::to_string(seq.block_table[b]);
            }
            // The slots kv_append was given, as runs "first-last" of consecutive slots
            // (one run per block touched): where each position really went.
            std::string slot_runs;
            for (std::size_t i = 0; i < slots.size(); ++i) {
                if (i > 0 && slots[i] == slots[i - 1] + 1) continue;
                std::size_t e = i;
                while (e + 1 < slots.size() && slots[e + 1] == slots[e] + 1) ++e;
                slot_runs += (slot_runs.empty() ? "" : ",") + std::to_string(slots[i]) + "-" +
                             std::to_string(slots[e]);
            }
            trace->instant(
                "kv append", "kv",
                {{"layer", std::to_string(l)},
                 {"positions", std::to_string(pos0) + "-" + std::to_string(pos0 + n - 1)},
                 {"blocks", blocks},
                 {"slots", slot_runs}});
        }
        // 5. Masked attention of the n queries over cache positions 0..pos0+n-1
        //    (causal unless the session was given another mask).
        be.attention(ws.att.buf(), ws.q.buf(), cache.k_pool(l), cache.v_pool(l), seq.block_table,
                     shape);
        for (const AttentionProbe& p : probes.attention) {
            if (p.layer != l) continue;
            // Probabilities and scores both come from the backend that computed them.
            const std::size_t cells = std::size_t(n) * shape.n_keys();
            DeviceArray probs(be, cells);
            DeviceArray scores;
            if (probes.attention_scores) scores = DeviceArray(be, cells);
            be.attention_probs(probs.buf(), scores.buf(), ws.q.buf(), cache.k_pool(l),
                               seq.block_table, shape, p.head);
            std::vector<float> host(cells);
            be.download(host.data(), probs.buf(), cells);
            out.attention_probs.push_back(std::move(host));
            if (probes.attention_scores) {
                std::vector<float> host_scores(cells);
                be.download(host_scores.data(), scores.buf(), cells);
                out.attention_scores.push_back(std::move(host_scores));
            }
        }
        // 6. Output projection and residual.
        be.matmul(ws.proj.buf(), ws.att.buf(), w.wo.buf(), n, D, qd);
        be.add(ws.x.buf(), ws.proj.buf(), nd);
        // 7. MLP sublayer: normalise, SwiGLU, down projection, residual.
        be.rmsnorm(ws.xb.buf(), ws.x.buf(), w.ffn_norm.buf(), n, D, c.norm_eps);
        be.matmul(ws.gate.buf(), ws.xb.buf(), w.w_gate.buf(), n, F, D);
        be.matmul(ws.up.buf(), ws.xb.buf(), w.w_up.buf(), n, F, D);
        be.swiglu(ws.gate.buf(), ws.gate.buf(), ws.up.buf(), std::size_t(n) * F);
        be.matmul(ws.proj.buf(), ws.gate.buf(), w.w_down.buf(), n, D, F);
        be.add(ws.x.buf(), ws.proj.buf(), nd);
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

    // 8. Final norm and classifier: only the last position, unless a probe asks for all.
    const int rows = probes.all_logits ? n : 1;
    const int first = n - rows;
    const int V = c.vocab_size;
    be.rmsnorm(ws.xb.buf(), ws.x.buf().slice(std::size_t(first) * D, std::size_t(rows) * D),
               model.final_norm.buf(), rows, D, c.norm_eps);
    ws.ensure_logits(rows, V);
    be.matmul(ws.logits.buf(), ws.xb.buf(), model.classifier_buf(), rows, V, D);
    out.logits.resize(std::size_t(rows) * V);
    be.download(out.logits.data(), ws.logits.buf(), out.logits.size());
    return out;
}

}  // namespace plab
