// OpenMP's runtime API for a build without OpenMP: one thread (the web build, viewer/web).
//
// The engine runs no op in an OpenMP region (src/CMakeLists.txt); perf/machine.cpp
// measures the machine's peak with a few `#pragma omp parallel` loops, which a compiler
// without -fopenmp ignores, and asks these functions how many threads it has: one.
#pragma once

inline int omp_get_max_threads() {
    return 1;
}
inline int omp_get_num_threads() {
    return 1;
}
inline int omp_get_thread_num() {
    return 0;
}
// cpu_library_gemm.cpp keeps Eigen's products on one thread: here they are.
inline void omp_set_num_threads(int) {}
