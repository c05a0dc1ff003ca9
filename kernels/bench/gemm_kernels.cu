// gemm_kernels: gpu's matmul kernels against cuBLAS SGEMM on one device, on
// the products a stories15M / stories110M prefill makes and a square one, and
// on the one-row products of their decode steps.
//
// What it measures: for each shape out (M, N) = x (M, K) · w (N, K)ᵀ, the
// device time of each kernel (CUDA events, after warm-ups) as the median of 7
// windows, each of N launches back to back between one event pair, divided
// by N (N = 50, or 5 on the large shapes). One launch between two events
// would count a launch's host-side enqueue (cuBLAS's is longer than a bare
// kernel's) against a microsecond kernel: single-launch timings of one
// 512 x 768 x 288 product put cuBLAS at 8,288 and 8,937 GFLOP/s in two runs
// of one day. Then the GFLOP/s (2·M·N·K per product) and each kernel's share
// of cuBLAS's rate on the same shape — cuBLAS SGEMM with CUBLAS_DEFAULT_MATH:
// float32 on the CUDA cores, no tensor cores, no TF32 — and, for every
// kernel, the largest |out - cuBLAS| over max |cuBLAS| (float32 sums of K
// products in another order: ~1e-6; NaN or a larger figure means a wrong
// kernel). The one-row table adds each kernel's weight read rate (N·K·4 bytes
// over its time), the figure a decode product is bounded by. The inputs are
// random (a fixed seed), never zeros; outputs are poisoned with NaN first.
//
// Native only: the gemm_kernels target of kernels/CMakeLists.txt (built where
// nvcc and cuBLAS are, into the build folder); kernels/device-check.sh runs it.
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <vector>

#include "core/random.h"
#include "matmul_blocked.cu"
#include "matmul_rows.cu"
#include "matmul_tiled.cu"
#include "simt/simt_native.cu"

namespace {

using namespace plab::gpu_native;

#define CHECK_CUBLAS(expr)                                                               \
    do {                                                                                 \
        const cublasStatus_t s_ = (expr);                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                               \
            std::fprintf(stderr, "gemm_kernels: %s in %s (a CUDA device and driver?)\n", \
                         cublasGetStatusName(s_), #expr);                                \
            std::exit(1);                                                                \
        }                                                                                \
    } while (0)

struct Shape {
    const char* what;
    int m, n, k;
};

// Median over 7 windows of `batch` back-to-back launches, per launch.
template <typename F>
double median_ms(F&& run, int batch) {
    cudaEvent_t a, b;
    PLAB_CUDA_CHECK(cudaEventCreate(&a));
    PLAB_CUDA_CHECK(cudaEventCreate(&b));
    for (int i = 0; i < 3; ++i) run();  // warm-up
    std::vector<float> ms;
    for (int window = 0; window < 7; ++window) {
        PLAB_CUDA_CHECK(cudaEventRecord(a));
        for (int i = 0; i < batch; ++i) run();
        PLAB_CUDA_CHECK(cudaEventRecord(b));
        PLAB_CUDA_CHECK(cudaEventSynchronize(b));
        float t = 0;
        PLAB_CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
        ms.push_back(t / float(batch));
    }
    std::sort(ms.begin(), ms.end());
    PLAB_CUDA_CHECK(cudaEventDestroy(a));
    PLAB_CUDA_CHECK(cudaEventDestroy(b));
    return ms[ms.size() / 2];
}

std::vector<float> download(const float* d, std::size_t n) {
    std::vector<float> h(n);
    PLAB_CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

// max |got - ref| / max |ref|; NaN anywhere in got gives NaN.
double rel_error(const std::vector<float>& got, const std::vector<float>& ref) {
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        if (std::isnan(got[i])) return NAN;
        diff = std::max(diff, std::fabs(double(got[i]) - ref[i]));
        scale = std::max(scale, std::fabs(double(ref[i])));
    }
    return diff / scale;
}

// One product's operands on the device, random (a fixed generator), and
// cuBLAS's out = x · wᵀ on them; freed with it.
struct Product {
    const Shape& s;
    cublasHandle_t handle;
    float* x = nullptr;
    float* w = nullptr;
    float* out = nullptr;
    std::size_t n_out;

    Product(const Shape& shape, cublasHandle_t h, plab::random::Engine& rng)
        : s(shape), handle(h), n_out(std::size_t(shape.m) * shape.n) {
        const std::size_t nx = std::size_t(s.m) * s.k, nw = std::size_t(s.n) * s.k;
        std::vector<float> hx(nx), hw(nw);
        for (float& v : hx) v = plab::random::uniform(rng, -1.0f, 1.0f);
        for (float& v : hw) v = plab::random::uniform(rng, -1.0f, 1.0f);
        PLAB_CUDA_CHECK(cudaMalloc(&x, nx * sizeof(float)));
        PLAB_CUDA_CHECK(cudaMalloc(&w, nw * sizeof(float)));
        PLAB_CUDA_CHECK(cudaMalloc(&out, n_out * sizeof(float)));
        PLAB_CUDA_CHECK(cudaMemcpy(x, hx.data(), nx * sizeof(float), cudaMemcpyHostToDevice));
        PLAB_CUDA_CHECK(cudaMemcpy(w, hw.data(), nw * sizeof(float), cudaMemcpyHostToDevice));
    }
    ~Product() {
        cudaFree(x);
        cudaFree(w);
        cudaFree(out);
    }
    Product(const Product&) = delete;
    Product& operator=(const Product&) = delete;

    // out row-major (M, N) is column-major (N, M): C = wᵀ(as stored, K x N col-major)ᵀ · x.
    void cublas() const {
        const float one = 1, zero = 0;
        CHECK_CUBLAS(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, s.n, s.m, s.k, &one, w, s.k, x,
                                 s.k, &zero, out, s.n));
    }
    void poison() const { PLAB_CUDA_CHECK(cudaMemset(out, 0xff, n_out * sizeof(float))); }
    // What `run` writes, after poisoning out with NaN.
    template <typename F>
    std::vector<float> result_of(F&& run) const {
        poison();
        run();
        return download(out, n_out);
    }
};

// The one-row products of a decode step: matmul_tiled (gpu's kernel for them
// before matmul_rows), matmul_rows and cuBLAS, in µs and weight GB/s.
void decode_products(cublasHandle_t handle) {
    const Shape shapes[] = {
        {"15M Q|K|V one", 1, 864, 288},
        {"15M Wo", 1, 288, 288},
        {"15M gate|up one", 1, 1536, 288},
        {"15M down", 1, 288, 768},
        {"15M classifier", 1, 32000, 288},
        {"110M Q|K|V one", 1, 2304, 768},
        {"110M Wo", 1, 768, 768},
        {"110M gate|up one", 1, 4096, 768},
        {"110M down", 1, 768, 2048},
        {"110M classifier", 1, 32000, 768},
        {"batch 8, 110M down", 8, 768, 2048},
    };
    std::printf("\none-row products (decode): us a product, and the weights' read rate\n");
    std::printf("%-22s %5s %5s %5s  %8s %8s %8s  %8s %8s %8s  %9s\n", "product", "M", "N", "K",
                "tiled", "rows", "cuBLAS", "tiled", "rows", "cuBLAS", "err");
    std::printf("%-22s %5s %5s %5s  %8s %8s %8s  %8s %8s %8s  %9s\n", "", "", "", "", "us", "us",
                "us", "GB/s", "GB/s", "GB/s", "rows");
    plab::random::Engine rng(17);
    for (const Shape& s : shapes) {
        const Product p(s, handle, rng);
        auto cublas = [&] { p.cublas(); };
        auto tiled = [&] { launch_matmul_tiled(p.out, p.x, p.w, s.m, s.n, s.k); };
        const MatmulParts part = MatmulParts::one(p.out, p.w, s.n);
        auto rows = [&] { launch_matmul_rows_parts(p.x, s.m, s.k, part); };
        const std::vector<float> ref = p.result_of(cublas);
        const double err_rows = rel_error(p.result_of(rows), ref);
        const double us_tiled = 1e3 * median_ms(tiled, 50), us_rows = 1e3 * median_ms(rows, 50),
                     us_cublas = 1e3 * median_ms(cublas, 50);
        const double bytes = 4.0 * s.n * s.k;
        std::printf("%-22s %5d %5d %5d  %8.2f %8.2f %8.2f  %8.0f %8.0f %8.0f  %9.2e\n", s.what, s.m,
                    s.n, s.k, us_tiled, us_rows, us_cublas, bytes / us_tiled / 1e3,
                    bytes / us_rows / 1e3, bytes / us_cublas / 1e3, err_rows);
    }
}

// Every matmul_blocked tile on the prefill shapes, whatever the rule picks:
// GFLOP/s, blocks, how many fit a multiprocessor at once
// (cudaOccupancyMaxActiveBlocksPerMultiprocessor) and the waves that makes
// (blocks / (multiprocessors x that)). A wave-aware tile rule needs each
// tile's rate per resident block, which only a device gives.
template <int TM, int TN>
void tile_row(const Product& p, const char* name) {
    const Shape& s = p.s;
    auto run = [&] { launch_tile<TM, TN, true>(MatmulParts::one(p.out, p.w, s.n), p.x, s.m, s.k); };
    const double err = rel_error(p.result_of(run), p.result_of([&] { p.cublas(); }));
    const double ms = median_ms(run, s.m >= 4096 ? 5 : 50);
    int per_sm = 0;
    PLAB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, matmul_blocked_kernel<TM, TN, true>, kSide * kSide, 0));
    const long long blocks = tiles(s.m, s.n, kSide * TM, kSide * TN);
    const double waves = double(blocks) / (double(multiprocessors()) * std::max(per_sm, 1));
    std::printf("%-22s %5d %5d %5d  %-8s %9.0f %7lld %7d %7.2f  %9.2e\n", s.what, s.m, s.n, s.k,
                name, 2.0 * s.m * s.n * s.k / ms / 1e6, blocks, per_sm, waves, err);
}

void tiles_by_shape(const Shape* shapes, std::size_t count, cublasHandle_t handle) {
    std::printf(
        "\nevery matmul_blocked tile (%d multiprocessors): GFLOP/s, blocks, blocks a "
        "multiprocessor holds, waves\n",
        multiprocessors());
    std::printf("%-22s %5s %5s %5s  %-8s %9s %7s %7s %7s  %9s\n", "product", "M", "N", "K", "tile",
                "GFLOP/s", "blocks", "per SM", "waves", "err");
    plab::random::Engine rng(19);
    for (std::size_t i = 0; i < count; ++i) {
        const Shape& s = shapes[i];
        if (s.k % 4 != 0 || s.m >= 8192) continue;  // wide loads only; 8192^3 takes too long x3
        const Product p(s, handle, rng);
        tile_row<8, 8>(p, "128x128");
        tile_row<8, 4>(p, "128x64");
        tile_row<4, 4>(p, "64x64");
    }
}

}  // namespace

int run() {
    const Shape shapes[] = {
        {"15M Q/K/V/Wo @128", 128, 288, 288},
        {"15M gate/up @512", 512, 768, 288},
        {"15M Q/K/V/Wo @2048", 2048, 288, 288},
        {"15M gate/up @2048", 2048, 768, 288},
        {"15M down @2048", 2048, 288, 768},
        {"110M Q/K/V/Wo @2048", 2048, 768, 768},
        {"110M gate/up @2048", 2048, 2048, 768},
        {"110M down @2048", 2048, 768, 2048},
        // Q, K and V (gate and up) as one product: would one launch pay?
        {"15M QKV one @2048", 2048, 864, 288},
        {"15M gate|up one @2048", 2048, 1536, 288},
        {"110M QKV one @2048", 2048, 2304, 768},
        {"110M gate|up one @2048", 2048, 4096, 768},
        {"odd k (narrow loads)", 1000, 1000, 1001},
        {"square 4096", 4096, 4096, 4096},
        {"square 8192", 8192, 8192, 8192},
    };
    cublasHandle_t handle;
    CHECK_CUBLAS(cublasCreate(&handle));
    std::printf("%-22s %5s %5s %5s  %-8s %9s %9s %9s  %7s %7s  %9s %9s\n", "product", "M", "N", "K",
                "tile", "tiled", "blocked", "cuBLAS", "tiled", "blocked", "err", "err");
    std::printf("%-22s %5s %5s %5s  %-8s %9s %9s %9s  %7s %7s  %9s %9s\n", "", "", "", "", "",
                "GFLOP/s", "GFLOP/s", "GFLOP/s", "of cuBL", "of cuBL", "tiled", "blocked");
    plab::random::Engine rng(13);
    for (const Shape& s : shapes) {
        const Product p(s, handle, rng);
        const int batch = s.m >= 4096 ? 5 : 50;
        const bool big = s.m >= 8192;  // the 16x16 kernel takes seconds there
        auto cublas = [&] { p.cublas(); };
        auto tiled = [&] { launch_matmul_tiled(p.out, p.x, p.w, s.m, s.n, s.k); };
        auto blocked = [&] { launch_matmul_blocked(p.out, p.x, p.w, s.m, s.n, s.k); };

        const std::vector<float> ref = p.result_of(cublas);
        const double err_blocked = rel_error(p.result_of(blocked), ref);
        double err_tiled = NAN, t_tiled = NAN;
        if (!big) {
            err_tiled = rel_error(p.result_of(tiled), ref);
            t_tiled = median_ms(tiled, batch);
        }
        const double t_cublas = median_ms(cublas, batch);
        const double t_blocked = median_ms(blocked, batch);
        const double gflop = 2.0 * s.m * s.n * s.k / 1e9;
        const MatmulTile tile = matmul_blocked_tile(s.m, s.n);
        char tile_name[16];
        std::snprintf(tile_name, sizeof tile_name, "%dx%d", tile.rows, tile.cols);
        std::printf("%-22s %5d %5d %5d  %-8s %9.0f %9.0f %9.0f  %6.1f%% %6.1f%%  %9.2e %9.2e\n",
                    s.what, s.m, s.n, s.k, tile_name, gflop / t_tiled * 1e3,
                    gflop / t_blocked * 1e3, gflop / t_cublas * 1e3, 100 * t_cublas / t_tiled,
                    100 * t_cublas / t_blocked, err_tiled, err_blocked);
    }
    tiles_by_shape(shapes, std::size(shapes), handle);
    decode_products(handle);
    CHECK_CUBLAS(cublasDestroy(handle));
    return 0;
}

int main() {
    try {
        return run();
    } catch (const std::exception& e) {  // a CUDA error: no device, no driver, ...
        std::fprintf(stderr, "gemm_kernels: %s\n", e.what());
        return 1;
    }
}
