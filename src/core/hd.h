// PLAB_HD marks code that runs on the host and on a CUDA device.
//
// What it teaches: the reference math is written once and compiled three ways:
// by g++ for the CPU backends, by nvcc for a real GPU, and by g++ again for the
// SIMT emulation of the GPU kernels (kernels/simt). Only nvcc needs the
// __host__ __device__ qualifiers; everywhere else PLAB_HD expands to nothing.
#pragma once

#if defined(__CUDACC__)
#define PLAB_HD __host__ __device__
#else
#define PLAB_HD
#endif
