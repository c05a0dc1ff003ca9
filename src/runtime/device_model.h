// DeviceModel: a model's weights uploaded once to one backend's memory.
#pragma once

#include <vector>

#include "core/backend.h"
#include "model/weights.h"

namespace plab {

struct DeviceLayer {
    DeviceArray attn_norm, wq, wk, wv, wo;  // shapes as in model/weights.h
    DeviceArray ffn_norm, w_gate, w_up, w_down;
};

class DeviceModel {
public:
    DeviceModel(Backend& backend, const Weights& weights);

    Backend& backend() const { return *backend_; }
    const ModelConfig& config() const { return config_; }

    DeviceArray tok_embeddings;  // (V, D)
    std::vector<DeviceLayer> layers;
    DeviceArray final_norm;  // (D)
    DeviceArray classifier;  // (V, D); empty when tied (use classifier_buf())
    DeviceArray rope_cos;    // (max_seq_len, Dh/2)
    DeviceArray rope_sin;    // (max_seq_len, Dh/2)

    Buffer classifier_buf() const {
        return config_.tied_embeddings ? tok_embeddings.buf() : classifier.buf();
    }

private:
    Backend* backend_;
    ModelConfig config_;
};

}  // namespace plab
