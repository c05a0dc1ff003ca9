// Measuring the machine, in the same run as the benchmark it scales.
//
// Peaks printed on a spec sheet are not what this machine gives this process
// today (other tenants, clock limits, a virtual CPU): so `plab bench` measures
// (1) float32 GEMM peak: the fastest float32 GEMM available here, measured on
//     2048³ — Eigen's (with OpenMP threads), OpenBLAS's when it is installed
//     (perf/blas_gemm.h) and the engine's own (cpu_gemm.h, on the engine's
//     thread pool); the best run of the fastest;
// (2) copy bandwidth: a large memcpy split across the threads, counting bytes
//     read + written (the STREAM "copy" convention);
// (3) read bandwidth: a 1 GiB buffer summed by all threads — what a decode
//     step does to its weights. The buffer is larger than the caches, so this
//     is a DRAM figure; the copy's 2 x 256 MiB may still be partly cached.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/host_memory.h"

namespace plab {

struct MachineSpeed {
    double gemm_gflops = 0;           // the peak: max of the three below
    double eigen_gemm_gflops = 0;     // best run of Eigen's GEMM
    double openblas_gemm_gflops = 0;  // best run of OpenBLAS's sgemm (0: not measured)
    double engine_gemm_gflops = 0;    // best run of the cpu backend's matmul
    // OpenBLAS's build as it reports it, or why it was not measured.
    std::string openblas;
    double copy_gb_per_s = 0;  // best of the runs
    double read_gb_per_s = 0;  // best of the runs
    int threads = 0;
    int gemm_size = 0;     // n of the n x n x n products timed
    int gemm_repeats = 0;  // timed runs of each (the best is kept)
};

// with_blas: time OpenBLAS's GEMM too (it starts OpenBLAS's worker threads
// in this process; `plab serve`, which only wants the copy bandwidth, says no).
// gemm_size: n of the n^3 products (`plab bench --peak-size`, within its range).
inline constexpr int kDefaultPeakSize = 2048;
inline constexpr int kMinPeakSize = 64, kMaxPeakSize = 8192;
MachineSpeed measure_machine(int gemm_size = kDefaultPeakSize, int repeats = 5,
                             bool with_blas = true);

// The three GEMMs the peak is measured on.
enum class GemmSource { eigen, openblas, engine };
// Which GEMM gave m.gemm_gflops (ties go to the first: Eigen, OpenBLAS, the engine).
GemmSource peak_gemm_source(const MachineSpeed& m);
// "Eigen GEMM", "OpenBLAS GEMM" or "engine GEMM, cpu_gemm".
std::string gemm_source_name(GemmSource s);
// The name of peak_gemm_source(m).
std::string peak_source(const MachineSpeed& m);

// The peak's n^3 products, kept ready to run again: measure_machine times
// each of them; `plab bench` times the one that won once more right after
// each *paired* prefill run (perf/bench.h, PrefillBenchRow::paired_*).
//
// What it teaches: a fraction of peak divides two measurements, and on a
// shared machine (a cloud VM: other tenants, a host that moves our vCPUs)
// the speed the same code gets drifts by a third within minutes. A peak taken
// at the start of a run and a prefill timed minutes later can be measured
// against two different machines; a product timed right after each prefill
// sees the machine the prefill sees.
class PeakGemms {
public:
    // Random n x n operands; with_blas: OpenBLAS too, when it is installed.
    PeakGemms(int n, bool with_blas);
    ~PeakGemms();
    PeakGemms(const PeakGemms&) = delete;
    PeakGemms& operator=(const PeakGemms&) = delete;

    int size() const;
    // Whether this GEMM can run here (OpenBLAS: installed and asked for).
    bool has(GemmSource s) const;
    // OpenBLAS's build as it reports it, or why it is not measured.
    const std::string& openblas() const;
    // One n^3 product of `s`, timed: GFLOP/s. After OpenBLAS's, its worker
    // threads keep spinning for ~0.1 s (2^28 cycles, its THREAD_TIMEOUT)
    // before they sleep: with settle, this waits 200 ms (untimed) so that
    // they take no core from what is timed next.
    double run(GemmSource s, bool settle = false);

private:
    struct Operands;
    std::unique_ptr<Operands> ops_;
};

// measure_machine on products the caller keeps (`plab bench` times the winner
// again after each paired prefill run): the size and OpenBLAS are gemms'.
MachineSpeed measure_machine(PeakGemms& gemms, int repeats = 5);

// The weight-sweep limit of a decode step: the time for the
// engine's threads to stream `bytes` of floats through a multiply-add —
// exactly the bytes one decode step must read, in a buffer of that size.
// Whatever the caches give (a model that fits in the last-level cache is
// swept from there) the sweep gets too, so no decode step on this machine can
// beat it: a bound that holds on any machine, unlike bytes / DRAM bandwidth.
// The buffer is kept, so sweeps can be timed one at a time: `plab bench`
// takes the median of 9 after its decode steps, then follows each of a
// second set of steps with one (DecodeBenchRow's paired_*), so that a step
// and its limit are timed on the machine as it is at that moment. Made in
// the memory the engine keeps its weights in (huge pages where the kernel
// gives them, core/host_memory.h), filled, and swept once untimed.
class WeightSweep {
public:
    explicit WeightSweep(double bytes);
    double seconds();  // one sweep of the whole buffer on the engine's threads, timed

private:
    void sweep();
    // Pieces per thread: dynamic, so a late thread delays only one piece.
    static constexpr int kTasksPerThread = 8;
    std::size_t floats_;
    HostVector w_;
    std::vector<float> sums_;  // one per piece, so the reads cannot be left out
};

}  // namespace plab
