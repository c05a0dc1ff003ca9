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
    const LadderBuffer<float> q_buf(p.q), k_buf(p.k_pool), v_buf(p.v_pool);
    const LadderBuffer<int32_t> table_buf(p.table);
    const LadderBuffer<float> out_buf(std::vector<float>(p.q.size(), NAN));
    const LadderBuffer<float> totals_buf(std::vector<float>(
        std::max<long long>(1, flash_total_floats(p.s.head_dim, p.s.n_queries, p.s.n_heads)),
        0.0f));
    const LadderBuffer<unsigned long long> counts_buf(std::vector<unsigned long long>(3, 0ull));
    float *q = q_buf.get(), *k = k_buf.get(), *v = v_buf.get(), *out = out_buf.get();
    float* totals = totals_buf.get();
    int32_t* table = table_buf.get();
    unsigned long long* tile_counts = counts_buf.get();
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
    r.out = out_buf.download(p.q.size());
    return r;
}

}  // namespace plab::PLAB_SIMT_NS
