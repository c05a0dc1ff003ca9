// Measuring the machine, in the same run as the benchmark it scales.
//
// Peaks printed on a spec sheet are not what this machine gives this process
// today (other tenants, clock limits, a virtual CPU): so `plab bench` measures
// (1) float32 GEMM peak: the best of several large Eigen GEMMs (2048³), and
// (2) copy bandwidth: a large memcpy split across the threads, counting bytes
//     read + written (the STREAM "copy" convention).
#pragma once

namespace plab {

struct MachineSpeed {
    double gemm_gflops = 0;    // best of the runs
    double copy_gb_per_s = 0;  // best of the runs
    int threads = 0;
};

MachineSpeed measure_machine(int gemm_size = 2048, int repeats = 5);

}  // namespace plab
