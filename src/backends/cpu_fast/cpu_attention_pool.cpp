#include "backends/cpu_fast/cpu_attention_pool.h"

// GCC 12 warns inside its own AVX-512 headers when Eigen's register transpose
// is inlined here ("__Y may be used uninitialized": the intrinsics' undefined
// pass-through operand), and about the vector type's alignment attribute in
// PacketBlock's template argument. Neither is about this code.
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
    const std::ptrdiff_t r = h.key_rows[j];
    return r < 0 ? nullptr : h.pool + r + h.offset;
}

}  // namespace

void key_rows_of(std::ptrdiff_t* key_rows, std::span<const int32_t> block_table, int block_size,
                 int row, int n_keys) {
    for (int b = 0; b * block_size < n_keys; ++b) {
        const int32_t physical = block_table[std::size_t(b)];
        for (int j = b * block_size; j < std::min(n_keys, (b + 1) * block_size); ++j)
            key_rows[j] =
                physical == kFreedBlock
                    ? -1
                    : (std::ptrdiff_t(physical) * block_size + (j - b * block_size)) * row;
    }
}

const float* zero_row(int n) {
    thread_local std::vector<float> zeros;
    if (zeros.size() < std::size_t(n)) zeros.assign(std::size_t(n), 0.0f);
    return zeros.data();
}

namespace {

// The scores of G vectors of keys from j0 (lane jj of vector g: key
// j0 + g·kLanes + jj) into scores[j - k0], the lanes of keys j < k1 only.
template <int G>
void store_scores(float* scores, const Packet* acc, int j0, int k0, int k1) {
    using namespace Eigen::internal;
    alignas(64) float lane[kLanes];
    for (int g = 0; g < G; ++g) {
        const int first = j0 + g * kLanes, n = std::min(kLanes, k1 - first);
        if (n <= 0) break;
        if (n == kLanes) {
            pstoreu(scores + (first - k0), acc[g]);
        } else {
            pstore(lane, acc[g]);
            std::copy(lane, lane + n, scores + (first - k0));
        }
    }
}

// G vectors of keys from j0 (lane jj of vector g: key j0 + g·kLanes + jj),
// each one FMA chain over d: G independent chains side by side, so the FMA
// latency of one hides behind the others.
template <int G>
void score_vectors(float* scores, const float* q, int j0, int k0, int k1, const PoolHead& k,
                   const float* zeros) {
    using namespace Eigen::internal;
    const int dh = k.head_dim;
    const float* rows[G][kLanes];
    for (int g = 0; g < G; ++g) {
        for (int jj = 0; jj < kLanes; ++jj) {
            const int j = j0 + g * kLanes + jj;
            const float* r = j < k1 ? key_at(k, j) : nullptr;
            rows[g][jj] = r != nullptr ? r : zeros;
        }
    }
    Packet acc[G];
    for (int g = 0; g < G; ++g) acc[g] = pset1<Packet>(0.0f);
    int d = 0;
    for (; d + kLanes <= dh; d += kLanes) {
        PacketBlock<Packet, kLanes> block[G];
        for (int g = 0; g < G; ++g) {
            for (int jj = 0; jj < kLanes; ++jj)
                block[g].packet[jj] = ploadu<Packet>(rows[g][jj] + d);
            ptranspose(block[g]);  // now block[g].packet[dd] holds dimension d + dd of each key
        }
        for (int dd = 0; dd < kLanes; ++dd) {
            const Packet qd = pset1<Packet>(q[d + dd]);
            for (int g = 0; g < G; ++g) acc[g] = pmadd(qd, block[g].packet[dd], acc[g]);
        }
    }
    alignas(64) float lane[kLanes];
    for (; d < dh; ++d) {
        const Packet qd = pset1<Packet>(q[d]);
        for (int g = 0; g < G; ++g) {
            for (int jj = 0; jj < kLanes; ++jj) lane[jj] = rows[g][jj][d];
            acc[g] = pmadd(qd, pload<Packet>(lane), acc[g]);
        }
    }
    store_scores<G>(scores, acc, j0, k0, k1);
}

}  // namespace

void scores_from_pool(float* scores, const float* q, int k0, int k1, const PoolHead& k) {
    const float* zeros = zero_row(k.head_dim);  // the row of a freed key or one past k1
    // Vectors of keys, lane jj holding key j0 + jj's chain: the keys' rows
    // (wherever their blocks are) are read kLanes floats at a time and
    // transposed in registers, so each load is contiguous (a strided gather
    // per dimension was 5x slower, a scalar chain per key slower still); the
    // dimensions past the last whole vector lane by lane. Two vectors at a time.
    int j0 = k0;
    for (; j0 + kLanes < k1; j0 += 2 * kLanes) score_vectors<2>(scores, q, j0, k0, k1, k, zeros);
    if (j0 < k1) score_vectors<1>(scores, q, j0, k0, k1, k, zeros);
}

namespace {

// G vectors of keys from j0, each inside one block of the mirror (lane jj:
// key j0 + g·kLanes + jj), each one FMA chain over d from +0: the chain of
// score_vectors, with component d of the keys one contiguous load.
template <int G>
void mirror_vectors(float* scores, const float* q, int j0, int k0, int k1, const MirrorHead& k,
                    const float* zeros) {
    using namespace Eigen::internal;
    const int B = k.mirror->block_size();
    const float* at[G];
    std::size_t stride[G];  // floats from component d to d + 1 of a vector
    for (int g = 0; g < G; ++g) {
        const int j = j0 + g * kLanes;
        const int32_t physical = k.block_table[j / B];
        const bool freed = physical == kFreedBlock;  // its keys read as zeros: one vector
        at[g] = freed ? zeros : k.mirror->block(physical) + std::size_t(k.offset) * B + j % B;
        stride[g] = freed ? 0 : std::size_t(B);
    }
    Packet acc[G];
    for (int g = 0; g < G; ++g) acc[g] = pset1<Packet>(0.0f);
    for (int d = 0; d < k.head_dim; ++d) {
        const Packet qd = pset1<Packet>(q[d]);
        for (int g = 0; g < G; ++g)
            acc[g] = pmadd(qd, ploadu<Packet>(at[g] + std::size_t(d) * stride[g]), acc[g]);
    }
    store_scores<G>(scores, acc, j0, k0, k1);
}

}  // namespace

void scores_from_mirror(float* scores, const float* q, int k0, int k1, const MirrorHead& k) {
    const float* zeros = zero_row(kLanes);
    // Up to four vectors of keys side by side: four independent FMA chains.
    int j0 = k0;
    for (; j0 + 3 * kLanes < k1; j0 += 4 * kLanes)
        mirror_vectors<4>(scores, q, j0, k0, k1, k, zeros);
    const int left = (k1 - j0 + kLanes - 1) / kLanes;
    if (left == 3) mirror_vectors<3>(scores, q, j0, k0, k1, k, zeros);
    if (left == 2) mirror_vectors<2>(scores, q, j0, k0, k1, k, zeros);
    if (left == 1) mirror_vectors<1>(scores, q, j0, k0, k1, k, zeros);
}

namespace {

// V vectors of output dimensions [d0, d0 + V·kLanes), their accumulators in
// registers for the whole pass over the keys (a runtime count kept them in
// memory: a store and a load on every key's chain).
template <int V>
void weighted_vectors(float* out, const float* e, int k0, int k1, const PoolHead& v, int d0) {
    using namespace Eigen::internal;
    Packet acc[V];
    for (int c = 0; c < V; ++c) acc[c] = pset1<Packet>(0.0f);
    const Packet zero = pset1<Packet>(0.0f);
    for (int j = k0; j < k1; ++j) {
        const float* vr = key_at(v, j);
        const Packet p = pset1<Packet>(e[j - k0]);
        for (int c = 0; c < V; ++c)
            acc[c] = pmadd(p, vr != nullptr ? ploadu<Packet>(vr + d0 + c * kLanes) : zero, acc[c]);
    }
    for (int c = 0; c < V; ++c) pstoreu(out + d0 + c * kLanes, acc[c]);
}

}  // namespace

void weighted_values_from_pool(float* out, const float* e, int k0, int k1, const PoolHead& v) {
    const int dh = v.head_dim;
    // Up to eight vectors of dimensions per pass over the keys (8
    // accumulators fit AVX2's 16 registers): one pass reads every cache line
    // of a key's row at once. In passes of four, a 48-dimension head on AVX2
    // (six vectors) took two latency-bound passes over the same scattered
    // rows.
    int d = 0;
    for (; d + 8 * kLanes <= dh; d += 8 * kLanes) weighted_vectors<8>(out, e, k0, k1, v, d);
    // The rest, 0-7 vectors, in one pass of exactly that many.
    using Pass = void (*)(float*, const float*, int, int, const PoolHead&, int);
    static constexpr Pass kPass[8] = {nullptr,
                                      weighted_vectors<1>,
                                      weighted_vectors<2>,
                                      weighted_vectors<3>,
                                      weighted_vectors<4>,
                                      weighted_vectors<5>,
                                      weighted_vectors<6>,
                                      weighted_vectors<7>};
    if (const int rest = (dh - d) / kLanes; rest > 0) kPass[rest](out, e, k0, k1, v, d);
    d += (dh - d) / kLanes * kLanes;
    // The dimensions past the last whole vector: the same chains, one scalar each.
    for (; d < dh; ++d) {
        float acc = 0.0f;
        for (int j = k0; j < k1; ++j) {
            const float* vr = key_at(v, j);
            acc = std::fma(e[j - k0], vr != nullptr ? vr[d] : 0.0f, acc);
        }
        out[d] = acc;
    }
}

}  // namespace plab::cpu_attention
