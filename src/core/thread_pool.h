// ThreadPool: the engine's one set of worker threads, with dynamic work splitting.
//
// What it teaches: a parallel region costs something before any work is done
// — a sleeping thread must be woken, and every thread must be *scheduled* by
// the operating system. On a quiet machine that is microseconds; when another
// program keeps a core busy, a woken thread may wait a whole time slice
// (milliseconds) for a core. A region that splits its work statically into one
// piece per thread and then waits at a barrier for every piece runs as slow as
// its most delayed thread. Measured: the shipped model's 29-token prefill took
// 1 ms quiet and ~300 ms next to one spinning process. Timing its OpenMP
// regions (an LD_PRELOAD wrapper around GOMP_parallel) on the busy machine
// found 37 regions, of which the 28 inside Eigen's parallel GEMM (static
// split, threads spin-waiting on each other's packed blocks) took 1372 ms of
// a 1375 ms prefill — for GEMMs of 1-3 MFLOP that one thread does in ~20 us.
//
// This pool avoids that in two ways:
//  1. Dynamic splitting: an op is cut into more tasks than threads, and each
//     thread (the caller included) claims the next task from one shared
//     counter. The caller never waits for a worker to *start*: if the worker
//     is late, the caller runs every task itself, and the late worker finds
//     nothing left. It only waits for tasks a worker has already claimed.
//     (Measured on the busy machine: a sleeping worker started a median
//     16 ms after being woken; the caller did not wait for it.)
//     The caller claims from the front of a job (task 0, 1, ...), the
//     workers from the back (n-1, n-2, ...), so on two threads the caller
//     usually runs the first part of every op and the worker the last. Ops
//     that split the same rows the same way then find the rows the op before
//     them wrote in their own core's cache: a prefill's norms, its narrow
//     products split by rows, the K/V gather and attention tiles of the same
//     heads. From one shared counter, the two threads' tasks interleaved and
//     about half of each op's input came from the other core. (stories15M,
//     128-token prefill, harness, interleaved: 6.83-6.86 -> 6.37 ms; one
//     layer's attention 111 -> 89 us, its W_o 74 -> 65 us.) Still
//     first come, first served: the two ends meet wherever the threads'
//     speeds put them, so a slow or late thread still costs only its task.
//  2. Spin, then sleep: an idle worker spins briefly (the next op usually
//     follows within microseconds), then sleeps on a futex
//     (std::atomic::wait), so it does not burn a core a competitor or the
//     caller's own serial code could use. The caller waiting for a claimed
//     task does the same. OpenMP's two policies each fail one way:
//     passive (sleep at once) pays a wake-up per region at every barrier,
//     126 ms for that prefill; active (spin forever) keeps a core busy while
//     the engine is idle, e.g. under the viewer's renderer.
// Whether an op is worth a region at all is the caller's decision (see
// core/cpu_threads.h: a FLOP threshold per thread).
//
// Left out: nested parallelism (a task that calls run() runs its tasks
// inline), thread pinning, NUMA awareness.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace plab {

class ThreadPool {
public:
    // `threads` counts the caller: 1 means no workers, every task runs inline.
    explicit ThreadPool(int threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return static_cast<int>(workers_.size()) + 1; }

    // Runs task(i) for every i in [0, n_tasks), on the caller and the
    // workers; returns when all have finished. Which thread runs which task
    // is decided at run time (first come, first served; the caller's tasks
    // are a prefix of [0, n_tasks), the workers' the rest). With n_tasks <= 1,
    // one thread, or when called from inside a task, runs them all inline.
    // Tasks must not throw (a worker has nowhere to send the exception).
    template <class F>
    void run(int n_tasks, F&& task) {
        using Fn = std::remove_reference_t<F>;
        run_erased(n_tasks, &call<Fn>,
                   const_cast<void*>(static_cast<const void*>(std::addressof(task))));
    }

    // Whether the workers are most likely still spinning after the last job
    // (it ended less than half their spin time ago), so a job started now
    // costs no wake-up. A hint for choosing thread counts, never for results.
    bool awake() const;

    // The engine's pool: one thread per CPU this process may run on
    // (sched_getaffinity, so `taskset` and container limits are respected).
    static ThreadPool& engine();
    // How many CPUs this process may run on.
    static int available_cpus();

private:
    using TaskFn = void (*)(void*, int);
    template <class F>
    static void call(void* f, int i) {
        (*static_cast<F*>(f))(i);
    }
    void run_erased(int n_tasks, TaskFn fn, void* ctx);
    // Claims and runs tasks of generation `gen` until none are left.
    void work(std::uint32_t gen);
    void worker_main();

    std::vector<std::thread> workers_;
    // (generation << 32) | the tasks claimed so far (from the front and from
    // the back, thread_pool.cpp). A thread claims a task with a
    // compare-exchange, so a thread that read an old generation can never
    // claim a task of a newer one. kClosed in the low half: no more claims.
    std::atomic<std::uint64_t> job_{0};
    // The job's parameters, written by the caller before it publishes job_.
    // Atomics because a late thread may read them while the next job writes
    // them; its compare-exchange on job_ then fails and it discards them.
    std::atomic<TaskFn> fn_{nullptr};
    std::atomic<void*> ctx_{nullptr};
    std::atomic<int> n_tasks_{0};
    std::atomic<int> done_{0};             // tasks finished in the current job
    std::atomic<std::uint32_t> epoch_{0};  // the current generation; workers sleep on it
    std::atomic<bool> stop_{false};
    std::atomic<std::int64_t> last_end_ns_{0};  // steady_clock, when the last job ended
    std::mutex caller_;                         // one job at a time
    std::uint32_t generation_ = 0;              // jobs started (guarded by caller_)
};

}  // namespace plab
