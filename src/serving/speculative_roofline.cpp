#include "serving/speculative_roofline.h"

#include "runtime/speculative.h"

namespace plab {

std::vector<SpeculativePoint> speculative_curve(const RooflineCost& cost, double alpha,
                                                double draft_ratio, int context, int k_max,
                                                const std::vector<int>& batches) {
    std::vector<SpeculativePoint> curve;
    for (int b : batches) {
        const std::vector<SpanShape> decode(static_cast<std::size_t>(b), SpanShape{1, context});
        const double decode_us = cost.step(decode).us;
        for (int k = 1; k <= k_max; ++k) {
            SpeculativePoint p;
            p.batch = b;
            p.k = k;
            p.decode_us = decode_us;
            const RooflineStep verify = cost.step(std::vector<SpanShape>(
                static_cast<std::size_t>(b), SpanShape{k + 1, context, true, k + 1}));
            p.verify_us = verify.us;
            p.verify_bound = verify.bound;
            p.draft_us = k * draft_ratio * decode_us;
            p.tokens_per_verify = SpeculativeStats::iid_tokens_per_verify(alpha, k);
            p.speed_up = p.tokens_per_verify * decode_us / (p.verify_us + p.draft_us);
            curve.push_back(p);
        }
    }
    return curve;
}

}  // namespace plab
