#include "perf/bench_util.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "perf/host_timed_backend.h"

namespace plab {

// The machine figures (GEMM peak, copy and read bandwidth) are measured on
// the host: they bound the CPU backends only. A GPU reads its weights from
// its own memory; on the H200 the host's figures put gpu at "381% of peak".
bool held_to_host_limits(const std::string& backend) {
    return backend.rfind("cpu", 0) == 0;
}

}  // namespace plab

namespace plab::bench_detail {

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

// `stream` picks one of many fixed sequences (distinct prompts of a batch).
std::vector<int32_t> bench_tokens(int n, int vocab, std::uint64_t stream) {
    std::vector<int32_t> t(static_cast<std::size_t>(n));
    // xorshift: fixed, non-trivial token ids; the stream moves the (never zero) seed.
    std::uint64_t x = 88172645463325252ull ^ (stream * 0x9E3779B97F4A7C15ull);
    if (x == 0) x = 88172645463325252ull;
    for (auto& id : t) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        id = static_cast<int32_t>(x % static_cast<std::uint64_t>(vocab));
    }
    return t;
}

SessionOptions session_for(const std::vector<int32_t>& tokens, const ModelConfig& c,
                           const BenchOptions& o) {
    SessionOptions so;
    MaskContext mc;
    mc.tokens = tokens;
    mc.n_heads = c.n_heads;
    so.mask = make_mask(o.mask, mc);
    return so;
}

// Whether the backend's op times are a host clock's (the HostTimedBackend
// wrapper around a CPU backend) rather than a device's events.
bool timed_on_host(const Backend& backend) {
    return dynamic_cast<const HostTimedBackend*>(&backend) != nullptr;
}

// The ops the backend timed since its last take, summed by name, largest first.
DeviceOpBreakdown ops_by_name(Backend& backend, double wall_ms) {
    DeviceOpBreakdown b;
    b.backend = backend.name();
    b.clock = timed_on_host(backend) ? "host" : "device";
    b.wall_ms = wall_ms;
    for (const DeviceOpTime& t : backend.take_device_op_times()) {
        auto it = std::find_if(b.ops.begin(), b.ops.end(),
                               [&](const DeviceOpRow& row) { return row.op == t.op; });
        if (it == b.ops.end()) it = b.ops.insert(b.ops.end(), DeviceOpRow{t.op, 0, 0});
        it->launches += 1;
        it->ms += t.ms;
        b.ops_ms += t.ms;
    }
    std::stable_sort(b.ops.begin(), b.ops.end(),
                     [](const DeviceOpRow& a, const DeviceOpRow& z) { return a.ms > z.ms; });
    return b;
}

// The run of median wall time (the lower middle one of an even count), with
// the number of runs it is the median of: a host's op tables are timed more
// than once, since one run on a noisy machine can be twice as slow as the next.
DeviceOpBreakdown median_by_wall_time(std::vector<DeviceOpBreakdown> runs) {
    PLAB_ASSERT(!runs.empty());
    std::sort(runs.begin(), runs.end(), [](const DeviceOpBreakdown& a, const DeviceOpBreakdown& z) {
        return a.wall_ms < z.wall_ms;
    });
    DeviceOpBreakdown kept = runs[(runs.size() - 1) / 2];
    kept.runs = static_cast<int>(runs.size());
    return kept;
}

std::unique_ptr<Backend> timing_ops(std::unique_ptr<Backend> backend) {
    if (backend->times_device_ops()) return backend;
    return std::make_unique<HostTimedBackend>(std::move(backend));
}

}  // namespace plab::bench_detail
