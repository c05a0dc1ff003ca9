// The second launch of a decode call split over key segments (FlashDecoding):
// the segments' partial results merged in segment order, then divided
// (attention_flash_kernel.cuh, step 8a; launched by attention_flash.cu).
#include "attention_flash_kernel.cuh"

namespace plab::PLAB_SIMT_NS {

// A split decode call's second launch: one thread per (query, head, output
// column) merges the segments' partial results in segment order with
// SegmentMerge, as a prefill block merges its segments, and divides: the
// bits of the unsplit kernel.
__global__ void attention_merge_kernel(float* out, const float* partials, int n_queries,
                                       int n_heads, int dh, int segments) {
    const long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= static_cast<long long>(n_queries) * n_heads * dh) return;
    const int col = static_cast<int>(e % dh);
    const long long row = e / dh;  // i * n_heads + h
    float m = -INFINITY, l = 0.0f, a = 0.0f;
    for (int seg = 0; seg < segments; ++seg) {
        const float* part =
            partials + (static_cast<long long>(seg) * n_queries * n_heads + row) * (2 + dh);
        const SegmentMerge g = segment_merge(m, part[0]);
        if (g.kind == SegmentMerge::keep_total) continue;
        m = g.m;
        l = g.apply(l, part[1]);
        a = g.apply(a, part[2 + col]);
    }
    out[e] = a / l;
}

}  // namespace plab::PLAB_SIMT_NS
