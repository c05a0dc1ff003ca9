// The asynchronous corner of the CUDA runtime the GPU backend uses: pinned
// (page-locked) host memory, copies that return before they finish, and
// events that time work on the device itself.
//
// What it teaches: a host clock around a kernel launch measures the launch,
// not the kernel (launches return at once). A CUDA event is a timestamp the
// device writes when the work queued before it has finished, so two events
// bracket exactly the device time of what lies between them. And a copy from
// pageable host memory makes the host wait; one from pinned memory can run
// beside the host.
//
// Under nvcc these are the CUDA runtime's own. Under the emulator every launch
// and copy has finished when the call returns, so an "async" copy is a plain
// copy, pinned memory is ordinary memory, and an event records the host clock
// (which then times the emulation, never a GPU).
#pragma once

#include "simt.h"

#if defined(__CUDACC__)

#include <cuda_runtime.h>

#else

#include <chrono>
#include <cstdlib>
#include <cstring>

namespace plab::simt {

using cudaStream_t = void*;
struct EmulatedEvent {
    std::chrono::steady_clock::time_point at;
};
using cudaEvent_t = EmulatedEvent*;

inline cudaError_t cudaMallocHost(void** ptr, std::size_t bytes) {
    *ptr = std::malloc(bytes == 0 ? 1 : bytes);
    return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFreeHost(void* ptr) {
    std::free(ptr);
    return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes,
                                   cudaMemcpyKind kind, cudaStream_t = nullptr) {
    return cudaMemcpy(dst, src, bytes, kind);
}
inline cudaError_t cudaEventCreate(cudaEvent_t* e) {
    *e = new EmulatedEvent{};
    return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = nullptr) {
    e->at = std::chrono::steady_clock::now();
    return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) {
    return cudaSuccess;
}
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop) {
    *ms = std::chrono::duration<float, std::milli>(stop->at - start->at).count();
    return cudaSuccess;
}

}  // namespace plab::simt

using plab::simt::cudaEvent_t;
using plab::simt::cudaEventCreate;
using plab::simt::cudaEventDestroy;
using plab::simt::cudaEventElapsedTime;
using plab::simt::cudaEventRecord;
using plab::simt::cudaEventSynchronize;
using plab::simt::cudaFreeHost;
using plab::simt::cudaMallocHost;
using plab::simt::cudaMemcpyAsync;
using plab::simt::cudaStream_t;

#endif  // __CUDACC__
