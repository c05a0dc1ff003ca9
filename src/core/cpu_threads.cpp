#include "core/cpu_threads.h"

#include <algorithm>
#include <atomic>

namespace plab {
namespace {

std::atomic<int> g_thread_cap{0};  // set_cpu_thread_cap(); 0: none

// The most threads an op may get: every CPU, under the cap.
int most_threads() {
    const int cap = g_thread_cap.load(std::memory_order_relaxed);
    return cap > 0 ? std::min(cap, cpu_threads()) : cpu_threads();
}

}  // namespace

int cpu_threads() {
    static const int cpus = ThreadPool::available_cpus();  // once: it is a system call
    return cpus;
}

int cpu_threads_for(double flops) {
    return std::clamp(static_cast<int>(flops / kMinFlopsPerThread), 1, most_threads());
}

int cpu_threads_for_light(double flops) {
    const int by_work = cpu_threads_for(flops);
    return by_work > 1 || !ThreadPool::engine().awake() ? by_work : most_threads();
}

void set_cpu_thread_cap(int threads) {
    g_thread_cap.store(std::max(0, threads));
}

}  // namespace plab
