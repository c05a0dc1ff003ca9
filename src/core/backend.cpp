#include "core/backend.h"

#include <utility>

#include "core/error.h"
#include "core/kv_layout.h"

namespace plab {

void Backend::matmul_parts(Buffer x, int m, int k, std::span<const MatmulPart> parts) {
    for (const MatmulPart& p : parts) matmul(p.out, x, p.w, m, p.n, k);
}

void Backend::attention_batch(Buffer k_pool, Buffer v_pool, std::span<const AttentionCall> calls) {
    for (const AttentionCall& c : calls)
        attention(c.out, c.q, k_pool, v_pool, c.block_table, c.shape);
}

void Backend::add_rmsnorm(Buffer x, Buffer y, Buffer out, Buffer weight, int rows, int dim,
                          float eps) {
    add(x, y, std::size_t(rows) * dim);
    rmsnorm(out, x, weight, rows, dim, eps);
}

void Backend::rope_rows(Buffer x, int rows, int n_heads, int head_dim,
                        std::span<const int32_t> positions, Buffer cos, Buffer sin) {
    PLAB_ASSERT(rows >= 0 && positions.size() >= std::size_t(rows));
    const std::size_t row = std::size_t(n_heads) * head_dim;
    const std::span<const int32_t> used = positions.first(std::size_t(rows));
    for (std::size_t i = 0; i < used.size();) {
        const std::size_t run = consecutive_run(used, i);
        rope(x.slice(i * row, run * row), static_cast<int>(run), n_heads, head_dim, used[i], cos,
             sin);
        i += run;
    }
}

void Backend::rope_kv_append(const RopeKvAppend& a) {
    rope_rows(a.q, a.rows, a.n_heads, a.head_dim, a.positions, a.cos, a.sin);
    rope_rows(a.k, a.rows, a.n_kv_heads, a.head_dim, a.positions, a.cos, a.sin);
    kv_append(a.k_pool, a.v_pool, a.k, a.v, a.slots, a.n_kv_heads * a.head_dim);
}

void Backend::matmul_swiglu(Buffer out, Buffer up, Buffer x, Buffer w_gate, Buffer w_up, int m,
                            int f, int k) {
    const MatmulPart gate_up[] = {{out, w_gate, f}, {up, w_up, f}};
    matmul_parts(x, m, k, gate_up);
    swiglu(out, out, up, std::size_t(m) * f);
}

void Backend::argmax_rows(Buffer x, int rows, std::size_t n, std::span<int32_t> out) {
    PLAB_ASSERT(rows >= 0 && out.size() >= std::size_t(rows));
    for (int r = 0; r < rows; ++r) out[std::size_t(r)] = argmax(x.slice(std::size_t(r) * n, n), n);
}

DeviceArray::DeviceArray(Backend& backend, std::size_t n) : backend_(&backend) {
    buf_ = backend.alloc(n);
}

DeviceArray::~DeviceArray() {
    if (backend_ != nullptr) backend_->release(buf_);
}

DeviceArray::DeviceArray(DeviceArray&& other) noexcept
    : backend_(std::exchange(other.backend_, nullptr)), buf_(std::exchange(other.buf_, {})) {}

DeviceArray& DeviceArray::operator=(DeviceArray&& other) noexcept {
    if (this != &other) {
        if (backend_ != nullptr) backend_->release(buf_);
        backend_ = std::exchange(other.backend_, nullptr);
        buf_ = std::exchange(other.buf_, {});
    }
    return *this;
}

}  // namespace plab
