#include "runtime/device_model.h"

#include "core/rope.h"

namespace plab {
namespace {

DeviceArray upload(Backend& b, const std::vector<float>& host) {
    DeviceArray a(b, host.size());
    b.upload(a.buf(), host.data(), host.size());
    return a;
}

}  // namespace

DeviceModel::DeviceModel(Backend& backend, const Weights& w)
    : backend_(&backend), config_(w.config) {
    w.validate();
    tok_embeddings = upload(backend, w.tok_embeddings);
    for (const LayerWeights& l : w.layers) {
        DeviceLayer d;
        d.attn_norm = upload(backend, l.attn_norm);
        d.wq = upload(backend, l.wq);
        d.wk = upload(backend, l.wk);
        d.wv = upload(backend, l.wv);
        d.wo = upload(backend, l.wo);
        d.ffn_norm = upload(backend, l.ffn_norm);
        d.w_gate = upload(backend, l.w_gate);
        d.w_up = upload(backend, l.w_up);
        d.w_down = upload(backend, l.w_down);
        layers.push_back(std::move(d));
    }
    final_norm = upload(backend, w.final_norm);
    if (!config_.tied_embeddings) classifier = upload(backend, w.classifier);
    const RopeTable rope =
        make_rope_table(config_.max_seq_len, config_.head_dim, config_.rope_theta);
    // The matmul weights, each (N, K): the backend may repack them once here.
    const ModelConfig& c = config_;
    const int qd = c.n_heads * c.head_dim, kvd = c.n_kv_heads * c.head_dim;
    for (const DeviceLayer& d : layers) {
        backend.prepare_weight(d.wq.buf(), qd, c.dim);
        backend.prepare_weight(d.wk.buf(), kvd, c.dim);
        backend.prepare_weight(d.wv.buf(), kvd, c.dim);
        backend.prepare_weight(d.wo.buf(), c.dim, qd);
        backend.prepare_weight(d.w_gate.buf(), c.hidden_dim, c.dim);
        backend.prepare_weight(d.w_up.buf(), c.hidden_dim, c.dim);
        backend.prepare_weight(d.w_down.buf(), c.dim, c.hidden_dim);
    }
    backend.prepare_weight(classifier_buf(), c.vocab_size, c.dim);
    rope_cos = upload(backend, rope.cos);
    rope_sin = upload(backend, rope.sin);
}

}  // namespace plab
