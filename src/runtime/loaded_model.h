// LoadedModel: a model's weights uploaded once to one backend — the one thing
// both entry points of the engine run on.
//
// What it teaches: loading is separate from running. The registry makes a
// backend; the weights go to its memory once (runtime/device_model.h); then
//   * a Session (runtime/session.h) runs one sequence over it — a chunk plan,
//     its own KV cache: what lessons 1-4 and 14 teach — and
//   * an Engine (runtime/engine.h) runs many sequences over it — a token
//     budget, one block pool, a scheduler: what the serving lessons teach —
// both through the one forward_step (runtime/forward.h). A client loads once
// and runs as many sessions and engines on it as it likes; nothing builds an
// Engine just to borrow its backend.
//
// Timing wraps a backend from outside: perf builds a LoadedModel over its
// timing wrapper (perf/host_timed_backend.h) and hands it to an Engine, which
// never knows.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/backend.h"
#include "core/kernel_choice.h"
#include "model/weights.h"
#include "runtime/device_model.h"

namespace plab {

class LoadedModel {
public:
    // The backend of that name (runtime/registry.h), with that kernel set
    // (core/kernel_choice.h), and the weights uploaded to it.
    LoadedModel(const Weights& weights, const std::string& backend_name,
                Kernels kernels = Kernels::invariant);
    // A backend the caller made (or wrapped), with the weights uploaded to it.
    LoadedModel(const Weights& weights, std::unique_ptr<Backend> backend);
    ~LoadedModel();
    LoadedModel(const LoadedModel&) = delete;
    LoadedModel& operator=(const LoadedModel&) = delete;

    Backend& backend() const { return *backend_; }
    const DeviceModel& device() const { return *device_; }
    const ModelConfig& config() const { return device_->config(); }
    // The model's identity (its shape and token embeddings, hashed): mixed into
    // every block name of an engine's prefix cache.
    std::uint64_t identity() const { return identity_; }

private:
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<DeviceModel> device_;  // freed before the backend whose memory it holds
    std::uint64_t identity_ = 0;
};

}  // namespace plab
