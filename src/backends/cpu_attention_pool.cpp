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

#include "core/kv_layout.h"

namespace plab::cpu_attention {
namespace {

using Packet = Eigen::internal::packet_traits<float>::type;
constexpr int kLanes = Eigen::internal::packet_traits<float>::size;

// Lane i of the result = base[i * stride]: one key per lane, the keys of one
// block being `stride` floats apart. (The masked gathers with an explicit
// source: GCC 12 warns that the unmasked intrinsics read an undefined one.)
struct StridedLoad {
#if defined(__AVX512F__)
    explicit StridedLoad(int stride)
        : index(_mm512_mullo_epi32(
              _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
              _mm512_set1_epi32(stride))) {}
    Packet operator()(const float* base) const {
        return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), __mmask16(0xFFFF), index, base, 4);
    }
    __m512i index;
#elif defined(__AVX2__)
    explicit StridedLoad(int stride)
        : index(_mm256_mullo_epi32(_mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0),
                                   _mm256_set1_epi32(stride))) {}
    Packet operator()(const float* base) const {
        return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), base, index,
                                        _mm256_castsi256_ps(_mm256_set1_epi32(-1)), 4);
    }
    __m256i index;
#else
    explicit StridedLoad(int s) : stride(s) {}
    Packet operator()(const float* base) const {
        return Eigen::internal::pgather<float, Packet>(base, stride);
    }
    int stride;
#endif
};

// Where key j of this head starts in the pool, or nullptr for a freed block.
const float* key_at(const PoolHead& h, int j) {
    if (kv_block_freed(h.block_table.data(), j, h.block_size)) return nullptr;
    return h.pool + std::size_t(kv_slot(h.block_table.data(), j, h.block_size)) * h.row + h.offset;
}

// Keys j0..j0+kLanes-1 sit in consecutive slots of one block: one strided load
// per dimension reads them all.
bool one_block(const PoolHead& h, int j0) {
    const int b = j0 / h.block_size;
    return (j0 + kLanes - 1) / h.block_size == b && h.block_table[std::size_t(b)] != kFreedBlock;
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

void scores_from_pool(float* scores, const float* q, int k0, int k1, const PoolHead& k) {
    using namespace Eigen::internal;
    const int dh = k.head_dim;
    const StridedLoad load(k.row);
    for (int j0 = k0; j0 < k1; j0 += kLanes) {
        if (j0 + kLanes <= k1 && one_block(k, j0)) {
            // A whole vector of keys in one block: lane jj holds key j0 + jj's
            // chain. Rows are read kLanes floats at a time and transposed in
            // registers (a strided load per dimension was 5x slower here),
            // the dimensions past the last whole vector by strided loads.
            const float* base = key_at(k, j0);
            Packet acc = pset1<Packet>(0.0f);
            int d = 0;
            for (; d + kLanes <= dh; d += kLanes) {
                PacketBlock<Packet, kLanes> block;
                for (int jj = 0; jj < kLanes; ++jj)
                    block.packet[jj] = ploadu<Packet>(base + std::size_t(jj) * k.row + d);
                ptranspose(block);  // now block.packet[dd] holds dimension d + dd of each key
                for (int dd = 0; dd < kLanes; ++dd)
                    acc = pmadd(pset1<Packet>(q[d + dd]), block.packet[dd], acc);
            }
            for (; d < dh; ++d) acc = pmadd(pset1<Packet>(q[d]), load(base + d), acc);
            pstoreu(scores + (j0 - k0), acc);
            continue;
        }
        // Key by key (a block edge inside the vector, a freed block, the
        // tail): the same chain in scalar fused multiply-adds.
        for (int j = j0; j < std::min(j0 + kLanes, k1); ++j) {
            const float* kr = key_at(k, j);
            float acc = 0.0f;
            for (int d = 0; d < dh; ++d) acc = std::fma(q[d], kr != nullptr ? kr[d] : 0.0f, acc);
            scores[j - k0] = acc;
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
