#include "perf/bench.h"

#include <algorithm>
#include <chrono>

#include "backends/registry.h"
#include "core/error.h"
#include "perf/flops.h"
#include "runtime/chunk_plan.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace plab {
namespace {

double median(std::vector<double> v) {
    PLAB_ASSERT(!v.empty());
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

std::vector<int32_t> bench_tokens(int n, int vocab) {
    std::vector<int32_t> t(static_cast<std::size_t>(n));
    std::uint64_t x = 88172645463325252ull;  // xorshift: fixed, non-trivial token ids
    for (auto& id : t) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        id = static_cast<int32_t>(x % static_cast<std::uint64_t>(vocab));
    }
    return t;
}

}  // namespace

BenchReport run_bench(const Weights& weights, const BenchOptions& o) {
    const ModelConfig& c = weights.config;
    for (int n : o.lengths) {
        PLAB_CHECK(n >= 1 && n <= c.max_seq_len,
                   "bench length " << n << " must be between 1 and max_seq_len " << c.max_seq_len);
    }
    PLAB_CHECK(o.decode_prompt >= 1 && o.decode_prompt + o.decode_steps <= c.max_seq_len,
               "decode prompt + steps must fit in max_seq_len " << c.max_seq_len);
    // The mask bound to each benchmark prompt (random ids: no BOS, so no docs:bos).
    auto session_for = [&](const std::vector<int32_t>& tokens) {
        SessionOptions so;
        MaskContext mc;
        mc.tokens = tokens;
        mc.n_heads = c.n_heads;
        so.mask = make_mask(o.mask, mc);
        return so;
    };
    BenchReport r;
    r.config = c;
    r.machine = measure_machine();
    for (const std::string& name : o.backends) {
        auto backend = make_backend(name);
        DeviceModel model(*backend, weights);
        {
            // Warm-up, untimed: starts the thread pool and touches every weight once.
            const std::vector<int32_t> warm_tokens = bench_tokens(16, c.vocab_size);
            Session warm(model, session_for(warm_tokens));
            warm.prefill(warm_tokens, ChunkPlan{{16}});
        }
        for (int n : o.lengths) {
            const std::vector<int32_t> tokens = bench_tokens(n, c.vocab_size);
            const ChunkPlan plan = parse_chunk_plan(o.chunks, n);
            std::vector<double> times;
            const double start = now_s();
            for (int i = 0; i < o.repeats; ++i) {
                Session s(model, session_for(tokens));  // cold: an empty KV cache every run
                times.push_back(s.prefill(tokens, plan).prefill_us * 1e-6);
                if (now_s() - start > o.budget_s) break;
            }
            PrefillBenchRow row;
            row.backend = backend->name();
            row.tokens = n;
            row.runs = static_cast<int>(times.size());
            row.median_s = median(times);
            row.tokens_per_s = n / row.median_s;
            row.gflops = prefill_cost(c, n).total() / row.median_s / 1e9;
            row.fraction_of_peak = row.gflops / r.machine.gemm_gflops;
            r.prefill.push_back(row);
        }
        // Decode: prefill a short prompt, then time single-token steps.
        const std::vector<int32_t> prompt = bench_tokens(o.decode_prompt, c.vocab_size);
        Session s(model, session_for(prompt));
        s.prefill(prompt, ChunkPlan{{o.decode_prompt}});
        std::vector<double> steps;
        int32_t token = prompt.back();
        for (int i = 0; i < o.decode_steps; ++i) {
            const double t0 = now_s();
            const std::vector<float> logits = s.decode_step(token);
            backend->synchronize();
            steps.push_back(now_s() - t0);
            token = argmax(logits);
        }
        DecodeBenchRow d;
        d.backend = backend->name();
        d.context = o.decode_prompt + o.decode_steps / 2;
        d.steps = o.decode_steps;
        d.median_step_s = median(steps);
        d.tokens_per_s = 1.0 / d.median_step_s;
        d.bytes_per_token = decode_bytes(c, d.context);
        d.bound_tokens_per_s = r.machine.copy_gb_per_s * 1e9 / d.bytes_per_token;
        d.fraction_of_bound = d.tokens_per_s / d.bound_tokens_per_s;
        d.read_bound_tokens_per_s = r.machine.read_gb_per_s * 1e9 / d.bytes_per_token;
        d.fraction_of_read_bound = d.tokens_per_s / d.read_bound_tokens_per_s;
        r.decode.push_back(d);
    }
    return r;
}

}  // namespace plab
