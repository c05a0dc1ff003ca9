// Running one rung of the attention ladder (attention_ladder.h) on a host
// problem: upload, launch, download, the counts the emulated run made and its
// wall time. Compiled both ways like every kernel: emulated, the counts are
// the kernel's own and the time is the CPU's; native, the time is the GPU's
// (after a warm-up launch) and the counts stay zero.
#include <chrono>

#include "attention_ladder.h"
#include "kernels.h"
#include "ladder_upload.h"

namespace plab::PLAB_SIMT_NS {

namespace {

void launch_rung(LadderRung rung, float* out, const float* q, const float* k, const float* v,
                 const int32_t* table, const AttentionShape& s, unsigned long long* tile_counts,
                 float* totals) {
    switch (rung) {
        case LadderRung::naive:
            return launch_attention_naive(out, q, k, v, table, s);
        case LadderRung::online:
            return launch_attention_online(out, q, k, v, table, s);
        case LadderRung::tiled:
            return launch_attention_tiled(out, q, k, v, table, s);
        case LadderRung::flash:
            launch_attention_flash(out, q, k, v, table, s, tile_counts, nullptr, {}, totals);
            return;
    }
}

}  // namespace

LadderRun run_attention_rung(LadderRung rung, const LadderProblem& p) {
    float* q = ladder_upload(p.q);
    float* k = ladder_upload(p.k_pool);
    float* v = ladder_upload(p.v_pool);
    int32_t* table = ladder_upload(p.table);
    float* out = ladder_upload(std::vector<float>(p.q.size(), NAN));
    float* totals = ladder_upload(std::vector<float>(
        std::max<long long>(1, flash_total_floats(p.s.head_dim, p.s.n_queries, p.s.n_heads)),
        0.0f));
    unsigned long long* tile_counts = ladder_upload(std::vector<unsigned long long>(3, 0ull));
    LadderRun r;
#if !PLAB_SIMT_EMULATED
    launch_rung(rung, out, q, k, v, table, p.s, tile_counts, totals);  // warm-up: code loaded
    PLAB_CUDA_CHECK(cudaDeviceSynchronize());
#endif
    ladder_counts_reset();
    const auto start = std::chrono::steady_clock::now();
    launch_rung(rung, out, q, k, v, table, p.s, tile_counts, totals);
    PLAB_CUDA_CHECK(cudaDeviceSynchronize());
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.counts = ladder_counts_now();
    r.out.resize(p.q.size());
    PLAB_CUDA_CHECK(
        cudaMemcpy(r.out.data(), out, r.out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (void* x : {static_cast<void*>(q), static_cast<void*>(k), static_cast<void*>(v),
                    static_cast<void*>(table), static_cast<void*>(out), static_cast<void*>(totals),
                    static_cast<void*>(tile_counts)})
        PLAB_CUDA_CHECK(cudaFree(x));
    return r;
}

}  // namespace plab::PLAB_SIMT_NS
