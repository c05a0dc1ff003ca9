// The SIMT emulator (kernels/simt) is faithful enough to catch GPU bugs.
//
// What it shows: every thread of a grid runs exactly once with its own
// indices; __syncthreads orders shared-memory writes before reads; a kernel
// that forgets a __syncthreads gives a wrong answer under the emulator (the
// missing-barrier tests *expect* the wrong answer: they prove the emulator
// exposes the race instead of hiding it); a barrier that some threads never
// reach is reported with the kernel's name instead of hanging; warp shuffles
// exchange values between lanes. These kernels are compiled by g++ against
// the emulation only (the test binary is C++), on every machine.
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <vector>

#include "simt/simt.h"
#include "test_util.h"

namespace {

using Catch::Matchers::Contains;

// ---- device memory helpers ---------------------------------------------------------
template <typename T>
T* to_device(const std::vector<T>& host) {
    T* p = nullptr;
    PLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), host.size() * sizeof(T)));
    PLAB_CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}
template <typename T>
std::vector<T> to_host(const T* p, std::size_t n) {
    std::vector<T> host(n);
    PLAB_CUDA_CHECK(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
}

// ---- kernels under test -----------------------------------------------------------
// Writes each thread's global coordinates and counts visits.
__global__ void coordinates_kernel(int* visits, int* coords) {
    const int bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    const int tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const int id = bx * (blockDim.x * blockDim.y * blockDim.z) + tx;
    visits[id] += 1;
    coords[6 * id + 0] = threadIdx.x;
    coords[6 * id + 1] = threadIdx.y;
    coords[6 * id + 2] = threadIdx.z;
    coords[6 * id + 3] = blockIdx.x;
    coords[6 * id + 4] = blockIdx.y;
    coords[6 * id + 5] = blockIdx.z;
}

// out[4t .. 4t+3] = in[offset + 4t .. offset + 4t + 3], as one 16-byte load each.
__global__ void load_float4_kernel(float* out, const float* in, int offset) {
    load_float4(out + 4 * threadIdx.x, in + offset + 4 * threadIdx.x);
}

// out[t] = in[(t + 1) % n] through dynamic shared memory, with the barrier.
__global__ void rotate_kernel(float* out, const float* in) {
    PLAB_DYNAMIC_SHARED(float, tile);
    const int t = threadIdx.x;
    const int n = blockDim.x;
    tile[t] = in[blockIdx.x * n + t];
    __syncthreads();
    out[blockIdx.x * n + t] = tile[(t + 1) % n];
}

// The same, with the __syncthreads forgotten: a thread may read its
// neighbour's slot before the neighbour has written it.
__global__ void rotate_missing_barrier_kernel(float* out, const float* in) {
    PLAB_DYNAMIC_SHARED(float, tile);
    const int t = threadIdx.x;
    const int n = blockDim.x;
    tile[t] = in[blockIdx.x * n + t];
    out[blockIdx.x * n + t] = tile[(t + 1) % n];
}

// Tree reduction of 128 values in static __shared__ memory; `with_barriers`
// false forgets the barriers between the levels (the classic bug).
template <bool with_barriers>
__global__ void block_sum_kernel(float* out, const float* in) {
    __shared__ float partial[128];
    const int t = threadIdx.x;
    partial[t] = in[blockIdx.x * 128 + t];
    if (with_barriers) __syncthreads();
    for (int stride = 64; stride > 0; stride /= 2) {
        if (t < stride) partial[t] += partial[t + stride];
        if (with_barriers) __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = partial[0];
}

// Threads past n return early, the others wait at a barrier they never reach.
__global__ void early_return_kernel(float* out, int n) {
    if (static_cast<int>(threadIdx.x) >= n) return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}

// Even and odd threads wait at two different barriers.
__global__ void divergent_barrier_kernel(float* out) {
    if (threadIdx.x % 2 == 0) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = 1.0f;
}

// Warp sums with the butterfly (__shfl_xor_sync) and the tree (__shfl_down_sync).
__global__ void warp_sum_kernel(int* xor_sums, int* down_sums, const int* in) {
    const int t = threadIdx.x;
    int a = in[t];
    for (int offset = 16; offset > 0; offset /= 2) a += __shfl_xor_sync(0xffffffffu, a, offset);
    int b = in[t];
    for (int offset = 16; offset > 0; offset /= 2) b += __shfl_down_sync(0xffffffffu, b, offset);
    xor_sums[t] = a;
    down_sums[t] = b;  // only lane 0 of each warp holds the total
}

__global__ void half_mask_shuffle_kernel(int* out) {
    out[threadIdx.x] = __shfl_sync(0x0000ffffu, static_cast<int>(threadIdx.x), 0);
}

// 16 KiB of static shared memory (PLAB_SHARED) plus the launch's dynamic
// bytes; each thread then sums slots that other threads wrote, so both areas
// must really be per-block memory behind a barrier. kId makes separate kernels
// (the opt-in attribute belongs to one kernel for the whole process).
constexpr int kStaticFloats = 4096;
template <int kId>
__global__ void big_shared_kernel(float* out, const float* in, int n_dynamic) {
    PLAB_SHARED(float, fixed, [kStaticFloats]);
    PLAB_DYNAMIC_SHARED(float, extra);
    const int t = threadIdx.x, n = blockDim.x;
    for (int i = t; i < kStaticFloats; i += n) fixed[i] = in[i];
    for (int i = t; i < n_dynamic; i += n) extra[i] = 2.0f * in[i % kStaticFloats];
    __syncthreads();
    float sum = 0.0f;
    for (int i = (t + 1) % n; i < kStaticFloats; i += n) sum += fixed[i];
    for (int i = (t + 1) % n; i < n_dynamic; i += n) sum += extra[i];
    out[t] = sum;
}

// What big_shared_kernel must return (the same sums, in the same order).
std::vector<float> big_shared_expected(const std::vector<float>& in, int n_dynamic, int n) {
    std::vector<float> out(n);
    for (int t = 0; t < n; ++t) {
        float sum = 0.0f;
        for (int i = (t + 1) % n; i < kStaticFloats; i += n) sum += in[i];
        for (int i = (t + 1) % n; i < n_dynamic; i += n) sum += 2.0f * in[i % kStaticFloats];
        out[t] = sum;
    }
    return out;
}

__global__ void atomic_count_kernel(int* counter) {
    atomicAdd(counter, 1);
}

}  // namespace

TEST_CASE("simt: every thread of a 3-D grid runs once with its own indices", "[gpu][simt]") {
    const dim3 grid(3, 2, 2), block(5, 3, 2);
    const int n = 3 * 2 * 2 * 5 * 3 * 2;
    int* visits = to_device(std::vector<int>(n, 0));
    int* coords = to_device(std::vector<int>(6 * n, -1));
    PLAB_LAUNCH(coordinates_kernel, grid, block, 0, visits, coords);
    const auto v = to_host(visits, n);
    const auto c = to_host(coords, 6 * n);
    for (int id = 0; id < n; ++id) {
        INFO("thread " << id);
        REQUIRE(v[id] == 1);
        const int t = id % 30, b = id / 30;
        REQUIRE(c[6 * id + 0] == t % 5);
        REQUIRE(c[6 * id + 1] == (t / 5) % 3);
        REQUIRE(c[6 * id + 2] == t / 15);
        REQUIRE(c[6 * id + 3] == b % 3);
        REQUIRE(c[6 * id + 4] == (b / 3) % 2);
        REQUIRE(c[6 * id + 5] == b / 6);
    }
    cudaFree(visits);
    cudaFree(coords);
}

TEST_CASE("simt: __syncthreads makes shared-memory writes visible", "[gpu][simt]") {
    const int n = 33, blocks = 3;
    const auto in = plab::test::random_floats(n * blocks, 11);
    float* d_in = to_device(in);
    float* d_out = to_device(std::vector<float>(n * blocks, NAN));
    PLAB_LAUNCH(rotate_kernel, blocks, n, n * sizeof(float), d_out, d_in);
    const auto out = to_host(d_out, n * blocks);
    for (int b = 0; b < blocks; ++b) {
        for (int t = 0; t < n; ++t) REQUIRE(out[b * n + t] == in[b * n + (t + 1) % n]);
    }

    const auto in2 = plab::test::random_floats(128 * 4, 12);
    float* d_in2 = to_device(in2);
    float* d_sums = to_device(std::vector<float>(4, NAN));
    PLAB_LAUNCH(block_sum_kernel<true>, 4, 128, 0, d_sums, d_in2);
    const auto sums = to_host(d_sums, 4);
    for (int b = 0; b < 4; ++b) {
        double expect = 0;
        for (int t = 0; t < 128; ++t) expect += in2[b * 128 + t];
        REQUIRE(std::fabs(sums[b] - expect) < 1e-4);
    }
    for (void* p : {(void*)d_in, (void*)d_out, (void*)d_in2, (void*)d_sums}) cudaFree(p);
}

// The missing-barrier tests: the kernel is wrong, and the emulator must show it.
TEST_CASE("simt: a forgotten __syncthreads is a race named by its tile (dynamic shared memory)",
          "[gpu][simt][missing_barrier]") {
    // PLAB_DYNAMIC_SHARED is checked (simt_checked.h): the first read of a
    // neighbour's element before the barrier fails the launch, by name.
    const int n = 64, blocks = 4;
    const auto in = plab::test::random_floats(n * blocks, 21);
    float* d_in = to_device(in);
    float* d_out = to_device(std::vector<float>(n * blocks, 0.0f));
    REQUIRE_THROWS_WITH(
        PLAB_LAUNCH(rotate_missing_barrier_kernel, blocks, n, n * sizeof(float), d_out, d_in),
        Contains("race on shared tile `tile`[") && Contains("with no __syncthreads between"));
    cudaFree(d_in);
    cudaFree(d_out);
}

// A plain __shared__ array (no kernel of kernels/ declares one: test_simt_checks)
// is not checked; the shuffled thread order and the NaN poison still show its race.
TEST_CASE("simt: a forgotten __syncthreads gives a wrong sum (static __shared__ reduction)",
          "[gpu][simt][missing_barrier]") {
    const int blocks = 4;
    const auto in = plab::test::random_floats(128 * blocks, 22, 0.5f, 1.5f);
    float* d_in = to_device(in);
    float* d_sums = to_device(std::vector<float>(blocks, NAN));
    PLAB_LAUNCH(block_sum_kernel<false>, blocks, 128, 0, d_sums, d_in);
    const auto sums = to_host(d_sums, blocks);
    int wrong = 0;
    for (int b = 0; b < blocks; ++b) {
        double expect = 0;
        for (int t = 0; t < 128; ++t) expect += in[b * 128 + t];
        wrong += !(std::fabs(sums[b] - expect) < 1e-3);
    }
    INFO(wrong << " of " << blocks << " block sums wrong");
    REQUIRE(wrong > 0);
    cudaFree(d_in);
    cudaFree(d_sums);
}

TEST_CASE("simt: a barrier some threads never reach is an error naming the kernel", "[gpu][simt]") {
    float* out = to_device(std::vector<float>(64, 0.0f));
    REQUIRE_THROWS_WITH(PLAB_LAUNCH(early_return_kernel, 1, 64, 0, out, 40),
                        Contains("early_return_kernel") && Contains("never reaches"));
    REQUIRE_THROWS_WITH(PLAB_LAUNCH(divergent_barrier_kernel, 1, 8, 0, out),
                        Contains("divergent_barrier_kernel") && Contains("divergent"));
    // The emulator recovers: the next launch runs normally.
    PLAB_LAUNCH(early_return_kernel, 1, 64, 0, out, 64);
    const auto h = to_host(out, 64);
    REQUIRE(h[63] == 1.0f);
    cudaFree(out);
}

TEST_CASE("simt: warp shuffles exchange values between lanes", "[gpu][simt]") {
    const int n = 96;  // three warps
    std::vector<int> in(n);
    for (int i = 0; i < n; ++i) in[i] = 3 * i + 1;
    int* d_in = to_device(in);
    int* d_xor = to_device(std::vector<int>(n, -1));
    int* d_down = to_device(std::vector<int>(n, -1));
    PLAB_LAUNCH(warp_sum_kernel, 1, n, 0, d_xor, d_down, d_in);
    const auto x = to_host(d_xor, n);
    const auto d = to_host(d_down, n);
    for (int w = 0; w < 3; ++w) {
        const int total = std::accumulate(in.begin() + 32 * w, in.begin() + 32 * w + 32, 0);
        for (int lane = 0; lane < 32; ++lane) REQUIRE(x[32 * w + lane] == total);
        REQUIRE(d[32 * w] == total);
    }
    int* out = to_device(std::vector<int>(32, 0));
    REQUIRE_THROWS_WITH(PLAB_LAUNCH(half_mask_shuffle_kernel, 1, 32, 0, out),
                        Contains("half_mask_shuffle_kernel") && Contains("whole-warp"));
    for (int* p : {d_in, d_xor, d_down, out}) cudaFree(p);
}

TEST_CASE("simt: atomics, launch limits and checked memory calls", "[gpu][simt]") {
    int* counter = to_device(std::vector<int>{0});
    PLAB_LAUNCH(atomic_count_kernel, 7, 33, 0, counter);
    REQUIRE(to_host(counter, 1)[0] == 7 * 33);
    REQUIRE_THROWS_WITH(PLAB_LAUNCH(atomic_count_kernel, 1, 2048, 0, counter),
                        Contains("atomic_count_kernel") && Contains("threads per block"));
    REQUIRE_THROWS_WITH(PLAB_LAUNCH(atomic_count_kernel, 1, 32, 64 * 1024, counter),
                        Contains("shared memory"));
    cudaFree(counter);
    int on_stack = 0;
    auto free_bad_pointer = [&] { PLAB_CUDA_CHECK(cudaFree(&on_stack)); };
    REQUIRE_THROWS_WITH(free_bad_pointer(), Contains("cudaErrorInvalidValue"));
}

TEST_CASE("simt: load_float4 reads four floats, and refuses an address a GPU would fault on",
          "[gpu][simt]") {
    const auto in = plab::test::random_floats(33, 41);
    float* d_in = to_device(in);  // cudaMalloc'ed: 16-byte aligned, as on a GPU
    float* d_out = to_device(std::vector<float>(32, NAN));
    PLAB_LAUNCH(load_float4_kernel, 1, 8, 0, d_out, d_in, 0);
    REQUIRE(to_host(d_out, 32) == std::vector<float>(in.begin(), in.begin() + 32));
    // One float further is 4-byte aligned only: LDG.128 faults there, the emulator throws.
    REQUIRE_THROWS_WITH(PLAB_LAUNCH(load_float4_kernel, 1, 8, 0, d_out, d_in, 1),
                        Contains("not 16-byte aligned"));
    cudaFree(d_in);
    cudaFree(d_out);
}

// Issue 14: shared memory is static + dynamic, 48 KiB without opting in.
TEST_CASE("simt: static + dynamic shared memory past 48 KiB fails without the opt-in",
          "[gpu][simt][shared_memory]") {
    const int threads = 64;
    const auto in = plab::test::random_floats(kStaticFloats, 31);
    float* d_in = to_device(in);
    float* d_out = to_device(std::vector<float>(threads, NAN));
    const int fits = (48 * 1024 - 16 * 1024) / 4;  // 32 KiB dynamic: exactly 48 KiB in all
    const int over = fits + 1;                     // 4 bytes too many
    // 1. At the limit: runs, and both areas hold what was written.
    PLAB_LAUNCH(big_shared_kernel<1>, 1, threads, std::size_t(fits) * 4, d_out, d_in, fits);
    REQUIRE(to_host(d_out, threads) == big_shared_expected(in, fits, threads));
    // 2. Past it by one float, no opt-in: an error naming the kernel and the counts.
    //    The static bytes count: the dynamic bytes alone (32772 B) are far below 48 KiB.
    REQUIRE_THROWS_WITH(
        PLAB_LAUNCH(big_shared_kernel<1>, 1, threads, std::size_t(over) * 4, d_out, d_in, over),
        Contains("big_shared_kernel<1>") && Contains("16384 B static") &&
            Contains("32772 B dynamic") && Contains("cudaFuncAttributeMaxDynamicSharedMemorySize"));
    // 3. A kernel the emulator has never run: its static bytes are counted when
    //    the first thread reaches the PLAB_SHARED declaration.
    REQUIRE_THROWS_WITH(
        PLAB_LAUNCH(big_shared_kernel<2>, 1, threads, std::size_t(over) * 4, d_out, d_in, over),
        Contains("big_shared_kernel<2>") && Contains("16384 B static"));
    cudaFree(d_in);
    cudaFree(d_out);
}

TEST_CASE("simt: a launch that opts in to more shared memory runs, up to the device maximum",
          "[gpu][simt][shared_memory]") {
    const int threads = 64;
    const auto in = plab::test::random_floats(kStaticFloats, 32);
    float* d_in = to_device(in);
    float* d_out = to_device(std::vector<float>(threads, NAN));
    const int dynamic = 200 * 1024 / 4;  // 200 KiB + 16 KiB static: within sm_90's 227 KiB
    // 1. cudaFuncSetAttribute, then the launch: runs, results right.
    REQUIRE(cudaFuncSetAttribute(big_shared_kernel<3>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 dynamic * 4) == cudaSuccess);
    PLAB_LAUNCH(big_shared_kernel<3>, 2, threads, std::size_t(dynamic) * 4, d_out, d_in, dynamic);
    REQUIRE(to_host(d_out, threads) == big_shared_expected(in, dynamic, threads));
    // 2. More dynamic bytes than it opted in to: an error naming the kernel.
    REQUIRE_THROWS_WITH(PLAB_LAUNCH(big_shared_kernel<3>, 1, threads, std::size_t(dynamic + 1) * 4,
                                    d_out, d_in, dynamic + 1),
                        Contains("big_shared_kernel<3>") && Contains("opted in to"));
    // 3. The attribute cannot pass the device maximum less the static bytes (as CUDA).
    REQUIRE(cudaFuncSetAttribute(big_shared_kernel<3>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 212 * 1024) == cudaErrorInvalidValue);
    cudaGetLastError();
    // 4. reserve_shared_memory does the counting and the opt-in for host code,
    //    and refuses one clear line past the device's maximum.
    plab::simt::reserve_shared_memory("big_shared_kernel<4>", big_shared_kernel<4>,
                                      std::size_t(dynamic) * 4);
    PLAB_LAUNCH(big_shared_kernel<4>, 1, threads, std::size_t(dynamic) * 4, d_out, d_in, dynamic);
    REQUIRE(to_host(d_out, threads) == big_shared_expected(in, dynamic, threads));
    plab::test::require_error(
        [&] {
            plab::simt::reserve_shared_memory("big_shared_kernel<4>", big_shared_kernel<4>,
                                              212 * 1024);
        },
        "kernel big_shared_kernel<4> needs 16384 B of static and 217088 B of dynamic shared "
        "memory per block; this (emulated) device allows at most 232448 B in all");
    cudaFree(d_in);
    cudaFree(d_out);
}

// Issue 47: the emulator models each architecture the native build targets
// (PLAB_SIMT_ARCH) and answers the device queries with its numbers; a launch
// that asks more shared memory than the profile gives a block is refused with
// the profile named — the bug a T4 would show (flash attention's 64x64 tiles
// took 84,992 B at Dh = 64), planted here on a test kernel.
TEST_CASE("simt: architecture profiles, and a launch over the profile shared memory is refused",
          "[gpu][simt][shared_memory][arch]") {
    namespace simt = plab::simt;
    struct Restore {
        const char* name;
        ~Restore() { simt::set_arch_profile(name); }
    } restore{simt::set_arch_profile("sm_90")};
    // 1. Every profile's attributes, as cudaDeviceGetAttribute reports them.
    for (const simt::ArchProfile& p : simt::kArchProfiles) {
        simt::set_arch_profile(p.name);
        INFO(p.name);
        int v = 0;
        REQUIRE(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0) ==
                cudaSuccess);
        REQUIRE(v == static_cast<int>(p.shared_per_block));
        REQUIRE(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0) ==
                cudaSuccess);
        REQUIRE(v == static_cast<int>(p.shared_per_sm));
        REQUIRE(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess);
        REQUIRE(v == p.multiprocessors);
        REQUIRE(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, 0) == cudaSuccess);
        REQUIRE(v == 32);
        REQUIRE(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlock, 0) == cudaSuccess);
        REQUIRE(v == 48 * 1024);
    }
    REQUIRE(std::string(simt::set_arch_profile("sm_75")) == "sm_90");  // the last one set
    REQUIRE(simt::arch_profile().shared_per_block == 64 * 1024);

    // 2. On sm_75 (64 KiB a block): 16 KiB static + 48 KiB dynamic fits, opted in.
    const int threads = 64;
    const auto in = plab::test::random_floats(kStaticFloats, 47);
    float* d_in = to_device(in);
    float* d_out = to_device(std::vector<float>(threads, NAN));
    const int fits = 48 * 1024 / 4, over = 56 * 1024 / 4;  // 64 KiB, 72 KiB in all
    simt::reserve_shared_memory("big_shared_kernel<6>", big_shared_kernel<6>,
                                std::size_t(fits) * 4);
    PLAB_LAUNCH(big_shared_kernel<6>, 1, threads, std::size_t(fits) * 4, d_out, d_in, fits);
    REQUIRE(to_host(d_out, threads) == big_shared_expected(in, fits, threads));
    // 3. The planted bug: 72 KiB, more than sm_75 gives, launched anyway: refused.
    REQUIRE_THROWS_WITH(
        PLAB_LAUNCH(big_shared_kernel<6>, 1, threads, std::size_t(over) * 4, d_out, d_in, over),
        Contains("big_shared_kernel<6>") && Contains("16384 B static + 57344 B dynamic") &&
            Contains("the emulated sm_75 device (T4, PLAB_SIMT_ARCH) allows at most 65536 B"));
    // ... and the opt-in helper refuses it first, in one line.
    plab::test::require_error(
        [&] {
            simt::reserve_shared_memory("big_shared_kernel<6>", big_shared_kernel<6>,
                                        std::size_t(over) * 4);
        },
        "kernel big_shared_kernel<6> needs 16384 B of static and 57344 B of dynamic shared "
        "memory per block; this (emulated) device allows at most 65536 B in all");
    // 4. The same launch on sm_86 (99 KiB) runs once opted in.
    simt::set_arch_profile("sm_86");
    simt::reserve_shared_memory("big_shared_kernel<6>", big_shared_kernel<6>,
                                std::size_t(over) * 4);
    PLAB_LAUNCH(big_shared_kernel<6>, 1, threads, std::size_t(over) * 4, d_out, d_in, over);
    REQUIRE(to_host(d_out, threads) == big_shared_expected(in, over, threads));
    // 5. An unknown name is one clear error listing the valid ones.
    plab::test::require_error([] { simt::set_arch_profile("sm_70"); },
                              "PLAB_SIMT_ARCH=sm_70 is not an emulated architecture; use "
                              "sm_75|sm_80|sm_86|sm_89|sm_90");
    cudaFree(d_in);
    cudaFree(d_out);
}
