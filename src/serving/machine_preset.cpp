#include "serving/machine_preset.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "core/error.h"
#include "core/random.h"
#include "runtime/cost_model.h"
#include "serving/roofline.h"

namespace plab {

namespace {

// How long the engine idles before each request of the cold profiles: arrivals
// a few per second find it so.
constexpr int kProfileIdleMs = 50;

// Median step time of `runs` requests of `prompt` tokens run alone; `decode`
// times their decode steps, else their (one-step) prefills. With `idle_ms`,
// the engine idles that long before each request (a cold step).
double median_us(const Model& model, EngineOptions eo, int prompt, int new_tokens, bool decode,
                 int runs, int idle_ms = 0) {
    const ModelConfig& c = model.weights.config;
    random::Engine rng(7);
    auto id = [&](random::Engine& g) {
        return int32_t(random::uniform_int(g, 0, c.vocab_size - 1));
    };
    eo.prefix_cache = false;
    eo.policy = Policy::chunked;
    eo.max_step_tokens = std::max(eo.max_step_tokens, prompt);
    Engine e(model.weights, eo);
    RequestOptions ro;
    ro.max_new_tokens = new_tokens;
    for (int r = 0; r < runs; ++r) {
        std::vector<int32_t> t(static_cast<std::size_t>(prompt));
        for (int32_t& x : t) x = id(rng);
        if (idle_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(idle_ms));
        e.add_request(t, ro);
        e.run();
    }
    std::vector<double> us;
    for (const StepRecord& s : e.steps())
        if (decode ? s.decode_tokens == 1 && s.prefill_tokens == 0 : s.prefill_tokens == prompt)
            us.push_back(s.us);
    PLAB_CHECK(!us.empty(), "profiling ran no step of the kind it times");
    return percentile(us, 0.5);
}

}  // namespace

HardwarePreset profile_this_machine(const Model& model, const EngineOptions& engine,
                                    double peak_gflops, double weights_gb_per_s, double memory_gb) {
    const ModelConfig& c = model.weights.config;
    // Two prefills of the sizes the replay's chunks have (its token budget), so
    // the rate is the one its steps attain (the cpu backend's thread count
    // follows the work: src/core/cpu_threads.h).
    const int n2 = std::min(std::max(engine.max_step_tokens, 32), c.max_seq_len - 1);
    const int n1 = std::max(1, n2 / 4);
    PLAB_CHECK(n2 > n1, "profiling needs a max_seq_len of at least 32");
    const double t1 = median_us(model, engine, n1, 1, false, 7);
    const double t2 = median_us(model, engine, n2, 1, false, 7);
    // Decode steps of requests that each arrive after kProfileIdleMs of idling, as a
    // workload of a few arrivals a second finds the engine: the first steps
    // after a cold prefill run slower, and the median should see them.
    const double d1 = median_us(model, engine, 16, 24, true, 3, kProfileIdleMs);
    // The same long prefill after kProfileIdleMs of idling (arrivals a few per second
    // find the engine so): here it measured 10-35 % slower than back to back.
    const double t2_cold = median_us(model, engine, n2, 1, false, 5, kProfileIdleMs);
    // A cost with the measured peak and bandwidth, to evaluate the operators.
    RooflineCost cost;
    cost.shape = c;
    cost.dtype = Dtype::fp32;
    cost.hardware.fp32_tflops = peak_gflops / 1e3;
    cost.hardware.bandwidth_gb_per_s = weights_gb_per_s;
    cost.hardware.compute_efficiency = cost.hardware.bandwidth_efficiency = 1;
    cost.hardware.step_overhead_us = 0;
    auto ops_us = [&](int n, int pos0, bool compute_only) {
        double us = 0;
        for (const OperatorTime& o : cost.step({{SpanShape{n, pos0, true}}}).ops)
            us += compute_only ? o.compute_us : o.us();
        return us;
    };
    // Prefill: t = overhead + compute_us(n) / efficiency, two lengths.
    const double c1 = ops_us(n1, 0, true), c2 = ops_us(n2, 0, true);
    PLAB_CHECK(t2 > t1, "profiling: a " << n2 << "-token prefill (" << t2
                                        << " us) was not slower than a " << n1 << "-token one ("
                                        << t1 << " us); the machine is too noisy, run again");
    const double efficiency = std::min(1.0, (c2 - c1) / (t2 - t1));
    cost.hardware.compute_efficiency = efficiency;
    // Decode: t = overhead + the roofline of one token after 16 + 12 cached.
    const double overhead = std::max(0.0, d1 - ops_us(1, 16 + 12, false));

    HardwarePreset h;
    h.name = "this-machine";
    h.description = "this machine, profiled now (cpu backend, fp32)";
    h.fp32_tflops = peak_gflops / 1e3;
    h.bandwidth_gb_per_s = weights_gb_per_s;
    h.memory_gb = memory_gb;
    h.compute_efficiency = efficiency;
    h.bandwidth_efficiency = 1;
    h.step_overhead_us = overhead;
    h.cold_step_us = std::max(0.0, t2_cold - t2);
    h.per_sequence_us = 0;
    char buf[420];
    std::snprintf(buf, sizeof buf,
                  "measured: fp32 GEMM peak %.1f GFLOP/s, the weights read at %.1f GB/s; "
                  "profiled: %d- and %d-token prefills %.0f and %.0f us (%.0f %% of the peak), "
                  "a decode step %.0f us (%.1f us of it fixed); after %d ms idle the %d-token "
                  "prefill %.0f us (a cold step +%.0f us)",
                  peak_gflops, weights_gb_per_s, n1, n2, t1, t2, efficiency * 100, d1, overhead,
                  kProfileIdleMs, n2, t2_cold, h.cold_step_us);
    h.source = buf;
    return h;
}

}  // namespace plab
