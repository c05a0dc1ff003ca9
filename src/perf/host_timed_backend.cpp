#include "perf/host_timed_backend.h"

#include <type_traits>
#include <utility>

namespace plab {

template <class F>
auto HostTimedBackend::timed(const char* name, const F& f) {
    if (!on_) return f();
    const Clock::time_point t0 = Clock::now();
    if (ops_.empty()) first_ = t0;
    const auto record = [&] {
        const Clock::time_point t1 = Clock::now();
        ops_.push_back({name, std::chrono::duration<double, std::milli>(t0 - first_).count(),
                        std::chrono::duration<double, std::milli>(t1 - t0).count()});
    };
    if constexpr (std::is_void_v<decltype(f())>) {
        f();
        record();
    } else {
        auto result = f();
        record();
        return result;
    }
}

std::vector<DeviceOpTime> HostTimedBackend::take_device_op_times() {
    return std::exchange(ops_, {});
}

void HostTimedBackend::upload(Buffer dst, const float* src, std::size_t n) {
    timed("upload", [&] { inner_.upload(dst, src, n); });
}
void HostTimedBackend::download(float* dst, Buffer src, std::size_t n) {
    timed("download", [&] { inner_.download(dst, src, n); });
}
void HostTimedBackend::fill(Buffer dst, float value) {
    timed("fill", [&] { inner_.fill(dst, value); });
}
void HostTimedBackend::embed(Buffer out, std::span<const int32_t> tokens, Buffer table, int dim) {
    timed("embed", [&] { inner_.embed(out, tokens, table, dim); });
}
void HostTimedBackend::rmsnorm(Buffer out, Buffer x, Buffer weight, int rows, int dim, float eps) {
    timed("rmsnorm", [&] { inner_.rmsnorm(out, x, weight, rows, dim, eps); });
}
void HostTimedBackend::matmul(Buffer out, Buffer x, Buffer w, int m, int n, int k) {
    timed("matmul", [&] { inner_.matmul(out, x, w, m, n, k); });
}
void HostTimedBackend::matmul_parts(Buffer x, int m, int k, std::span<const MatmulPart> parts) {
    timed("matmul_parts", [&] { inner_.matmul_parts(x, m, k, parts); });
}
void HostTimedBackend::rope(Buffer x, int rows, int n_heads, int head_dim, int pos0, Buffer cos,
                            Buffer sin) {
    timed("rope", [&] { inner_.rope(x, rows, n_heads, head_dim, pos0, cos, sin); });
}
void HostTimedBackend::rope_rows(Buffer x, int rows, int n_heads, int head_dim,
                                 std::span<const int32_t> positions, Buffer cos, Buffer sin) {
    timed("rope_rows", [&] { inner_.rope_rows(x, rows, n_heads, head_dim, positions, cos, sin); });
}
void HostTimedBackend::kv_append(Buffer k_pool, Buffer v_pool, Buffer k, Buffer v,
                                 std::span<const int32_t> slots, int row_size) {
    timed("kv_append", [&] { inner_.kv_append(k_pool, v_pool, k, v, slots, row_size); });
}
void HostTimedBackend::attention(Buffer out, Buffer q, Buffer k_pool, Buffer v_pool,
                                 std::span<const int32_t> block_table,
                                 const AttentionShape& shape) {
    timed("attention", [&] { inner_.attention(out, q, k_pool, v_pool, block_table, shape); });
}
void HostTimedBackend::attention_batch(Buffer k_pool, Buffer v_pool,
                                       std::span<const AttentionCall> calls) {
    timed("attention_batch", [&] { inner_.attention_batch(k_pool, v_pool, calls); });
}
void HostTimedBackend::attention_probs(Buffer probs, Buffer scores, Buffer q, Buffer k_pool,
                                       std::span<const int32_t> block_table,
                                       const AttentionShape& shape, int head) {
    timed("attention_probs",
          [&] { inner_.attention_probs(probs, scores, q, k_pool, block_table, shape, head); });
}
void HostTimedBackend::swiglu(Buffer out, Buffer gate, Buffer up, std::size_t n) {
    timed("swiglu", [&] { inner_.swiglu(out, gate, up, n); });
}
void HostTimedBackend::add(Buffer x, Buffer y, std::size_t n) {
    timed("add", [&] { inner_.add(x, y, n); });
}
void HostTimedBackend::add_rmsnorm(Buffer x, Buffer y, Buffer out, Buffer weight, int rows, int dim,
                                   float eps) {
    timed("add_rmsnorm", [&] { inner_.add_rmsnorm(x, y, out, weight, rows, dim, eps); });
}
int HostTimedBackend::argmax(Buffer x, std::size_t n) {
    return timed("argmax", [&] { return inner_.argmax(x, n); });
}
void HostTimedBackend::argmax_rows(Buffer x, int rows, std::size_t n, std::span<int32_t> out) {
    timed("argmax_rows", [&] { inner_.argmax_rows(x, rows, n, out); });
}

}  // namespace plab
