// The one portability header of the GPU kernels: plain CUDA under nvcc, a
// SIMT emulation under g++.
//
// What it teaches: a CUDA kernel is an ordinary function run by many threads
// that know who they are (threadIdx, blockIdx), share per-block memory
// (__shared__) and wait for each other (__syncthreads). Nothing in that model
// needs a GPU. Compiled by g++, this header runs the threads of a block as
// fibers on one OS thread (simt_emulator.cpp): each fiber runs until it reaches
// a barrier, then the next one runs; when every thread of the block is at the
// barrier they all go on. Between barriers the fibers run in a shuffled order
// that changes at every barrier, so a kernel that reads shared memory another
// thread has not written yet (a forgotten __syncthreads) reads NaN poison or a
// stale value and fails its test, instead of passing by luck.
//
// What is provided under g++: threadIdx/blockIdx/blockDim/gridDim (the
// *current fiber's* index, set at every switch), __global__/__device__/
// __host__/__shared__, __syncthreads, __syncwarp, __shfl_sync/__shfl_down_sync/
// __shfl_xor_sync (a barrier over the warp's lanes plus an exchange slot),
// atomicAdd/atomicMax/atomicCAS, load_float4 (a 16-byte load; both builds,
// the emulation checks its alignment), dynamic shared memory (PLAB_DYNAMIC_SHARED,
// poisoned with NaN for every block), counted static shared memory
// (PLAB_SHARED, poisoned too), cudaMalloc/cudaMemcpy/cudaMemset/cudaFree, and
// the shared-memory attributes cudaFuncGetAttributes/cudaFuncSetAttribute.
//
// Shared memory limits: a block gets its static __shared__ bytes
// plus the launch's dynamic bytes, and by default the two together may not
// exceed 48 KiB. More (up to the device's opt-in maximum: 64 KiB on sm_75,
// 163 KiB on sm_80, 99 KiB on sm_86/89, 227 KiB on sm_90; the emulator
// models each, PLAB_SIMT_ARCH chooses)
// needs cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
// bytes) first. The emulator enforces the same rule with the same numbers, so a
// kernel that forgets the opt-in fails here, naming itself, and not first on a
// GPU. It counts the static arrays a kernel declares with PLAB_SHARED (a plain
// __shared__ variable is a function-local static it cannot see) when the first
// thread reaches the declaration, and remembers the count for later launches.
// reserve_shared_memory() is the host side: it adds static to dynamic bytes,
// checks the device's maximum and opts in where the total passes 48 KiB.
// Host code launches every kernel with PLAB_LAUNCH(kernel, grid, block,
// shared_bytes, args...) instead of <<< >>>: under nvcc that is the real launch,
// checked, with the kernel's name in the error message.
//
// Launch recording (simt_record.h): while a LaunchRecorder is active, both
// builds' launch() records the launch instead of running it (CUDA graphs).
//
// Checks that name a fault: PLAB_CHECKED_SHARED tiles report races and
// out-of-range indexes by name and line (simt_checked.h); the lanes of a warp
// must meet at the same shuffle; grids and blocks are checked against the
// architecture profile; cudaMalloc returns 0xff bytes (NaN); with
// PLAB_SIMT_BLOCK_ORDER=<seed> a grid's blocks run in a shuffled order.
//
// Left out on purpose: streams, events, textures, cooperative groups, warp
// votes, memory fences, timing of any kind; blocks of one grid run one after
// another (the emulation shows correctness, never speed). A barrier that some
// threads never reach, or threads waiting at different barriers, is undefined
// behaviour in CUDA; the emulator reports it as a plab::InternalError naming
// the kernel, instead of hanging.
// Lesson: lessons/04-bitwise-equivalence.md (gpu-ref, gpu and the emulation).
#pragma once

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/error.h"

// Kernels and the GPU backend are compiled twice into one program (natively by
// nvcc, emulated by g++), so each copy lives in its own namespace.
#if defined(__CUDACC__)
#define PLAB_SIMT_NS gpu_native
#define PLAB_SIMT_EMULATED 0
#else
#define PLAB_SIMT_NS gpu_emulated
#define PLAB_SIMT_EMULATED 1
#endif

#include "simt_record.h"  // after PLAB_SIMT_NS: both builds compile it

// ============================================================================
// nvcc: plain CUDA
// ============================================================================
#if defined(__CUDACC__)

#include <cuda_runtime.h>

#define PLAB_CUDA_CHECK(expr)                                                           \
    do {                                                                                \
        const cudaError_t plab_cuda_err_ = (expr);                                      \
        if (plab_cuda_err_ != cudaSuccess) {                                            \
            std::ostringstream plab_cuda_os_;                                           \
            plab_cuda_os_ << "CUDA error " << cudaGetErrorName(plab_cuda_err_) << " ("  \
                          << cudaGetErrorString(plab_cuda_err_) << ") in " #expr " at " \
                          << __FILE__ << ':' << __LINE__;                               \
            throw ::plab::InternalError(plab_cuda_os_.str());                           \
        }                                                                               \
    } while (0)

// Dynamic shared memory: sized by the launch's shared_bytes.
#define PLAB_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
// Static shared memory the emulator counts: PLAB_SHARED(float, tile, [32][33]).
#define PLAB_SHARED(type, name, extents) __shared__ __align__(16) type name extents
// Shared memory the emulator checks for races (simt_checked.h); here plain arrays.
#define PLAB_CHECKED_SHARED(type, name, n) __shared__ type name[n]
#define PLAB_CHECKED_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
// A pointer into shared memory, as device helpers take one (here T*; the
// emulator's is a checked pointer, so helpers name it SharedPtr<float>).
template <typename T>
using SharedPtr = T*;
// Unroll a loop of compile-time trip count (nvcc); under g++ the optimiser decides.
#define PLAB_UNROLL _Pragma("unroll")

// Four consecutive floats as one 16-byte load (LDG.128 / LDS.128); src must be
// 16-byte aligned, or the kernel faults with a misaligned address.
__device__ __forceinline__ void load_float4(float* dst, const float* src) {
    const float4 v = *reinterpret_cast<const float4*>(src);
    dst[0] = v.x;
    dst[1] = v.y;
    dst[2] = v.z;
    dst[3] = v.w;
}

namespace plab::simt {

// A block's shared memory without cudaFuncSetAttribute: static plus dynamic.
constexpr std::size_t kDefaultSharedBytes = 48 * 1024;

// Launches `kernel` and checks both the launch and (when asked through
// PLAB_CUDA_SYNC=1 in the environment, for debugging) its execution, so that
// an error names the kernel that caused it rather than a later cudaMemcpy.
bool sync_after_launch();

// The launch itself, on `stream` (0: the default stream).
template <typename... Params>
void launch_now(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
                std::size_t shared_bytes, cudaStream_t stream, const Params&... params) {
    kernel<<<grid, block, shared_bytes, stream>>>(params...);
    cudaError_t err = cudaGetLastError();
    // A stream being captured into a graph may not be waited for.
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (err == cudaSuccess && sync_after_launch() &&
        cudaStreamIsCapturing(stream, &capturing) == cudaSuccess &&
        capturing == cudaStreamCaptureStatusNone) {
        err = cudaDeviceSynchronize();
    }
    if (err != cudaSuccess) {
        std::ostringstream os;
        os << "CUDA kernel " << name << " (grid " << grid.x << 'x' << grid.y << 'x' << grid.z
           << ", block " << block.x << 'x' << block.y << 'x' << block.z << ", " << shared_bytes
           << " B shared) failed: " << cudaGetErrorName(err) << " (" << cudaGetErrorString(err)
           << ')';
        // What the driver holds for this kernel: a shared-memory refusal shows here.
        cudaFuncAttributes attr{};
        if (cudaFuncGetAttributes(&attr, kernel) == cudaSuccess) {
            os << "; kernel attributes: " << attr.sharedSizeBytes << " B static shared, max "
               << attr.maxDynamicSharedSizeBytes << " B dynamic, " << attr.numRegs
               << " registers, at most " << attr.maxThreadsPerBlock << " threads per block";
        }
        cudaGetLastError();  // the query's own error, if any, is not the launch's
        throw ::plab::InternalError(os.str());
    }
}

// Launches `kernel` now, or, while a LaunchRecorder is active on this thread
// (simt_record.h), records the launch for a CUDA graph instead.
template <typename... Params, typename... Args>
void launch(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
            std::size_t shared_bytes, Args&&... args) {
    if (grid.x * grid.y * grid.z == 0) return;  // an empty grid is not an error here
    std::tuple<std::decay_t<Params>...> params{static_cast<Params>(std::forward<Args>(args))...};
    if (LaunchRecorder* recorder = active_recorder) {
        record_launch(*recorder, name, reinterpret_cast<std::uintptr_t>(kernel), grid, block,
                      shared_bytes, params, [=](void* stream) {
                          std::apply(
                              [&](const auto&... p) {
                                  launch_now(name, kernel, grid, block, shared_bytes,
                                             static_cast<cudaStream_t>(stream), p...);
                              },
                              params);
                      });
        return;
    }
    std::apply(
        [&](const auto&... p) { launch_now(name, kernel, grid, block, shared_bytes, 0, p...); },
        params);
}

}  // namespace plab::simt

// ============================================================================
// g++: the SIMT emulation
// ============================================================================
#else

#include <algorithm>
#include <cmath>
#include <cstring>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// Blocks of a grid run one after another on one OS thread (launches are
// serialised by a mutex), so a function-local static is per-block storage.
#define __shared__ static
#define __restrict__ __restrict
#define PLAB_UNROLL

namespace plab::simt {

// Emulated names live in plab::simt (brought into scope below), so that their
// symbols can never collide with the real CUDA runtime's in one program.
struct dim3 {
    unsigned x = 1, y = 1, z = 1;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// The emulated built-in variables. The scheduler writes thread_idx before it
// switches to a fiber, so it is always the running fiber's index.
struct Builtins {
    dim3 thread_idx, block_idx, block_dim, grid_dim;
};
extern Builtins g_builtins;

// Runs body() as every thread of every block of the grid.
void run_grid(const char* name, std::uintptr_t kernel, dim3 grid, dim3 block,
              std::size_t shared_bytes, void (*body)(void*), void* ctx);
// __syncthreads: waits until every thread of the block is at this barrier.
void sync_threads(const char* file, int line);
// Waits until every lane of the current warp is here (for the shuffles). The
// call site (file, line) of each lane must be the same one: a lab rule,
// stricter than PTX on sm_70+ (which lets lanes meet at different shuffles),
// that catches shuffles in divergent code.
void sync_warp(unsigned mask, const char* what, const char* file = nullptr, int line = 0);
// This lane's exchange slot and the slot of lane `lane` of the same warp.
std::uint64_t* warp_slot(int lane);
int lane_id();
int warp_lanes();  // lanes present in the current warp (the last warp may be partial)
void* dynamic_shared();
std::size_t dynamic_shared_bytes();
// Race checking (simt_checked.h; the interval and the running thread are its
// g_race_clock): the running thread's name, "thread (3,0,0)"; a failure of
// the running launch naming its kernel and block.
std::string current_thread_name();
[[noreturn]] void fail_launch(const std::string& what);
// Blocks of a grid run in order (seed 0, the default) or, with a seed, in a
// shuffled order drawn from it, so a kernel whose blocks depend on each other
// (block b reading what block b - 1 wrote) fails instead of passing by the
// emulator's order. PLAB_SIMT_BLOCK_ORDER=<seed> in the environment sets it.
void set_block_order_seed(std::uint64_t seed);
// PLAB_SHARED: counts a static shared array of the running kernel (once per
// launch) against the launch's limit, and poisons it for every block.
void static_shared(void* address, std::size_t bytes);
// Launch bookkeeping keyed by the kernel's address: the opt-in attribute and
// the static bytes learned from PLAB_SHARED.
void set_max_dynamic_shared(std::uintptr_t kernel, long long bytes);
long long max_dynamic_shared(std::uintptr_t kernel);  // -1: not set (the default)
std::size_t known_static_shared(std::uintptr_t kernel);
bool static_shared_known(std::uintptr_t kernel);  // after the kernel's first launch

template <typename T>
T warp_exchange(unsigned mask, T value, int src_lane, const char* what,
                const std::source_location& at) {
    static_assert(sizeof(T) <= sizeof(std::uint64_t) && std::is_trivially_copyable_v<T>);
    std::memcpy(warp_slot(lane_id()), &value, sizeof(T));
    sync_warp(mask, what, at.file_name(), static_cast<int>(at.line()));  // all have published
    T result = value;  // lanes outside the warp: keep our own value (as CUDA does)
    if (src_lane >= 0 && src_lane < warp_lanes())
        std::memcpy(&result, warp_slot(src_lane), sizeof(T));
    sync_warp(mask, what, at.file_name(), static_cast<int>(at.line()));  // all have read
    return result;
}

template <typename... Params, typename... Args>
void launch(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
            std::size_t shared_bytes, Args&&... args) {
    // Arguments are converted once, like a real launch copies them to the device.
    struct Ctx {
        void (*kernel)(Params...);
        std::tuple<std::decay_t<Params>...> params;
    };
    auto run = [name, grid, block, shared_bytes](const Ctx& ctx) {
        Ctx copy = ctx;
        run_grid(
            name, reinterpret_cast<std::uintptr_t>(copy.kernel), grid, block, shared_bytes,
            [](void* p) {
                Ctx& c = *static_cast<Ctx*>(p);
                std::apply(c.kernel, c.params);  // a copy per thread, like registers
            },
            &copy);
    };
    const Ctx ctx{kernel, {static_cast<Params>(std::forward<Args>(args))...}};
    // Recording for a CUDA graph (simt_record.h): the same record as the native build's.
    if (LaunchRecorder* recorder = active_recorder) {
        record_launch(*recorder, name, reinterpret_cast<std::uintptr_t>(kernel), grid, block,
                      shared_bytes, ctx.params, [run, ctx](void*) { run(ctx); });
        return;
    }
    run(ctx);
}

}  // namespace plab::simt

using plab::simt::dim3;
// CUDA's integer min/max overloads.
using std::max;
using std::min;

#define threadIdx (::plab::simt::g_builtins.thread_idx)
#define blockIdx (::plab::simt::g_builtins.block_idx)
#define blockDim (::plab::simt::g_builtins.block_dim)
#define gridDim (::plab::simt::g_builtins.grid_dim)

#define __syncthreads() ::plab::simt::sync_threads(__FILE__, __LINE__)
// PLAB_SHARED, PLAB_DYNAMIC_SHARED: simt_checked.h (included below, after
// load_float4), shared memory that reports races by name.

// __syncwarp: the lanes of the warp wait for each other (shared memory written
// by one lane is then visible to the others).
inline void __syncwarp(unsigned mask = 0xffffffffu,
                       std::source_location at = std::source_location::current()) {
    ::plab::simt::sync_warp(mask, "__syncwarp", at.file_name(), static_cast<int>(at.line()));
}

template <typename T>
inline T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32,
                     std::source_location at = std::source_location::current()) {
    const int lane = ::plab::simt::lane_id();
    return ::plab::simt::warp_exchange(mask, v, (lane & ~(width - 1)) + (src_lane % width),
                                       "__shfl_sync", at);
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32,
                          std::source_location at = std::source_location::current()) {
    const int lane = ::plab::simt::lane_id();
    const int src = lane + static_cast<int>(delta);
    // CUDA: a source beyond the segment returns the caller's own value.
    const bool inside = (src & ~(width - 1)) == (lane & ~(width - 1));
    return ::plab::simt::warp_exchange(mask, v, inside ? src : lane, "__shfl_down_sync", at);
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32,
                         std::source_location at = std::source_location::current()) {
    const int lane = ::plab::simt::lane_id();
    const int src = lane ^ lane_mask;
    const bool inside = (src & ~(width - 1)) == (lane & ~(width - 1));
    return ::plab::simt::warp_exchange(mask, v, inside ? src : lane, "__shfl_xor_sync", at);
}

// Fibers never run at the same time, so a plain read-modify-write is atomic.
template <typename T>
inline T atomicAdd(T* address, T value) {
    const T old = *address;
    *address = old + value;
    return old;
}
inline int atomicMax(int* address, int value) {
    const int old = *address;
    *address = old > value ? old : value;
    return old;
}
inline int atomicCAS(int* address, int compare, int value) {
    const int old = *address;
    if (old == compare) *address = value;
    return old;
}
inline unsigned atomicCAS(unsigned* address, unsigned compare, unsigned value) {
    const unsigned old = *address;
    if (old == compare) *address = value;
    return old;
}

// load_float4: one 16-byte load on a GPU, which faults on a misaligned
// address; the emulation checks the alignment so that such a kernel fails here too.
inline void load_float4(float* dst, const float* src) {
    if (reinterpret_cast<std::uintptr_t>(src) % 16 != 0) {
        throw ::plab::InternalError(
            "load_float4: a 16-byte load from an address that is not "
            "16-byte aligned (a GPU reports a misaligned address)");
    }
    std::memcpy(dst, src, 4 * sizeof(float));
}

inline float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, sizeof f);
    return f;
}
inline int __float_as_int(float f) {
    int i;
    std::memcpy(&i, &f, sizeof i);
    return i;
}

// ---- the runtime API, on host memory ---------------------------------------
namespace plab::simt {
enum cudaError_t { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorInvalidValue = 1 };
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3
};
cudaError_t cudaMalloc(void** ptr, std::size_t bytes);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemset(void* dst, int value, std::size_t bytes);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaGetLastError();
const char* cudaGetErrorName(cudaError_t err);
const char* cudaGetErrorString(cudaError_t err);

// The emulated device's limits, one profile per architecture the native build
// targets, chosen by PLAB_SIMT_ARCH=sm_75|sm_80|sm_86|sm_89|sm_90
// in the environment (default sm_90): what cudaDeviceGetAttribute answers and
// what a launch is checked against, so a kernel that asks more shared memory
// than a T4 gives fails here, on every machine, and not first in a classroom.
// Numbers: the CUDA C++ Programming Guide's table of compute capabilities
// (shared memory per block with opt-in, per multiprocessor) and one card of
// each (SM count): T4, A100, RTX 3090, RTX 4090, H100/H200 SXM.
constexpr std::size_t kDefaultSharedBytes = 48 * 1024;  // static + dynamic, without opt-in
struct ArchProfile {
    const char* name;              // "sm_90"
    const char* card;              // the card whose SM count it has
    std::size_t shared_per_block;  // sharedMemPerBlockOptin: static + dynamic, after opt-in
    std::size_t shared_per_sm;     // sharedMemPerMultiprocessor
    int multiprocessors;           // multiProcessorCount
    int warp_size;                 // 32 on every NVIDIA GPU
    // maxGridSize and maxThreadsDim: the same on every architecture since sm_30.
    unsigned max_grid_x = 2147483647u, max_grid_yz = 65535u;
    unsigned max_block_xy = 1024u, max_block_z = 64u;
};
// clang-format off
inline constexpr ArchProfile kArchProfiles[] = {
    {"sm_75", "T4",        64 * 1024,  64 * 1024,  40, 32},
    {"sm_80", "A100",     163 * 1024, 164 * 1024, 108, 32},
    {"sm_86", "RTX 3090",  99 * 1024, 100 * 1024,  82, 32},
    {"sm_89", "RTX 4090",  99 * 1024, 100 * 1024, 128, 32},
    {"sm_90", "H100/H200 SXM", 227 * 1024, 228 * 1024, 132, 32},
};
// clang-format on
// The profile in use: PLAB_SIMT_ARCH, read once (an unknown name is a
// plab::Error listing the valid ones), unless set_arch_profile changed it.
const ArchProfile& arch_profile();
// Switches the emulated device (tests); returns the previous profile's name.
// Kernels opted in before keep their attribute, checked against the new limit.
const char* set_arch_profile(const char* name);

enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr {
    cudaDevAttrMaxSharedMemoryPerBlock = 8,
    cudaDevAttrWarpSize = 10,
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
};
struct cudaFuncAttributes {
    std::size_t sharedSizeBytes = 0;    // static __shared__ (PLAB_SHARED) bytes, once known
    int maxDynamicSharedSizeBytes = 0;  // the opt-in attribute, or 48 KiB - static
};
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
template <typename... Params>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, void (*kernel)(Params...)) {
    // Until a launch has shown the kernel's static bytes, no default room is
    // reported (0), so reserve_shared_memory opts in to what it needs: the
    // emulator cannot know what nvcc knows before the kernel runs.
    const auto key = reinterpret_cast<std::uintptr_t>(kernel);
    attr->sharedSizeBytes = known_static_shared(key);
    const long long set = max_dynamic_shared(key);
    const long long room = static_shared_known(key)
                               ? static_cast<long long>(kDefaultSharedBytes) -
                                     static_cast<long long>(attr->sharedSizeBytes)
                               : 0;
    attr->maxDynamicSharedSizeBytes = static_cast<int>(set >= 0 ? set : room);
    return cudaSuccess;
}
// As CUDA: the value may not exceed the device maximum less the static bytes.
template <typename... Params>
cudaError_t cudaFuncSetAttribute(void (*kernel)(Params...), cudaFuncAttribute attr, int value) {
    const auto key = reinterpret_cast<std::uintptr_t>(kernel);
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
        static_cast<std::size_t>(value) + known_static_shared(key) >
            arch_profile().shared_per_block) {
        return cudaErrorInvalidValue;
    }
    set_max_dynamic_shared(key, value);
    return cudaSuccess;
}
}  // namespace plab::simt

using plab::simt::cudaDevAttrMaxSharedMemoryPerBlock;
using plab::simt::cudaDevAttrMaxSharedMemoryPerBlockOptin;
using plab::simt::cudaDevAttrMaxSharedMemoryPerMultiprocessor;
using plab::simt::cudaDevAttrMultiProcessorCount;
using plab::simt::cudaDevAttrWarpSize;
using plab::simt::cudaDeviceAttr;
using plab::simt::cudaDeviceGetAttribute;
using plab::simt::cudaDeviceSynchronize;
using plab::simt::cudaError_t;
using plab::simt::cudaErrorInvalidValue;
using plab::simt::cudaErrorMemoryAllocation;
using plab::simt::cudaFree;
using plab::simt::cudaFuncAttribute;
using plab::simt::cudaFuncAttributeMaxDynamicSharedMemorySize;
using plab::simt::cudaFuncAttributes;
using plab::simt::cudaFuncGetAttributes;
using plab::simt::cudaFuncSetAttribute;
using plab::simt::cudaGetDevice;
using plab::simt::cudaGetErrorName;
using plab::simt::cudaGetErrorString;
using plab::simt::cudaGetLastError;
using plab::simt::cudaMalloc;
using plab::simt::cudaMemcpy;
using plab::simt::cudaMemcpyDeviceToDevice;
using plab::simt::cudaMemcpyDeviceToHost;
using plab::simt::cudaMemcpyHostToDevice;
using plab::simt::cudaMemcpyHostToHost;
using plab::simt::cudaMemcpyKind;
using plab::simt::cudaMemset;
using plab::simt::cudaSuccess;

#define PLAB_CUDA_CHECK(expr)                                                                  \
    do {                                                                                       \
        const cudaError_t plab_cuda_err_ = (expr);                                             \
        if (plab_cuda_err_ != cudaSuccess) {                                                   \
            std::ostringstream plab_cuda_os_;                                                  \
            plab_cuda_os_ << "CUDA error " << cudaGetErrorName(plab_cuda_err_)                 \
                          << " (emulated) in " << #expr " at " << __FILE__ << ':' << __LINE__; \
            throw ::plab::InternalError(plab_cuda_os_.str());                                  \
        }                                                                                      \
    } while (0)

#include "simt_checked.h"  // PLAB_SHARED, PLAB_DYNAMIC_SHARED: shared memory that reports races

#endif  // __CUDACC__

// Code both builds compile from this one text lives in an inline namespace
// named after the build (gpu_native / gpu_emulated). Without it, a template
// such as reserve_shared_memory<float*, ...> had the same mangled name in the
// nvcc and the g++ object, the linker kept one of the two (an ODR violation
// nothing reports), and the native flash kernel was "opted in" through the
// emulator's bookkeeping: on the H200 its 53 KiB launch failed with "invalid
// argument". tests/gpu/odr_check.cmake keeps the two builds' symbols apart.
namespace plab::simt {
inline namespace PLAB_SIMT_NS {

// Throws plab::Error when a block would need more shared memory (static +
// dynamic) than the device gives one block even after opting in.
inline void check_shared_fits(const char* name, std::size_t static_bytes, std::size_t dynamic_bytes,
                              std::size_t optin_bytes) {
    PLAB_CHECK(static_bytes + dynamic_bytes <= optin_bytes,
               "kernel " << name << " needs " << static_bytes << " B of static and "
                         << dynamic_bytes << " B of dynamic shared memory per block; this "
                         << (PLAB_SIMT_EMULATED ? "(emulated) " : "") << "device allows at most "
                         << optin_bytes << " B in all");
}

// Makes `kernel` launchable with `dynamic_bytes` of dynamic shared memory:
// counts its static __shared__ bytes (cudaFuncGetAttributes) with the dynamic
// ones against the device's per-block maximum, and opts in
// (cudaFuncSetAttribute) when the total passes the 48 KiB default. Host code
// calls it before launching a kernel whose dynamic size may be large; the
// attribute stays set for the process (on the current device).
template <typename... Params>
void reserve_shared_memory(const char* name, void (*kernel)(Params...), std::size_t dynamic_bytes) {
    cudaFuncAttributes attr{};
    PLAB_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    int device = 0, optin = 0;
    PLAB_CUDA_CHECK(cudaGetDevice(&device));
    PLAB_CUDA_CHECK(
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    check_shared_fits(name, attr.sharedSizeBytes, dynamic_bytes, static_cast<std::size_t>(optin));
    // Opt in whenever static + dynamic passes the 48 KiB default, whatever the
    // kernel's reported maximum says: on the H200 (CUDA 13, driver 580) a
    // kernel with 4 KiB static + 48.1 KiB dynamic was refused at launch
    // (cudaErrorInvalidValue) when the opt-in was decided from that attribute
    // alone, which the driver reports as 48 KiB before any opt-in, static bytes
    // or not. And where a larger maximum was set before, keep it.
    if (attr.sharedSizeBytes + dynamic_bytes > kDefaultSharedBytes ||
        dynamic_bytes > static_cast<std::size_t>(attr.maxDynamicSharedSizeBytes)) {
        PLAB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(dynamic_bytes)));
        // Read it back: a launch past the maximum fails with a bare "invalid
        // argument", so say here, with the numbers, if the opt-in did not take.
        PLAB_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
        if (static_cast<std::size_t>(attr.maxDynamicSharedSizeBytes) < dynamic_bytes) {
            throw ::plab::InternalError(std::string("kernel ") + name + ": opted in to " +
                                        std::to_string(dynamic_bytes) +
                                        " B of dynamic shared memory, but its maximum reads " +
                                        std::to_string(attr.maxDynamicSharedSizeBytes) + " B");
        }
    }
}

}  // namespace PLAB_SIMT_NS
}  // namespace plab::simt

// The one way host code launches a kernel, in both builds: the kernel's name
// goes into every error message.
#define PLAB_LAUNCH(kernel, grid, block, shared_bytes, ...) \
    ::plab::simt::launch(#kernel, kernel, grid, block, shared_bytes, __VA_ARGS__)
