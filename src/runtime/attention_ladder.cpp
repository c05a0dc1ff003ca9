// The attention ladder run and measured (runtime/attention_ladder.h).
#include "runtime/attention_ladder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/backend.h"
#include "core/random.h"
#include "gpu_backend.h"
#include "runtime/registry.h"

namespace plab {

LadderProblem random_ladder_problem(int n_queries, int pos0, int n_heads, int n_kv_heads,
                                    int head_dim, int block_size, std::uint64_t seed) {
    LadderProblem p;
    p.s = attention_shape(n_queries, pos0, n_heads, n_kv_heads, head_dim, block_size);
    const int n_keys = p.s.n_keys();
    const int n_blocks = (n_keys + block_size - 1) / block_size;
    const int pool_blocks = n_blocks + 2;  // spare blocks no position uses
    std::vector<int32_t> all(static_cast<std::size_t>(pool_blocks));
    std::iota(all.begin(), all.end(), 0);
    random::Engine rng(seed);
    random::shuffle(all.begin(), all.end(), rng);
    p.table.assign(all.begin(), all.begin() + n_blocks);
    const std::size_t row = std::size_t(n_kv_heads) * head_dim;
    p.k_pool.assign(std::size_t(pool_blocks) * block_size * row, NAN);
    p.v_pool = p.k_pool;
    for (int pos = 0; pos < n_keys; ++pos) {
        const std::size_t slot = std::size_t(kv_slot(p.table.data(), pos, block_size));
        for (std::size_t e = 0; e < row; ++e) {
            p.k_pool[slot * row + e] = random::uniform(rng, -2.0f, 2.0f);
            p.v_pool[slot * row + e] = random::uniform(rng, -1.0f, 1.0f);
        }
    }
    p.q.resize(std::size_t(n_queries) * n_heads * head_dim);
    for (float& x : p.q) x = random::uniform(rng, -2.0f, 2.0f);
    return p;
}

LadderProblem ladder_chunk(const LadderProblem& whole, int first, int count) {
    LadderProblem c = whole;
    c.s.pos0 = whole.s.pos0 + first;
    c.s.n_queries = count;
    const std::size_t row = std::size_t(whole.s.n_heads) * whole.s.head_dim;
    c.q.assign(whole.q.begin() + first * row, whole.q.begin() + (first + count) * row);
    return c;
}

std::vector<float> cpu_ref_attention(const LadderProblem& p) {
    auto cpu = make_backend("cpu-ref");
    auto up = [&](const std::vector<float>& v) {
        DeviceArray a(*cpu, v.size());
        cpu->upload(a.buf(), v.data(), v.size());
        return a;
    };
    DeviceArray q = up(p.q), k = up(p.k_pool), v = up(p.v_pool), out(*cpu, p.q.size());
    cpu->attention(out.buf(), q.buf(), k.buf(), v.buf(), p.table, p.s);
    std::vector<float> h(p.q.size());
    cpu->download(h.data(), out.buf(), h.size());
    return h;
}

std::vector<float> ladder_chunked(LadderRung rung, const LadderProblem& whole,
                                  const std::vector<int>& plan) {
    std::vector<float> out;
    int first = 0;
    for (int n : plan) {
        const LadderRun r = gpu_emulated::run_attention_rung(rung, ladder_chunk(whole, first, n));
        out.insert(out.end(), r.out.begin(), r.out.end());
        first += n;
    }
    return out;
}

LadderTolerance ladder_tolerance(LadderRung rung) {
    // naive sums as cpu-ref does; the others rescale as the max grows (and
    // flash sums lane shares in a tree): outputs of size ~1, a few ulp.
    if (rung == LadderRung::naive) return {true, 0, 0};
    return {false, 1e-6, 1e-5};
}

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

LadderRow measure_rung(LadderRung rung, const LadderProblem& p, const std::vector<float>& want,
                       const std::vector<int>& plan, bool native) {
    LadderRow row;
    row.rung = ladder_rung_name(rung);
    row.tolerance = ladder_tolerance(rung);
    const LadderRun r = gpu_emulated::run_attention_rung(rung, p);
    row.kv_bytes = r.counts.kv_bytes;
    row.flops = r.counts.flops;
    row.emulated_seconds = r.seconds;
    row.bitwise_cpu_ref = same_bits(r.out, want);
    row.within_tolerance = true;
    for (std::size_t i = 0; i < want.size(); ++i) {
        const double diff = std::fabs(double(r.out[i]) - want[i]);
        if (!(diff <= row.max_abs_diff)) row.max_abs_diff = diff;  // NaN propagates
        if (!(diff <= row.tolerance.atol + row.tolerance.rtol * std::fabs(want[i])))
            row.within_tolerance = false;
    }
    if (row.tolerance.bitwise) row.within_tolerance = row.bitwise_cpu_ref;
    row.chunk_invariant = same_bits(ladder_chunked(rung, p, plan), r.out);
#if PLAB_HAVE_CUDA
    if (native) row.native_seconds = gpu_native::run_attention_rung(rung, p).seconds;
#else
    (void)native;
#endif
    return row;
}

}  // namespace

LadderReport run_attention_ladder(int n_queries, int n_heads, int n_kv_heads, int head_dim,
                                  std::uint64_t seed) {
    LadderReport rep;
    rep.n_queries = n_queries;
    rep.n_heads = n_heads;
    rep.n_kv_heads = n_kv_heads;
    rep.head_dim = head_dim;
    rep.gpu_form = gpu_form_description();
    // Three chunks of unequal length, the last one query long (a decode step).
    const int a = std::max(1, n_queries / 3), b = std::max(0, n_queries - a - 1);
    rep.chunks = {a};
    if (b > 0) rep.chunks.push_back(b);
    if (a + b < n_queries) rep.chunks.push_back(n_queries - a - b);
    const LadderProblem p =
        random_ladder_problem(n_queries, 0, n_heads, n_kv_heads, head_dim, 16, seed);
    const std::vector<float> want = cpu_ref_attention(p);
    const bool native = rep.gpu_form.rfind("native", 0) == 0;
    for (LadderRung rung : kLadderRungs)
        rep.rows.push_back(measure_rung(rung, p, want, rep.chunks, native));
    return rep;
}

}  // namespace plab
