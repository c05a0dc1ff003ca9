#include "backends/cpu_attention_pool.h"

// GCC 12 warns inside its own AVX-512 headers when Eigen's register transpose
// and gathers are inlined here ("__Y may be used uninitialized": the
// intrinsics' undefined pass-through operand), and about the vector type's
// alignment attribute in PacketBlock's template argument. Neither is about
// this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wignored-attributes"
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/kv_layout.h"

namespace plab::cpu_attention {
namespace {

using Packet = Eigen::internal::packet_traits<float>::type;
constexpr int kLanes = Eigen::internal::packet_traits<float>::size;

// Where key j of this head starts in the pool, or nullptr for a freed block.
const float* key_at(const PoolHead& h, int j) {
    if (kv_block_freed(h.block_table.data(), j, h.block_size)) return nullptr;
    return h.pool + std::size_t(kv_slot(h.block_table.data(), j, h.block_size)) * h.row + h.offset;
}

}  // namespace

void prefetch_keys_and_values(const float* k_pool, const float* v_pool,
                              std::span<const int32_t> block_table, int block_size, int row,
                              int n_keys) {
    constexpr int kLine = 64 / sizeof(float);  // floats per cache line
    for (const float* pool : {k_pool, v_pool}) {
        for (int j = 0; j < n_keys; ++j) {
            if (kv_block_freed(block_table.data(), j, block_size)) continue;
            const float* r = pool + std::size_t(kv_slot(block_table.data(), j, block_size)) * row;
            for (int f = 0; f < row; f += kLine) __builtin_prefetch(r + f);
        }
    }
}

int key_run() {
    return kLanes;
}

void transpose_keys(float* dst, std::size_t dst_stride, const float* const* rows, int head_dim) {
    using namespace Eigen::internal;
    int d = 0;
    for (; d + kLanes <= head_dim; d += kLanes) {
        PacketBlock<Packet, kLanes> block;
        for (int jj = 0; jj < kLanes; ++jj) block.packet[jj] = ploadu<Packet>(rows[jj] + d);
        ptranspose(block);
        for (int dd = 0; dd < kLanes; ++dd)
            pstoreu(dst + std::size_t(d + dd) * dst_stride, block.packet[dd]);
    }
    for (; d < head_dim; ++d)
        for (int jj = 0; jj < kLanes; ++jj) dst[std::size_t(d) * dst_stride + jj] = rows[jj][d];
}

void scores_from_pool(float* scores, const float* q, int k0, int k1, const PoolHead& k) {
    using namespace Eigen::internal;
    const int dh = k.head_dim;
    thread_local std::vector<float> zeros;  // the row of a freed key or one past k1
    if (zeros.size() < std::size_t(dh)) zeros.assign(std::size_t(dh), 0.0f);
    // A vector of keys at a time, lane jj holding key j0 + jj's chain: the
    // keys' rows (wherever their blocks are) are read kLanes floats at a time
    // and transposed in registers, so each load is contiguous (a strided
    // gather per dimension was 5x slower, and a scalar chain per key slower
    // still); the dimensions past the last whole vector lane by lane.
    for (int j0 = k0; j0 < k1; j0 += kLanes) {
        const float* rows[kLanes];
        for (int jj = 0; jj < kLanes; ++jj) {
            const float* r = j0 + jj < k1 ? key_at(k, j0 + jj) : nullptr;
            rows[jj] = r != nullptr ? r : zeros.data();
        }
        Packet acc = pset1<Packet>(0.0f);
        int d = 0;
        for (; d + kLanes <= dh; d += kLanes) {
            PacketBlock<Packet, kLanes> block;
            for (int jj = 0; jj < kLanes; ++jj) block.packet[jj] = ploadu<Packet>(rows[jj] + d);
            ptranspose(block);  // now block.packet[dd] holds dimension d + dd of each key
            for (int dd = 0; dd < kLanes; ++dd)
                acc = pmadd(pset1<Packet>(q[d + dd]), block.packet[dd], acc);
        }
        alignas(64) float lane[kLanes];
        for (; d < dh; ++d) {
            for (int jj = 0; jj < kLanes; ++jj) lane[jj] = rows[jj][d];
            acc = pmadd(pset1<Packet>(q[d]), pload<Packet>(lane), acc);
        }
        const int n = std::min(kLanes, k1 - j0);
        if (n == kLanes) {
            pstoreu(scores + (j0 - k0), acc);
        } else {
            pstore(lane, acc);
            std::copy(lane, lane + n, scores + (j0 - k0));
        }
    }
}

void weighted_values_from_pool(float* out, const float* e, int k0, int k1, const PoolHead& v) {
    using namespace Eigen::internal;
    const int dh = v.head_dim;
    constexpr int kMaxVectors = 16;  // Dh up to 256 with AVX-512, 128 with AVX2
    const int vectors = dh / kLanes;
    if (vectors > kMaxVectors) {  // a head wider than any model here: scalar chains
        for (int d = 0; d < dh; ++d) {
            float acc = 0.0f;
            for (int j = k0; j < k1; ++j) {
                const float* vr = key_at(v, j);
                acc = std::fma(e[j - k0], vr != nullptr ? vr[d] : 0.0f, acc);
            }
            out[d] = acc;
        }
        return;
    }
    Packet acc[kMaxVectors];
    for (int c = 0; c < vectors; ++c) acc[c] = pset1<Packet>(0.0f);
    float tail[kLanes] = {};
    const int tail_from = vectors * kLanes;
    const Packet zero = pset1<Packet>(0.0f);
    for (int j = k0; j < k1; ++j) {
        const float* vr = key_at(v, j);
        const float ej = e[j - k0];
        const Packet p = pset1<Packet>(ej);
        for (int c = 0; c < vectors; ++c)
            acc[c] = pmadd(p, vr != nullptr ? ploadu<Packet>(vr + c * kLanes) : zero, acc[c]);
        for (int d = tail_from; d < dh; ++d)
            tail[d - tail_from] = std::fma(ej, vr != nullptr ? vr[d] : 0.0f, tail[d - tail_from]);
    }
    for (int c = 0; c < vectors; ++c) pstoreu(out + c * kLanes, acc[c]);
    std::copy(tail, tail + (dh - tail_from), out + tail_from);
}

}  // namespace plab::cpu_attention
