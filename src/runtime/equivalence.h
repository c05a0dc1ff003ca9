// Equivalence report: does a prefill's output depend on the chunk plan or the backend?
//
// What it teaches: chunked prefill must equal full prefill. Reference backends
// must match bit for bit; fast backends reorder sums (GEMM blocking, tiles,
// online softmax) and so differ in the last bits — the report shows by how
// much, on the last position's logits and on every cached K and V.
#pragma once

#include <string>
#include <vector>

#include "runtime/chunk_plan.h"
#include "runtime/device_model.h"
#include "runtime/session.h"

namespace plab {

// Everything a prefill leaves behind that must not depend on the plan.
struct PrefillSnapshot {
    std::string backend;
    ChunkPlan plan;
    std::vector<float> last_logits;        // (V)
    std::vector<std::vector<float>> k, v;  // per layer: (T, Hkv·Dh)
};

// What `session` holds right after it prefilled `result` (from an empty cache).
PrefillSnapshot snapshot_of(const Session& session, const PrefillResult& result);

// A fresh session prefills `tokens` with `plan`; its snapshot. `prefill_us`,
// when given, receives the prefill's wall time.
PrefillSnapshot run_prefill_snapshot(const DeviceModel& model, const std::vector<int32_t>& tokens,
                                     const ChunkPlan& plan, const SessionOptions& options = {},
                                     double* prefill_us = nullptr);

struct Difference {
    double logits_max_abs = 0;
    double kv_max_abs = 0;  // over every layer, position, head and component of K and V
    bool logits_bitwise = false;
    bool kv_bitwise = false;
    bool same_argmax = false;
    bool bitwise() const { return logits_bitwise && kv_bitwise; }
};

Difference compare_snapshots(const PrefillSnapshot& a, const PrefillSnapshot& b);

}  // namespace plab
