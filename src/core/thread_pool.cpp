#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

#include "core/machine_override.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace plab {
namespace {

constexpr std::uint32_t kClosed = 0x7fffffff;  // low half of job_: larger than any n_tasks

// The low half of job_ (thread_pool.h): a job of fewer than kTwoEnded tasks
// keeps the next task from the front in bits 0-15 and the count claimed from
// the back in bits 16-30; a larger job (none of the engine's ops) is claimed
// from the front only, its next task in all 31 bits. kClosed is past the end
// in both readings.
constexpr int kTwoEnded = 0x7fff;

struct Claims {
    std::uint32_t front, back;
};

Claims claims_of(std::uint32_t low, int n_tasks) {
    if (n_tasks >= kTwoEnded) return {low, 0};
    return {low & 0xffff, (low >> 16) & 0x7fff};
}

// How long a thread spins before it sleeps on a futex. Long enough to bridge
// the gap between two ops of one forward pass (the serial rmsnorm, rope, add
// between two GEMMs take a few microseconds to a few tens at 512 tokens),
// short enough that an idle pool gives its cores back almost at once.
constexpr auto kSpin = std::chrono::microseconds(100);

// True while this thread runs a task: a nested run() then runs inline.
thread_local bool t_in_task = false;
// True on a pool worker: it claims tasks from the back of a job.
thread_local bool t_worker = false;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
}

// Spins until ready() or kSpin has passed; true when ready() held.
template <class Ready>
bool spin_until(Ready ready) {
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
        for (int i = 0; i < 64; ++i) {
            if (ready()) return true;
            cpu_relax();
        }
        if (std::chrono::steady_clock::now() - t0 > kSpin) return ready();
    }
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_main(); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true);
    epoch_.fetch_add(1);
    epoch_.notify_all();
    for (auto& w : workers_) w.join();
}

int ThreadPool::available_cpus() {
#ifdef __EMSCRIPTEN__
    return 1;  // the web build (viewer/web) has no threads: every op runs on the caller
#endif
    // A test seeing another machine's core count (core/machine_override.h).
    if (const int n = cpu_threads_override(); n > 0) return n;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
    return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool& ThreadPool::engine() {
    static ThreadPool pool(available_cpus());
    return pool;
}

void ThreadPool::run_erased(int n_tasks, TaskFn fn, void* ctx) {
    if (n_tasks <= 0) return;
    // Inline: nothing to share, nobody to share with, or already inside a task.
    // try_lock: a second thread calling run() while a job is in flight (two
    // sessions on two threads) runs its own tasks inline instead of waiting.
    std::unique_lock<std::mutex> lock(caller_, std::try_to_lock);
    if (n_tasks == 1 || workers_.empty() || t_in_task || !lock.owns_lock()) {
        for (int i = 0; i < n_tasks; ++i) fn(ctx, i);
        return;
    }
    const std::uint32_t gen = ++generation_;
    fn_.store(fn, std::memory_order_relaxed);
    ctx_.store(ctx, std::memory_order_relaxed);
    n_tasks_.store(n_tasks, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    job_.store(std::uint64_t(gen) << 32, std::memory_order_release);  // publish
    epoch_.store(gen, std::memory_order_release);
    epoch_.notify_all();  // a futex call only if some worker sleeps
    work(gen);            // the caller takes tasks like any worker
    // Wait for tasks other threads claimed; spin first (they are usually
    // running right now), then sleep so a descheduled worker can have this core.
    const auto all_done = [&] { return done_.load(std::memory_order_acquire) == n_tasks; };
    if (!spin_until(all_done)) {
        for (int d = done_.load(std::memory_order_acquire); d != n_tasks;
             d = done_.load(std::memory_order_acquire)) {
            done_.wait(d, std::memory_order_acquire);
        }
    }
    // No thread may claim a task of this job any more: the parameters may change.
    job_.store((std::uint64_t(gen) << 32) | kClosed, std::memory_order_relaxed);
    last_end_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                       std::memory_order_relaxed);
}

bool ThreadPool::awake() const {
    if (workers_.empty()) return false;
    const auto since =
        std::chrono::steady_clock::now().time_since_epoch() -
        std::chrono::steady_clock::duration(last_end_ns_.load(std::memory_order_relaxed));
    return since < kSpin / 2;
}

void ThreadPool::work(std::uint32_t gen) {
    for (;;) {
        std::uint64_t v = job_.load(std::memory_order_acquire);
        if (std::uint32_t(v >> 32) != gen) return;
        const TaskFn fn = fn_.load(std::memory_order_relaxed);
        void* ctx = ctx_.load(std::memory_order_relaxed);
        const int n = n_tasks_.load(std::memory_order_relaxed);
        const Claims c = claims_of(std::uint32_t(v), n);
        if (c.front + c.back >= std::uint32_t(n)) return;  // all claimed (or closed)
        // The caller from the front, workers from the back (thread_pool.h).
        const bool from_back = t_worker && n < kTwoEnded;
        const std::uint32_t i = from_back ? std::uint32_t(n) - 1 - c.back : c.front;
        const std::uint64_t claimed = from_back ? v + (std::uint64_t(1) << 16) : v + 1;
        // Succeeds only if job_ is still what we read: then fn, ctx, n were gen's.
        if (!job_.compare_exchange_weak(v, claimed, std::memory_order_acq_rel)) continue;
        t_in_task = true;
        fn(ctx, static_cast<int>(i));
        t_in_task = false;
        if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == n) done_.notify_one();
    }
}

void ThreadPool::worker_main() {
    t_worker = true;
    std::uint32_t seen = 0;
    for (;;) {
        const auto new_job = [&] { return epoch_.load(std::memory_order_acquire) != seen; };
        if (!spin_until(new_job)) epoch_.wait(seen, std::memory_order_acquire);
        if (stop_.load()) return;
        seen = epoch_.load(std::memory_order_acquire);
        work(seen);
    }
}

}  // namespace plab
