// Host memory of the cpu backends (backends/host_buffers.h, issue 13): released
// buffers are handed out again instead of going back to the OS, so a second
// cold prefill does not fault its activations and KV pool in page by page.
//
// What it shows: the cache returns exactly the buffer released for that size,
// never one of another size; it keeps at most its byte limit, oldest out
// first; and, measured with the kernel's own count (getrusage ru_minflt), a
// cold prefill on a warm backend faults almost no pages, where it faulted
// thousands before (the 512-token prefill here: 1,500+ pages).
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <cstdint>

#include "backends/cpu_fast/cpu_fast.h"
#include "backends/host_buffers.h"
#include "core/host_memory.h"
#include "model/weights.h"
#include "runtime/device_model.h"
#include "runtime/session.h"
#include "test_util.h"

using namespace plab;
using namespace plab::test;

namespace {

long minor_faults() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

}  // namespace

TEST_CASE("host buffers: a released buffer comes back for its size only", "[buffers]") {
    HostBufferCache cache(64 * 1024);  // bytes
    float* a = cache.take(1000);
    float* b = cache.take(2000);
    REQUIRE(a != b);
    cache.give_back(a, 1000);
    cache.give_back(b, 2000);
    REQUIRE(cache.stats().cached_bytes == 3000 * sizeof(float));
    float* c = cache.take(1500);  // no buffer of this size: new memory
    REQUIRE((c != a && c != b));
    REQUIRE(cache.take(2000) == b);
    REQUIRE(cache.take(1000) == a);
    REQUIRE(cache.stats().reused == 2);
    REQUIRE(cache.stats().allocated == 3);
    REQUIRE(cache.stats().cached_bytes == 0);
    // Over the limit (64 KiB = 16,384 floats) the oldest go back to the OS.
    cache.give_back(a, 1000);
    cache.give_back(b, 2000);
    cache.give_back(c, 1500);
    float* big = cache.take(12000);
    cache.give_back(big, 12000);  // 16,500 floats kept would be over: a (oldest) goes
    REQUIRE(cache.stats().cached_bytes == (2000 + 1500 + 12000) * sizeof(float));
    REQUIRE(cache.take(2000) == b);
    cache.give_back(b, 2000);
}

#if !defined(__SANITIZE_ADDRESS__)  // under ASan every buffer goes back (host_buffers.h)
TEST_CASE("host buffers: a cold prefill on a warm cpu backend faults almost no pages",
          "[buffers][perf]") {
    // A shape whose activations and KV pool (a few MB each) are far beyond
    // glibc's small-block arenas, so without the cache they come back from the
    // OS as fresh pages on every cold prefill.
    const ModelConfig c = small_config(256, 2, 4, 4, 64, 768, 512, 1024);
    const Weights w = make_random_weights(c, 21);
    CpuFastBackend backend;
    const DeviceModel model(backend, w);
    const std::vector<int32_t> tokens = random_tokens(512, c.vocab_size, 4);
    const auto cold_prefill = [&] {
        Session s(model, {});  // an empty KV cache, as plab bench times it
        return s.prefill(tokens, fixed_chunk_plan(512, 512)).last_logits;
    };
    const std::vector<float> first = cold_prefill();  // warm: the cache, the pool's threads
    REQUIRE(cold_prefill() == first);
    const long before = minor_faults();
    REQUIRE(cold_prefill() == first);
    const long faults = minor_faults() - before;
    INFO(faults << " page faults in one cold prefill of 512 tokens on a warm backend");
    // Budget: 64 pages (256 KiB) for what still grows (a vector's first use by
    // a thread the pool had not used yet, a lazily mapped library page). The
    // activations alone are 512 x (7 x 256 + 2 x 768) floats = 6.7 MB = 1,600+
    // pages, and the KV pool 2 MB more, so a change that returns them to the OS
    // fails by a wide margin.
    REQUIRE(faults < 64);
    REQUIRE(backend.buffer_stats().reused > 0);
}
#endif

TEST_CASE("host memory: a large array starts on a 2 MiB edge (huge pages), a small one on a line",
          "[buffers]") {
    // The alignment is what lets the kernel back an array with 2 MiB pages
    // (whether it does depends on the machine's THP setting, so that is not
    // asserted); the values must be those written, whatever the pages.
    for (std::size_t bytes : {std::size_t(1), std::size_t(4000), kHugePageBytes - 4, kHugePageBytes,
                              3 * kHugePageBytes + 12}) {
        INFO(bytes << " bytes");
        const std::size_t align = bytes >= kHugePageBytes ? kHugePageBytes : 64;
        REQUIRE(host_alignment(bytes) == align);
        auto* p = static_cast<unsigned char*>(host_allocate(bytes));
        REQUIRE(reinterpret_cast<std::uintptr_t>(p) % align == 0);
        for (std::size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(i * 131 + 7);
        bool same = true;
        for (std::size_t i = 0; i < bytes; ++i)
            same = same && p[i] == static_cast<unsigned char>(i * 131 + 7);
        REQUIRE(same);
        host_deallocate(p, bytes);
    }
    HostVector v(kHugePageBytes / sizeof(float) + 3);
    REQUIRE(reinterpret_cast<std::uintptr_t>(v.data()) % kHugePageBytes == 0);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(i);
    REQUIRE(v.back() == float(v.size() - 1));
    HostBufferCache cache;  // a large buffer from the cache is aligned the same way
    float* big = cache.take(kHugePageBytes / sizeof(float));
    REQUIRE(reinterpret_cast<std::uintptr_t>(big) % kHugePageBytes == 0);
    cache.give_back(big, kHugePageBytes / sizeof(float));
}
