// GpuBackend: the Backend interface on CUDA kernels (native or emulated).
//
// What it teaches: the host side of GPU programming. Buffers are device
// memory (cudaMalloc); small integer arrays (tokens, KV slots, a block table)
// are copied to a reusable device scratch area before the kernel that reads
// them; every CUDA call is checked (PLAB_CUDA_CHECK) and every launch goes
// through PLAB_LAUNCH, which names the kernel in any error. The two variants
// share the elementwise kernels and differ where speed and bits trade off:
//
//   // clang-format off
//   op          gpu-ref (bitwise = cpu-ref)      gpu (within 1e-5 of cpu-ref)
//   matmul      matmul_ref_kernel                matmul_tiled_kernel
//   attention   attention_ref_kernel             attention_flash_kernel
//   rmsnorm     rmsnorm_ref_kernel               rmsnorm_fast_kernel
//   argmax      argmax_ref_kernel                argmax_fast_kernel
//   // clang-format on
//
// Left out: streams and overlap (every op runs on the default stream, so
// stream order alone keeps scratch copies and kernels in sequence), pinned
// host memory, CUDA graphs.
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "gpu_backend.h"
#include "kernels.h"

namespace plab::PLAB_SIMT_NS {
namespace {

// PLAB_GPU_FORM_NAME_FOR_TESTS=native makes the emulated form call itself
// "(native)". Read here and nowhere else: it changes the name only, never
// which kernels run. It exists so that the tests lesson_*.with_native_name
// (tests/lessons/CMakeLists.txt) can rerun the lessons with the name a GPU
// machine prints and prove that no compared output depends on "(emulated)".
bool emulated_named_native_for_tests() {
    const char* v = std::getenv("PLAB_GPU_FORM_NAME_FOR_TESTS");
    return v != nullptr && std::string(v) == "native";
}

class GpuBackend final : public Backend {
public:
    explicit GpuBackend(GpuVariant variant) : variant_(variant) {
        PLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&result_), sizeof(int)));
        PLAB_CUDA_CHECK(
            cudaMalloc(reinterpret_cast<void**>(&tile_counts_), 3 * sizeof(unsigned long long)));
        reset_attention_tile_counts();
    }
    // Destructors and release() are noexcept: a failing cudaFree there cannot be
    // reported, and the next checked call reports a broken device anyway.
    ~GpuBackend() override {
        cudaFree(scratch_);
        cudaFree(mask_scratch_);
        cudaFree(tile_counts_);
        cudaFree(result_);
    }
    GpuBackend(const GpuBackend&) = delete;
    GpuBackend& operator=(const GpuBackend&) = delete;

    std::string name() const override {
        return std::string(variant_ == GpuVariant::reference ? "gpu-ref" : "gpu") +
               (PLAB_SIMT_EMULATED && !emulated_named_native_for_tests() ? " (emulated)"
                                                                         : " (native)");
    }
    bool is_reference() const override { return variant_ == GpuVariant::reference; }

    Buffer alloc(std::size_t n) override {
        float* p = nullptr;
        PLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), std::max<std::size_t>(n, 1) * 4));
        return Buffer{p, n};
    }
    void release(Buffer b) noexcept override { cudaFree(b.data); }
    void upload(Buffer dst, const float* src, std::size_t n) override {
        PLAB_ASSERT(n <= dst.size);
        PLAB_CUDA_CHECK(cudaMemcpy(dst.data, src, n * sizeof(float), cudaMemcpyHostToDevice));
    }
    void download(float* dst, Buffer src, std::size_t n) override {
        PLAB_ASSERT(n <= src.size);
        PLAB_CUDA_CHECK(cudaMemcpy(dst, src.data, n * sizeof(float), cudaMemcpyDeviceToHost));
    }
    void fill(Buffer dst, float value) override {
        const long long n = static_cast<long long>(dst.size);
        PLAB_LAUNCH(fill_kernel, blocks_for(n, kThreadsPerBlock), kThreadsPerBlock, 0, dst.data, n,
                    value);
    }
    void synchronize() override { PLAB_CUDA_CHECK(cudaDeviceSynchronize()); }

    void embed(Buffer out, std::span<const int32_t> tokens, Buffer table, int dim) override {
        PLAB_ASSERT(out.size >= tokens.size() * std::size_t(dim));
        for (int32_t t : tokens) PLAB_ASSERT(t >= 0 && std::size_t(t + 1) * dim <= table.size);
        const int32_t* d_tokens = to_device(tokens);
        const long long n = static_cast<long long>(tokens.size()) * dim;
        PLAB_LAUNCH(embed_kernel, blocks_for(n, kThreadsPerBlock), kThreadsPerBlock, 0, out.data,
                    table.data, d_tokens, static_cast<int>(tokens.size()), dim);
    }

    void rmsnorm(Buffer out, Buffer x, Buffer weight, int rows, int dim, float eps) override {
        PLAB_ASSERT(out.size >= std::size_t(rows) * dim && x.size >= std::size_t(rows) * dim);
        // 128 threads: D is a few hundred at most here; a multiple of 32 for the shuffles.
        if (variant_ == GpuVariant::reference) {
            PLAB_LAUNCH(rmsnorm_ref_kernel, rows, 128, 0, out.data, x.data, weight.data, dim, eps);
        } else {
            PLAB_LAUNCH(rmsnorm_fast_kernel, rows, 128, 0, out.data, x.data, weight.data, dim, eps);
        }
    }

    void matmul(Buffer out, Buffer x, Buffer w, int m, int n, int k) override {
        PLAB_ASSERT(out.size >= std::size_t(m) * n && x.size >= std::size_t(m) * k &&
                    w.size >= std::size_t(n) * k);
        if (variant_ == GpuVariant::reference) {
            const long long outputs = static_cast<long long>(m) * n;
            PLAB_LAUNCH(matmul_ref_kernel, blocks_for(outputs, kThreadsPerBlock), kThreadsPerBlock,
                        0, out.data, x.data, w.data, m, n, k);
        } else {
            const dim3 grid(blocks_for(n, kMatmulTile), blocks_for(m, kMatmulTile));
            PLAB_LAUNCH(matmul_tiled_kernel, grid, dim3(kMatmulTile, kMatmulTile), 0, out.data,
                        x.data, w.data, m, n, k);
        }
    }

    void rope(Buffer x, int rows, int n_heads, int head_dim, int pos0, Buffer cos,
              Buffer sin) override {
        PLAB_ASSERT(std::size_t(pos0 + rows) * (head_dim / 2) <= cos.size);
        const long long n = static_cast<long long>(rows) * n_heads;
        PLAB_LAUNCH(rope_kernel, blocks_for(n, kThreadsPerBlock), kThreadsPerBlock, 0, x.data, rows,
                    n_heads, head_dim, pos0, cos.data, sin.data);
    }

    void kv_append(Buffer k_pool, Buffer v_pool, Buffer k, Buffer v, std::span<const int32_t> slots,
                   int row_size) override {
        for (int32_t slot : slots) {
            PLAB_ASSERT(slot >= 0 && std::size_t(slot + 1) * row_size <= k_pool.size &&
                        std::size_t(slot + 1) * row_size <= v_pool.size);
        }
        const int32_t* d_slots = to_device(slots);
        const long long n = static_cast<long long>(slots.size()) * row_size;
        PLAB_LAUNCH(kv_append_kernel, blocks_for(n, kThreadsPerBlock), kThreadsPerBlock, 0,
                    k_pool.data, v_pool.data, k.data, v.data, d_slots,
                    static_cast<int>(slots.size()), row_size);
    }

    void attention(Buffer out, Buffer q, Buffer k_pool, Buffer v_pool,
                   std::span<const int32_t> block_table, const AttentionShape& s) override {
        check_attention(block_table, s);
        if (s.n_queries == 0) return;
        const int32_t* d_table = to_device(block_table);
        const AttentionShape ds = with_device_mask(s);
        if (variant_ == GpuVariant::reference) {
            PLAB_LAUNCH(attention_ref_kernel, dim3(s.n_queries, s.n_heads), 64, scores_bytes(s),
                        out.data, q.data, k_pool.data, v_pool.data, d_table, ds);
        } else {
            launch_attention_flash(out.data, q.data, k_pool.data, v_pool.data, d_table, ds,
                                   tile_counts_);
        }
    }

    void attention_probs(Buffer probs, Buffer scores, Buffer q, Buffer k_pool,
                         std::span<const int32_t> block_table, const AttentionShape& s,
                         int head) override {
        check_attention(block_table, s);
        const std::size_t cells = std::size_t(s.n_queries) * s.n_keys();
        PLAB_ASSERT(head >= 0 && head < s.n_heads && probs.size >= cells);
        PLAB_ASSERT(scores.data == nullptr || scores.size >= cells);
        if (s.n_queries == 0) return;
        const int32_t* d_table = to_device(block_table);
        const AttentionShape ds = with_device_mask(s);
        PLAB_LAUNCH(attention_probs_kernel, s.n_queries, 64, scores_bytes(s), probs.data,
                    scores.data, q.data, k_pool.data, d_table, ds, head);
    }

    // The flash kernel counts its tiles on the device; reading them waits for it.
    AttentionTileCounts attention_tile_counts() const override {
        if (variant_ == GpuVariant::reference) return {};
        unsigned long long c[3] = {0, 0, 0};
        PLAB_CUDA_CHECK(cudaMemcpy(c, tile_counts_, sizeof c, cudaMemcpyDeviceToHost));
        return {kFlashQueries, kFlashKeys, static_cast<long long>(c[0]),
                static_cast<long long>(c[1]), static_cast<long long>(c[2])};
    }
    void reset_attention_tile_counts() override {
        PLAB_CUDA_CHECK(cudaMemset(tile_counts_, 0, 3 * sizeof(unsigned long long)));
    }

    void swiglu(Buffer out, Buffer gate, Buffer up, std::size_t n) override {
        const long long count = static_cast<long long>(n);
        PLAB_LAUNCH(swiglu_kernel, blocks_for(count, kThreadsPerBlock), kThreadsPerBlock, 0,
                    out.data, gate.data, up.data, count);
    }

    void add(Buffer x, Buffer y, std::size_t n) override {
        const long long count = static_cast<long long>(n);
        PLAB_LAUNCH(add_kernel, blocks_for(count, kThreadsPerBlock), kThreadsPerBlock, 0, x.data,
                    y.data, count);
    }

    int argmax(Buffer x, std::size_t n) override {
        PLAB_ASSERT(n > 0 && n <= x.size);
        const long long count = static_cast<long long>(n);
        if (variant_ == GpuVariant::reference) {
            PLAB_LAUNCH(argmax_ref_kernel, 1, 1, 0, result_, x.data, count);
        } else {
            PLAB_LAUNCH(argmax_fast_kernel, 1, kThreadsPerBlock, 0, result_, x.data, count);
        }
        int best = 0;
        PLAB_CUDA_CHECK(cudaMemcpy(&best, result_, sizeof(int), cudaMemcpyDeviceToHost));
        return best;
    }

private:
    // Copies a small host array into the device scratch area (grown as needed).
    // Safe to reuse across ops: the default stream runs the copy only after
    // the previous kernel that read the scratch has finished.
    const int32_t* to_device(std::span<const int32_t> values) {
        if (values.size() > scratch_capacity_) {
            PLAB_CUDA_CHECK(cudaFree(scratch_));
            scratch_ = nullptr;
            scratch_capacity_ = std::max<std::size_t>(values.size(), 1024);
            PLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&scratch_),
                                       scratch_capacity_ * sizeof(int32_t)));
        }
        PLAB_CUDA_CHECK(cudaMemcpy(scratch_, values.data(), values.size() * sizeof(int32_t),
                                   cudaMemcpyHostToDevice));
        return scratch_;
    }

    // The mask's data words (documents, custom bits, ALiBi slopes) live in host
    // memory; kernels get a copy of the shape whose mask points to a device copy.
    AttentionShape with_device_mask(const AttentionShape& s) {
        AttentionShape ds = s;
        if (s.mask.data_words == 0) return ds;
        const std::size_t n = static_cast<std::size_t>(s.mask.data_words);
        if (n > mask_capacity_) {
            PLAB_CUDA_CHECK(cudaFree(mask_scratch_));
            mask_scratch_ = nullptr;
            mask_capacity_ = std::max<std::size_t>(n, 256);
            PLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&mask_scratch_),
                                       mask_capacity_ * sizeof(uint32_t)));
        }
        PLAB_CUDA_CHECK(
            cudaMemcpy(mask_scratch_, s.mask.data, n * sizeof(uint32_t), cudaMemcpyHostToDevice));
        ds.mask.data = mask_scratch_;
        return ds;
    }

    static void check_attention(std::span<const int32_t> block_table, const AttentionShape& s) {
        PLAB_ASSERT(s.n_queries >= 0 && s.pos0 >= 0 && s.block_size > 0 && s.n_kv_heads > 0 &&
                    s.n_heads % s.n_kv_heads == 0);
        PLAB_ASSERT(std::size_t(s.n_keys() + s.block_size - 1) / s.block_size <=
                    block_table.size());
    }

    // Dynamic shared memory of the reference attention: one score per position.
    static std::size_t scores_bytes(const AttentionShape& s) {
        const std::size_t bytes = sizeof(float) * static_cast<std::size_t>(s.n_keys());
        PLAB_CHECK(bytes <= 48 * 1024,
                   "gpu-ref attention keeps a row of scores in 48 KiB of shared "
                   "memory: at most 12288 positions, got "
                       << s.n_keys());
        return bytes;
    }

    GpuVariant variant_;
    int* result_ = nullptr;                      // argmax result on the device
    unsigned long long* tile_counts_ = nullptr;  // flash attention: skipped, partial, full tiles
    int32_t* scratch_ = nullptr;
    std::size_t scratch_capacity_ = 0;
    uint32_t* mask_scratch_ = nullptr;  // the current mask's data words on the device
    std::size_t mask_capacity_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_gpu_backend(GpuVariant variant) {
    return std::make_unique<GpuBackend>(variant);
}

#if !PLAB_SIMT_EMULATED
NativeProbe probe() {
    NativeProbe p;
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    // The error is sticky for the next cudaGetLastError: clear it, so a later
    // checked call reports its own failure, not this one.
    cudaGetLastError();
    if (err == cudaSuccess && n > 0) {
        p.status = NativeProbe::Status::found;
        p.devices = n;
    } else if (err == cudaSuccess || err == cudaErrorNoDevice) {
        p.status = NativeProbe::Status::no_device;
    } else {
        // Anything else (cudaErrorInsufficientDriver when libcuda is missing or
        // older than this runtime needs) is not "no device": say what it was.
        p.status = NativeProbe::Status::cuda_error;
        p.error = std::string(cudaGetErrorName(err)) + " (" + std::to_string(int(err)) +
                  "): " + cudaGetErrorString(err);
        if (err == cudaErrorInsufficientDriver) {
            p.error += " (libcuda.so is missing, or older than this build's CUDA runtime needs)";
        }
    }
    return p;
}

int device_count() {
    return probe().devices;
}

std::string device_name() {
    if (device_count() == 0) return "";
    cudaDeviceProp prop{};
    PLAB_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    return std::string(prop.name) + " (sm_" + std::to_string(prop.major * 10 + prop.minor) + ")";
}
#endif

}  // namespace plab::PLAB_SIMT_NS
