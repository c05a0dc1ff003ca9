#include "backends/cpu_fast.h"

#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <limits>
#include <vector>

#include "core/error.h"

namespace plab {
namespace {

// Row-major maps over our buffers: Eigen's default is column-major.
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapMat = Eigen::Map<RowMat>;
using ConstMapMat = Eigen::Map<const RowMat>;

constexpr int kQueryTile = 32;  // queries per attention tile

}  // namespace

void CpuFastBackend::matmul(Buffer out, Buffer x, Buffer w, int m, int n, int k) {
    PLAB_ASSERT(out.size >= std::size_t(m) * n && x.size >= std::size_t(m) * k &&
                w.size >= std::size_t(n) * k);
    ConstMapMat X(x.data, m, k);
    ConstMapMat W(w.data, n, k);
    MapMat O(out.data, m, n);
    if (m >= 8) {
        O.noalias() = X * W.transpose();
        return;
    }
    // Few rows (decode): memory-bound; split the weight rows between threads.
    const int threads = omp_get_max_threads();
    const int per = (n + threads - 1) / threads;
#pragma omp parallel for schedule(static) if (std::size_t(n) * k > 65536)
    for (int t = 0; t < threads; ++t) {
        const int n0 = t * per, n1 = std::min(n, n0 + per);
        if (n0 >= n1) continue;
        O.middleCols(n0, n1 - n0).noalias() = X * W.middleRows(n0, n1 - n0).transpose();
    }
}

void CpuFastBackend::attention(Buffer out, Buffer q, Buffer k_pool, Buffer v_pool,
                               std::span<const int32_t> block_table, const AttentionShape& s) {
    const int n_keys = s.n_keys(), dh = s.head_dim, row = s.n_kv_heads * dh;
    PLAB_CHECK(s.mask.n_terms == 0 && !s.mask.alibi && s.mask.softcap == 0.0f,
               "the cpu backend's attention obeys only the causal mask so far; use --backend "
               "cpu-ref for other masks and score modifiers");
    PLAB_ASSERT(std::size_t(n_keys + s.block_size - 1) / s.block_size <= block_table.size());
    // 1. Gather K and V of every visible position, per KV head, in logical order.
    //    // (Hkv, n_keys, Dh) each
    std::vector<float> kg(std::size_t(s.n_kv_heads) * n_keys * dh);
    std::vector<float> vg(kg.size());
    for (int j = 0; j < n_keys; ++j) {
        const int slot = kv_slot(block_table.data(), j, s.block_size);
        for (int g = 0; g < s.n_kv_heads; ++g) {
            const float* ks = k_pool.data + std::size_t(slot) * row + std::size_t(g) * dh;
            const float* vs = v_pool.data + std::size_t(slot) * row + std::size_t(g) * dh;
            std::copy(ks, ks + dh, kg.data() + (std::size_t(g) * n_keys + j) * dh);
            std::copy(vs, vs + dh, vg.data() + (std::size_t(g) * n_keys + j) * dh);
        }
    }
    // 2. Per (query head, tile of queries): GEMM, mask, softmax, GEMM.
    const int tiles = (s.n_queries + kQueryTile - 1) / kQueryTile;
    const int work = s.n_heads * tiles;
#pragma omp parallel if (std::size_t(s.n_queries) * n_keys * s.n_heads > 32768)
    {
        RowMat scores, ot;
        std::vector<float> den(kQueryTile);
#pragma omp for schedule(dynamic)
        for (int wi = 0; wi < work; ++wi) {
            const int h = wi / tiles, tile = wi % tiles;
            const int g = kv_head_of(h, s.n_heads, s.n_kv_heads);
            const int i0 = tile * kQueryTile, i1 = std::min(s.n_queries, i0 + kQueryTile);
            const int rows = i1 - i0;
            const int keys = s.pos0 + i1;  // the tile's last query sees keys 0..keys-1
            // Q rows of head h are strided by H·Dh in the (C, H, Dh) buffer.
            Eigen::Map<const RowMat, 0, Eigen::OuterStride<>> Q(
                q.data + (std::size_t(i0) * s.n_heads + h) * dh, rows, dh,
                Eigen::OuterStride<>(s.n_heads * dh));
            ConstMapMat K(kg.data() + std::size_t(g) * n_keys * dh, keys, dh);
            ConstMapMat V(vg.data() + std::size_t(g) * n_keys * dh, keys, dh);
            scores.noalias() = (Q * K.transpose()) * s.scale;
            for (int r = 0; r < rows; ++r) {
                const int visible = s.pos0 + i0 + r + 1;  // causal mask: keys 0..pos
                auto srow = scores.row(r);
                const float m = srow.head(visible).maxCoeff();
                srow.head(visible) = (srow.head(visible).array() - m).exp();
                srow.tail(keys - visible).setZero();
                den[r] = srow.head(visible).sum();
            }
            // Unnormalised e·V, divided once per output (like the reference).
            ot.noalias() = scores * V;
            for (int r = 0; r < rows; ++r) {
                float* o = out.data + (std::size_t(i0 + r) * s.n_heads + h) * dh;
                for (int d = 0; d < dh; ++d) o[d] = ot(r, d) / den[r];
            }
        }
    }
}

void CpuFastBackend::swiglu(Buffer out, Buffer gate, Buffer up, std::size_t n) {
    constexpr std::size_t kPiece = 16384;  // values per task: large enough to beat the fork cost
    const std::ptrdiff_t pieces = static_cast<std::ptrdiff_t>((n + kPiece - 1) / kPiece);
#pragma omp parallel for schedule(static) if (pieces > 1)
    for (std::ptrdiff_t p = 0; p < pieces; ++p) {
        const std::size_t i0 = std::size_t(p) * kPiece, len = std::min(kPiece, n - i0);
        Eigen::Map<const Eigen::ArrayXf> g(gate.data + i0, len), u(up.data + i0, len);
        Eigen::Map<Eigen::ArrayXf> o(out.data + i0, len);
        o = g / (1.0f + (-g).exp()) * u;  // silu(g) * u
    }
}

}  // namespace plab
