// Measuring the machine, in the same run as the benchmark it scales.
//
// Peaks printed on a spec sheet are not what this machine gives this process
// today (other tenants, clock limits, a virtual CPU): so `plab bench` measures
// (1) float32 GEMM peak: the best of several large Eigen GEMMs (2048³), and
// (2) copy bandwidth: a large memcpy split across the threads, counting bytes
//     read + written (the STREAM "copy" convention);
// (3) read bandwidth: a 1 GiB buffer summed by all threads — what a decode
//     step does to its weights. The buffer is larger than the caches, so this
//     is a DRAM figure; the copy's 2 x 256 MiB may still be partly cached.
#pragma once

namespace plab {

struct MachineSpeed {
    double gemm_gflops = 0;    // best of the runs
    double copy_gb_per_s = 0;  // best of the runs
    double read_gb_per_s = 0;  // best of the runs
    int threads = 0;
};

MachineSpeed measure_machine(int gemm_size = 2048, int repeats = 5);

}  // namespace plab
