// How many threads a CPU op runs on: one rule for `cpu` and `cpu-ref`.
//
// What it teaches: a parallel region only pays when each thread's share of
// the work is larger than the cost of waking a thread. So the
// *engine* picks each op's thread count from the op's work, never the user
// from an environment variable; both CPU backends ask this one function, and
// `plab info` prints its answer. The threads themselves are the engine's one
// ThreadPool (core/thread_pool.h: dynamic tasks, spin-then-sleep).
//
// Work is counted in *GEMM-FLOP equivalents*: the time one thread of the fast
// backend's GEMM needs for that many FLOPs. An op that runs slower per FLOP
// (cpu-ref's in-order scalar sums, an exp) converts its FLOPs with a measured
// factor before it asks (cpu_fast.cpp's swiglu, cpu_ref.cpp's kRef*FlopCost).
//
// Left out: per-op tuning beyond one threshold, thread counts between 2 and
// the CPU count that depend on the op's shape.
#pragma once

#include "core/thread_pool.h"

namespace plab {

// An op gets one more thread for every this many FLOPs of work, so each
// thread's share is at least this much. Measured on the project's machine
// kind (2-vCPU AMD EPYC VM, AVX-512, stories15M shapes, 200 interleaved calls
// of cpu_fast.cpp's matmul on 1 thread vs 2 pool threads, a harness not kept):
//   - one thread runs these GEMMs at ~110-150 GFLOP/s (29x288x288, 4.8 MFLOP:
//     37 us; 128x768x288, 57 MFLOP: 370-440 us); so 8 MFLOP is ~55-70 us;
//   - splitting into tiles costs 5-13 % more CPU time in total (re-packing
//     the shared operand per tile), measured when the 2nd thread got no core;
//   - a worker asleep on a futex needs tens of microseconds to run when a core
//     is free (and up to a scheduler slice, milliseconds, when it is not).
// A second thread gains T/2 minus ~0.1 T of tiling minus the wake-up, so it
// pays from roughly T > 2.5 x wake-up; at 2 x 8 MFLOP (~150 us) it does with
// margin. Below that it cannot win even on a quiet machine: the shipped
// model's 29-token prefill (ops <= 2.8 MFLOP) measured 1.08 ms on 1 thread
// and at best the same on 2. With the machine saturated (CPU pressure
// 99.8 % during these measurements), 2 threads won nowhere below 113 MFLOP.
constexpr double kMinFlopsPerThread = 8e6;

// A weight byte read from memory in GEMM-FLOP equivalents, for products of
// few rows (a decode step), whose time is reading the weight, not its FLOPs:
// one thread streams a weight it has not cached at ~38 GB/s (stories15M's
// classifier, 36.9 MB in 0.97 ms, one row) while its GEMM runs at ~190
// GFLOP/s: ~5 FLOPs of GEMM time per byte. Counted by FLOPs
// alone, every layer product of a stories110M decode step ran on one thread.
constexpr double kFlopsPerWeightByte = 5;

// Work of out (m, n) = x (m, k) · wᵀ with w (n, k) float: its FLOPs, or
// reading w when that takes longer.
inline double product_work(double m, double n, double k) {
    const double flops = 2.0 * m * n * k, read = kFlopsPerWeightByte * 4.0 * n * k;
    return flops > read ? flops : read;
}

// Threads CPU ops may use here: the CPUs this process may run on.
int cpu_threads();
// Threads an op of `flops` GEMM-FLOP equivalents runs on: 1 .. cpu_threads().
int cpu_threads_for(double flops);
// Threads of a light op that follows a product on the pool — a norm, SwiGLU,
// RoPE: cpu_threads_for(flops), or every thread when the pool's threads are
// still awake from the op before (ThreadPool::awake), since then a second
// thread costs no wake-up. Such an op is slower than its FLOPs say: right
// after a product on every thread it reads rows the other core wrote and the
// product's weights pushed out of L2, at memory speed, which two cores
// share out. Measured on the project's machine (stories15M, after the
// product that feeds it, one thread -> two): residual add + RMSNorm of 128
// rows 30 -> 16 us, of 512 rows 105 -> 64-69 us; SwiGLU of 512 x 768 values
// 212 -> 122 us; RoPE of 512 rows' Q 177 -> 112 us. The fast backend's
// products ask it too: a decode step's, under the threshold, are as light
// (cpu_fast.cpp, matmul_parts).
int cpu_threads_for_light(double flops);
// Caps cpu_threads_for() and cpu_threads_for_light() (0: no cap). For `plab
// bench`'s single-thread reference and tests of the threaded paths; not a
// user setting.
void set_cpu_thread_cap(int threads);

// task(i) for every i in [0, n_tasks): on the calling thread alone, in order,
// when `threads` is 1 (no wake-up, nothing to wait for), else on the engine's
// pool (any order, any thread). A task must not depend on which thread runs it.
template <class F>
void run_cpu_tasks(int threads, int n_tasks, const F& task) {
    if (threads <= 1) {
        for (int i = 0; i < n_tasks; ++i) task(i);
        return;
    }
    ThreadPool::engine().run(n_tasks, task);
}

// The reference's cost per FLOP, in GEMM-FLOP equivalents (the rule above):
// its sums run one add after another, in order and without FMA, so each waits
// for the previous one, where the fast backend's GEMM keeps many vector lanes
// busy. Measured on the project's machine kind (2-vCPU AMD EPYC VM, one
// thread, medians of 41 calls, shipped-model and stories15M shapes):
//   matmul     cpu-ref 4.1-5.6 GFLOP/s against cpu's GEMM at 84-150 GFLOP/s
//              on 29..128 rows (ratio 19-31): counted as 30;
//   attention  cpu-ref 0.45-0.85 GFLOP/s on 4·Dh·H FLOPs per (query, key)
//              pair (a strict_expf per score, each output component a
//              strided walk over V through the block table), i.e. 150-290
//              times the ~130 GFLOP/s GEMM: counted as 150.
// So a reference op gets a second thread from ~110-150 us of one thread's
// work, like every op of the fast backend.
constexpr double kRefMatmulFlopCost = 30;
constexpr double kRefAttentionFlopCost = 150;

}  // namespace plab
