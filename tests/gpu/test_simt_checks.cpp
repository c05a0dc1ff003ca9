// The SIMT emulator's checks that name a fault instead of hoping for a wrong
// answer (kernels/simt/simt_checked.h, simt_emulator.cpp).
//
// What it shows, one planted fault each: a read of a checked shared tile that
// another thread wrote since the last __syncthreads is a race named with the
// tile, the index, both threads and both lines; so are two writes; an index
// outside a checked tile is named with its line; fresh cudaMalloc memory is
// NaN (0xff bytes), so reading what nobody wrote shows; the lanes of a warp
// must meet at the same shuffle; a grid or block past the architecture's
// limits is refused; and blocks run in a shuffled order (a seed) fail a
// kernel whose blocks depend on each other. The same kernels with the fault
// removed pass. Compiled by g++ against the emulation only.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <vector>

#include "simt/simt.h"
#include "test_util.h"

namespace {

using Catch::Matchers::Contains;

template <typename T>
T* device_copy(const std::vector<T>& host) {
    T* p = nullptr;
    PLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), host.size() * sizeof(T)));
    PLAB_CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}
template <typename T>
std::vector<T> host_copy(const T* p, std::size_t n) {
    std::vector<T> host(n);
    PLAB_CUDA_CHECK(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
}

constexpr int kThreads = 64;

// out[t] = t + 1 through a checked tile: each thread writes its element and
// reads its neighbour's, with or without the barrier between.
__global__ void neighbour_kernel(float* out, int with_barrier) {
    PLAB_CHECKED_SHARED(float, tile, kThreads);
    const int t = static_cast<int>(threadIdx.x);
    tile[t] = static_cast<float>(t);  // the write
    if (with_barrier) __syncthreads();
    out[t] = tile[(t + 1) % kThreads];  // the read
}

// Every thread writes element 0.
__global__ void two_writes_kernel(float* out) {
    PLAB_CHECKED_SHARED(float, tile, kThreads);
    tile[0] = static_cast<float>(threadIdx.x);
    __syncthreads();
    out[threadIdx.x] = tile[0];
}

// One past the end of a checked tile (t <= n).
__global__ void past_the_end_kernel(float* out) {
    PLAB_CHECKED_SHARED(float, tile, kThreads);
    const int t = static_cast<int>(threadIdx.x);
    tile[t] = 1.0f;
    __syncthreads();
    float sum = 0.0f;
    for (int j = 0; j <= kThreads; ++j) sum += tile[j];
    out[t] = sum;
}

// Dynamic checked memory as two tiles: b = a + n; b[t] = a[t] read after a barrier or not.
__global__ void dynamic_tiles_kernel(float* out, int with_barrier) {
    PLAB_CHECKED_DYNAMIC_SHARED(float, tiles);
    auto a = tiles;
    auto b = tiles + kThreads;
    const int t = static_cast<int>(threadIdx.x);
    a[t] = static_cast<float>(2 * t);
    if (with_barrier) __syncthreads();
    b[t] = a[kThreads - 1 - t];
    __syncthreads();
    out[t] = b[t];
}

// Lanes 0..15 and 16..31 call a shuffle from two different lines, or one line.
__global__ void shuffle_sites_kernel(float* out, int same_site) {
    const int lane = static_cast<int>(threadIdx.x);
    float x = static_cast<float>(lane);
    if (same_site || lane < 16)
        x = __shfl_xor_sync(0xffffffffu, x, 1);
    else
        x = __shfl_xor_sync(0xffffffffu, x, 1);
    out[lane] = x;
}

// Block b's value is block b - 1's plus one: it depends on the blocks' order.
__global__ void chain_kernel(int* value) {
    const int b = static_cast<int>(blockIdx.x);
    if (threadIdx.x == 0) value[b + 1] = value[b] + 1;
}

__global__ void nothing_kernel(int*) {}

// A warp's lanes hand values to each other through a tile: lane t reads lane
// t ^ 1's write after a __syncwarp, or without one (`fence` 0); `other_warp`
// 1 reads the element of the same lane in the other warp instead (a
// __syncwarp does not make another warp's writes visible).
__global__ void warp_handoff_kernel(float* out, int fence, int other_warp) {
    PLAB_SHARED(float, tile, [64]);
    const int t = static_cast<int>(threadIdx.x);
    tile[t] = static_cast<float>(t);
    if (fence) __syncwarp();
    out[t] = tile[other_warp ? (t + 32) % 64 : t ^ 1];
}

// A 2-D tile [4][8]: row r, column c; `c_past` reads column 8 of row 0 (which
// a flat index would quietly take from row 1).
__global__ void rows_kernel(float* out, int c_past) {
    PLAB_SHARED(float, tile, [4][8]);
    const int t = static_cast<int>(threadIdx.x);
    tile[t / 8][t % 8] = static_cast<float>(t);
    __syncthreads();
    out[t] = c_past ? tile[0][8] : tile[3 - t / 8][t % 8];
}

}  // namespace

TEST_CASE(
    "simt checks: a read of a checked tile another thread wrote since the last barrier is a "
    "race named with the tile and both lines",
    "[gpu][simt][checks]") {
    float* out = device_copy(std::vector<float>(kThreads, 0.0f));
    PLAB_LAUNCH(neighbour_kernel, 1, kThreads, 0, out, 1);
    const std::vector<float> got = host_copy(out, kThreads);
    for (int t = 0; t < kThreads; ++t) CHECK(got[t] == float((t + 1) % kThreads));
    try {
        PLAB_LAUNCH(neighbour_kernel, 1, kThreads, 0, out, 0);
        FAIL("the missing __syncthreads was not reported");
    } catch (const plab::InternalError& e) {
        const std::string m = e.what();
        CHECK_THAT(m, Contains("kernel neighbour_kernel"));
        CHECK_THAT(m, Contains("race on shared tile `tile`["));
        CHECK_THAT(m, Contains(" reads it (test_simt_checks.cpp:"));
        CHECK_THAT(m, Contains(" wrote it (test_simt_checks.cpp:"));
        CHECK_THAT(m, Contains("with no __syncthreads between"));
    }
    cudaFree(out);
}

TEST_CASE("simt checks: two writes of one element in one interval and an index past the end",
          "[gpu][simt][checks]") {
    float* out = device_copy(std::vector<float>(kThreads, 0.0f));
    REQUIRE_THROWS_WITH(PLAB_LAUNCH(two_writes_kernel, 1, kThreads, 0, out),
                        Contains("race on shared tile `tile`[0]") && Contains("(two writes)"));
    try {
        PLAB_LAUNCH(past_the_end_kernel, 1, kThreads, 0, out);
        FAIL("the read past the end was not reported");
    } catch (const plab::InternalError& e) {
        CHECK_THAT(std::string(e.what()),
                   Contains("indexes shared tile `tile`[64] at test_simt_checks.cpp:"));
        CHECK_THAT(std::string(e.what()), Contains("outside its 64 elements (0..63)"));
    }
    cudaFree(out);
}

TEST_CASE("simt checks: dynamic shared memory as checked tiles with pointer offsets",
          "[gpu][simt][checks]") {
    float* out = device_copy(std::vector<float>(kThreads, 0.0f));
    const std::size_t bytes = 2 * kThreads * sizeof(float);
    PLAB_LAUNCH(dynamic_tiles_kernel, 1, kThreads, bytes, out, 1);
    const std::vector<float> got = host_copy(out, kThreads);
    for (int t = 0; t < kThreads; ++t) CHECK(got[t] == float(2 * (kThreads - 1 - t)));
    try {
        PLAB_LAUNCH(dynamic_tiles_kernel, 1, kThreads, bytes, out, 0);
        FAIL("the missing __syncthreads was not reported");
    } catch (const plab::InternalError& e) {
        CHECK_THAT(std::string(e.what()), Contains("race on shared tile `tiles`["));
    }
    cudaFree(out);
}

TEST_CASE("simt checks: a __syncwarp makes a lane's writes visible to its warp and no further",
          "[gpu][simt][checks]") {
    float* out = device_copy(std::vector<float>(kThreads, 0.0f));
    PLAB_LAUNCH(warp_handoff_kernel, 1, kThreads, 0, out, 1, 0);
    const std::vector<float> got = host_copy(out, kThreads);
    for (int t = 0; t < kThreads; ++t) CHECK(got[t] == float(t ^ 1));
    REQUIRE_THROWS_WITH(
        PLAB_LAUNCH(warp_handoff_kernel, 1, kThreads, 0, out, 0, 0),
        Contains("race on shared tile `tile`[") && Contains("with no __syncthreads between"));
    REQUIRE_THROWS_WITH(PLAB_LAUNCH(warp_handoff_kernel, 1, kThreads, 0, out, 1, 1),
                        Contains("race on shared tile `tile`["));
    cudaFree(out);
}

TEST_CASE("simt checks: each index of a 2-D tile is checked against its own extent",
          "[gpu][simt][checks]") {
    float* out = device_copy(std::vector<float>(32, 0.0f));
    PLAB_LAUNCH(rows_kernel, 1, 32, 0, out, 0);
    const std::vector<float> got = host_copy(out, 32);
    for (int t = 0; t < 32; ++t) CHECK(got[t] == float((3 - t / 8) * 8 + t % 8));
    REQUIRE_THROWS_WITH(PLAB_LAUNCH(rows_kernel, 1, 32, 0, out, 1),
                        Contains("indexes shared tile `tile`[8] at test_simt_checks.cpp:") &&
                            Contains("outside its 8 elements (0..7)"));
    cudaFree(out);
}

TEST_CASE("simt checks: every kernel declares shared memory through the checked macros",
          "[gpu][simt][checks]") {
    // A plain __shared__ array would escape the race check (only the shuffled
    // order and the NaN poison could catch its races); kernels use PLAB_SHARED
    // and PLAB_DYNAMIC_SHARED, which simt.h maps to checked arrays here.
    const std::string kernels = std::string(PLAB_TESTS_DIR) + "/../kernels";
    int files = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(kernels)) {
        const std::string path = entry.path().string();
        if (path.find("/simt/") != std::string::npos) continue;
        const std::string ext = entry.path().extension().string();
        if (ext != ".cu" && ext != ".cuh" && ext != ".h") continue;
        ++files;
        std::ifstream in(path);
        int line_no = 0;
        for (std::string line; std::getline(in, line);) {
            ++line_no;
            const std::size_t comment = line.find("//");
            const std::string code = line.substr(0, comment);
            INFO(path << ":" << line_no << ": " << line);
            CHECK(code.find("__shared__") == std::string::npos);
        }
    }
    CHECK(files > 20);
}

TEST_CASE("simt checks: fresh cudaMalloc memory reads NaN", "[gpu][simt][checks]") {
    float* p = nullptr;
    PLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), 100 * sizeof(float)));
    const std::vector<float> got = host_copy(p, 100);
    for (float x : got) CHECK(std::isnan(x));
    cudaFree(p);
}

TEST_CASE("simt checks: the lanes of a warp must meet at the same shuffle", "[gpu][simt][checks]") {
    float* out = device_copy(std::vector<float>(32, 0.0f));
    PLAB_LAUNCH(shuffle_sites_kernel, 1, 32, 0, out, 1);
    const std::vector<float> got = host_copy(out, 32);
    for (int lane = 0; lane < 32; ++lane) CHECK(got[lane] == float(lane ^ 1));
    try {
        PLAB_LAUNCH(shuffle_sites_kernel, 1, 32, 0, out, 0);
        FAIL("lanes at two shuffles were not reported");
    } catch (const plab::InternalError& e) {
        CHECK_THAT(std::string(e.what()), Contains("meet at different shuffles"));
        CHECK_THAT(std::string(e.what()), Contains("test_simt_checks.cpp:"));
    }
    cudaFree(out);
}

TEST_CASE("simt checks: a grid or block past the architecture's limits is refused",
          "[gpu][simt][checks]") {
    int* x = device_copy(std::vector<int>(1, 0));
    REQUIRE_THROWS_WITH(PLAB_LAUNCH(nothing_kernel, dim3(1, 70000), 32, 0, x),
                        Contains("allows a grid up to (2147483647,65535,65535)"));
    REQUIRE_THROWS_WITH(PLAB_LAUNCH(nothing_kernel, 1, dim3(1, 1, 65), 0, x),
                        Contains("a block up to (1024,1024,64)"));
    cudaFree(x);
}

TEST_CASE("simt checks: blocks in a shuffled order fail a kernel whose blocks depend on each other",
          "[gpu][simt][checks]") {
    const int n = 16;
    std::vector<int> start(n + 1, 0);
    int* value = device_copy(start);
    PLAB_LAUNCH(chain_kernel, n, 32, 0, value);
    std::vector<int> in_order(n + 1);
    std::iota(in_order.begin(), in_order.end(), 0);
    CHECK(host_copy(value, n + 1) == in_order);  // the emulator's default order hides the fault
    PLAB_CUDA_CHECK(
        cudaMemcpy(value, start.data(), start.size() * sizeof(int), cudaMemcpyHostToDevice));
    plab::simt::set_block_order_seed(7);
    PLAB_LAUNCH(chain_kernel, n, 32, 0, value);
    plab::simt::set_block_order_seed(0);
    CHECK(host_copy(value, n + 1) != in_order);  // a shuffled order shows it
    cudaFree(value);
}
