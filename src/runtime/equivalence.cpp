#include "runtime/equivalence.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "runtime/sampler.h"

namespace plab {
namespace {

// Max |a-b| and whether every bit agrees.
void diff(const std::vector<float>& a, const std::vector<float>& b, double& max_abs,
          bool& bitwise) {
    PLAB_ASSERT(a.size() == b.size());
    if (!a.empty() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) != 0) {
        bitwise = false;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double d = std::fabs(double(a[i]) - double(b[i]));
        max_abs = std::isnan(d) ? INFINITY : std::max(max_abs, d);
    }
}

}  // namespace

PrefillSnapshot snapshot_of(const Session& session, const PrefillResult& result) {
    PrefillSnapshot s;
    s.backend = session.model().backend().name();
    s.plan = result.plan;
    s.last_logits = result.last_logits;
    for (int l = 0; l < session.model().config().n_layers; ++l) {
        s.k.push_back(session.read_kv(l, KvPart::K));
        s.v.push_back(session.read_kv(l, KvPart::V));
    }
    return s;
}

PrefillSnapshot run_prefill_snapshot(const DeviceModel& model, const std::vector<int32_t>& tokens,
                                     const ChunkPlan& plan, const SessionOptions& options,
                                     double* prefill_us) {
    Session session(model, options);
    const PrefillResult r = session.prefill(tokens, plan);
    if (prefill_us != nullptr) *prefill_us = r.prefill_us;
    return snapshot_of(session, r);
}

Difference compare_snapshots(const PrefillSnapshot& a, const PrefillSnapshot& b) {
    Difference d;
    d.logits_bitwise = true;
    d.kv_bitwise = true;
    diff(a.last_logits, b.last_logits, d.logits_max_abs, d.logits_bitwise);
    PLAB_ASSERT(a.k.size() == b.k.size());
    for (std::size_t l = 0; l < a.k.size(); ++l) {
        diff(a.k[l], b.k[l], d.kv_max_abs, d.kv_bitwise);
        diff(a.v[l], b.v[l], d.kv_max_abs, d.kv_bitwise);
    }
    d.same_argmax = argmax(a.last_logits) == argmax(b.last_logits);
    return d;
}

}  // namespace plab
