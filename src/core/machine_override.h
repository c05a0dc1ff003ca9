// Making this machine look like another to the fast CPU kernels.
//
// What it teaches: a fast kernel's bits can follow the machine. The `cpu`
// backend's library products (Eigen) block their loops for the cache sizes
// Eigen detects, and split a product into one column slice per CPU, so
// `--kernels fastest` adds in another order on a CPU with other caches or
// another core count — and a near-tie then turns a text (lesson 16). The
// reference backends and the invariant kernels do not follow either.
//
// Two environment variables let a test (and CI, .ci/run) run the same
// commands as on a second machine, on this one:
//   PLAB_CPU_CACHES=L1,L2,L3  the cache sizes Eigen blocks for, in bytes, each
//                             optionally with K or M (KiB, MiB): 32K,1M,32M
//                             (Eigen::setCpuCacheSizes);
//   PLAB_CPU_THREADS=N        the CPU count the engine plans with (1..256),
//                             instead of the CPUs this process may run on:
//                             the thread pool's size and the slices of a
//                             library product (more threads than cores run,
//                             only slower).
// A malformed value is refused with one line naming the variable and the
// form it takes. Left out: the vector width, which is fixed when the engine
// is compiled (PLAB_NATIVE=OFF builds for plain x86-64; tests/README.md).
#pragma once

namespace plab {

// PLAB_CPU_THREADS, or 0 when it is not set. Throws plab::Error when malformed.
int cpu_threads_override();

// Applies PLAB_CPU_CACHES to Eigen once per process (later calls do nothing).
// Every entry to Eigen's products calls it first. Throws plab::Error when
// malformed.
void apply_cpu_cache_override();

// Reads both variables now, so that a malformed one is refused before a command
// prints anything (the CLI calls it first).
void check_machine_override();

// The cache sizes Eigen blocks its products for, in bytes, and whether they
// came from PLAB_CPU_CACHES (else Eigen detected them from this CPU).
struct CpuCaches {
    long long l1 = 0, l2 = 0, l3 = 0;
    bool overridden = false;
};
CpuCaches cpu_caches();

}  // namespace plab
