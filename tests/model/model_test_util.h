// Helpers for the model tests: paths, and "run this model, give me every logit".
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "model/weights.h"
#include "runtime/chunk_plan.h"
#include "runtime/device_model.h"
#include "runtime/registry.h"
#include "runtime/session.h"

namespace plab::test {

inline std::string repo_path(const std::string& rel) {
    return std::string(PLAB_TESTS_DIR) + "/../" + rel;
}

// The shipped model: assets/model, or $PLAB_MODEL like every `plab` command.
inline std::string shipped_model_dir() {
    const char* env = std::getenv("PLAB_MODEL");
    return env != nullptr && *env != '\0' ? std::string(env) : repo_path("assets/model");
}

// Logits of every position, (T, V), from one full prefill on `backend`.
inline std::vector<float> all_logits(const Weights& w, const std::string& backend,
                                     const std::vector<int32_t>& tokens) {
    auto b = make_backend(backend);
    DeviceModel dm(*b, w);
    Session s(dm);
    ForwardProbes probes;
    probes.all_logits = true;
    return s.prefill(tokens, parse_chunk_plan("full", int(tokens.size())), probes).all_logits;
}

}  // namespace plab::test
