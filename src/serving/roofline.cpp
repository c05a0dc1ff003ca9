#include "serving/roofline.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "runtime/cost_model.h"

namespace plab {

double RooflineCost::peak_flops() const {
    return hardware.peak_tflops(dtype) * 1e12;
}

double RooflineCost::bandwidth_bytes() const {
    return hardware.bandwidth_gb_per_s * 1e9;
}

std::string RooflineCost::describe() const {
    return shape_name + " " + dtype_name(dtype) + " on " + hardware.name + ", roofline";
}

std::vector<SpanShape> RooflineCost::spans_of(const Schedule& s) {
    std::vector<SpanShape> v;
    for (const ScheduledSpan& span : s.spans) {
        const Request& r = *span.request;
        const int rows = sampled_rows(span);
        v.push_back({span.n_tokens, r.seq.length - span.n_tokens, rows > 0, std::max(rows, 1)});
    }
    return v;
}

RooflineStep RooflineCost::step(const std::vector<SpanShape>& spans, bool cold) const {
    const ModelConfig& c = shape;
    const double flop_rate = peak_flops() * hardware.compute_efficiency;
    const double byte_rate = bandwidth_bytes() * hardware.bandwidth_efficiency;
    const double wb = weight_bytes(dtype), ab = activation_bytes(dtype);
    const double D = c.dim, L = c.n_layers, F = c.hidden_dim;
    const double qd = double(c.n_heads) * c.head_dim, kvd = double(c.n_kv_heads) * c.head_dim;
    auto op = [&](const std::string& name, double flops, double bytes) {
        return OperatorTime{name, flops, bytes, flops / flop_rate * 1e6, bytes / byte_rate * 1e6};
    };
    RooflineStep st;
    double rows = 0, sampling = 0;
    for (const SpanShape& s : spans) {
        rows += s.n_tokens;
        sampling += s.samples ? s.sampled_rows : 0;
    }
    if (rows == 0) return st;
    // Linear layers: every weight of every layer read once for all rows of the
    // step; per row and layer the activations in and out of each product.
    const PrefillCost all = prefill_cost(c, static_cast<int>(rows), 0);
    const double layer_weights = L * (D * qd + 2 * D * kvd + qd * D + 3 * D * F + 2 * D) * wb;
    const double activations = rows * L * (4 * D + 2 * qd + 2 * kvd + 5 * F) * ab;
    st.ops.push_back(op("linear", all.projection_flops, layer_weights + activations));
    // Attention, per sequence: its queries against every cached and new key,
    // reading all that K/V and writing the new rows'.
    for (const SpanShape& s : spans) {
        const PrefillCost k = prefill_cost(c, s.n_tokens, s.pos0);
        const double kv = L * 2 * kvd * ab;  // bytes of K and V per position
        const double bytes = double(s.pos0 + s.n_tokens) * kv + double(s.n_tokens) * kv +
                             L * s.n_tokens * 2 * qd * ab;
        st.ops.push_back(op("attention", k.attention_flops, bytes));
    }
    // The classifier, for the rows that sample (a prompt's earlier chunks do not).
    if (sampling > 0) {
        const double V = c.vocab_size;
        st.ops.push_back(
            op("classifier", sampling * 2 * D * V, (V * D + D) * wb + sampling * V * 4));
    }
    double compute_side = 0, memory_side = 0;
    for (const OperatorTime& o : st.ops) {
        st.us += o.us();
        (o.compute_us >= o.memory_us ? compute_side : memory_side) += o.us();
    }
    st.overhead_us = hardware.step_overhead_us + hardware.per_sequence_us * double(spans.size()) +
                     (cold ? hardware.cold_step_us : 0);
    st.us += st.overhead_us;
    st.bound = compute_side > memory_side ? "compute" : "memory";
    return st;
}

StepDuration RooflineCost::clock(std::shared_ptr<std::vector<std::string>> bounds) const {
    return [cost = *this, bounds](const ModelConfig&, const Schedule& s) {
        const RooflineStep st = cost.step(spans_of(s), s.idle_before_us >= kColdAfterIdleUs);
        if (bounds) bounds->push_back(st.bound);
        return st.us;
    };
}

int kv_blocks_on_card(const RooflineCost& cost, double utilization, int block_size,
                      const Workload& w) {
    PLAB_CHECK(utilization > 0 && utilization <= 1,
               "--gpu-memory-utilization " << utilization << " must be in (0, 1]");
    const double weights = weights_bytes(cost.shape, cost.dtype);
    const double room = cost.hardware.memory_gb * 1e9 * utilization - weights;
    PLAB_CHECK(room > 0, cost.shape_name << " in " << dtype_name(cost.dtype) << " ("
                                         << weights / 1e9 << " GB of weights) does not fit in "
                                         << utilization * 100 << " % of " << cost.hardware.name
                                         << "'s " << cost.hardware.memory_gb
                                         << " GB; pick a larger card or a smaller precision");
    const double per_block = block_size * kv_bytes_per_token(cost.shape, cost.dtype);
    const double on_card = std::floor(room / per_block);
    PLAB_CHECK(on_card >= 1, "no KV block of " << cost.shape_name << " fits beside its weights on "
                                               << cost.hardware.name);
    double need = 1;
    for (const WorkloadRequest& r : w.requests) {
        // A text prompt's length is known only once encoded: counted as 4096.
        const double tokens =
            double(r.prompt_tokens > 0 ? r.prompt_tokens : 4096) + r.max_new_tokens;
        need += std::ceil(tokens / block_size) + 1;
    }
    return static_cast<int>(std::min(on_card, need));
}

}  // namespace plab
