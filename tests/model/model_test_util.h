// Helpers for the model tests: paths, and "run this model, give me every logit".
#pragma once

#include <cstdint>
#include <cstdio>
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

// The start of a vocabulary in llama2.c's (Llama 2's) layout, scores 0: <unk> <s> </s>,
// then the 256 byte tokens <0x00>..<0xFF>; a test appends its own pieces.
inline void llama2c_base_vocab(std::vector<std::string>& pieces, std::vector<float>& scores) {
    pieces = {"<unk>", "<s>", "</s>"};
    scores = {0, 0, 0};
    for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        pieces.push_back(buf);
        scores.push_back(0);
    }
}

// Every float of every tensor of `w`, in a fixed order: one vector to compare
// bitwise after a file format's round trip.
inline std::vector<float> all_weight_floats(const Weights& w) {
    std::vector<float> v;
    auto add = [&](const std::vector<float>& t) { v.insert(v.end(), t.begin(), t.end()); };
    add(w.tok_embeddings);
    for (const auto& l : w.layers) {
        for (const auto* t :
             {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down})
            add(*t);
    }
    add(w.final_norm);
    add(w.classifier);
    return v;
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
