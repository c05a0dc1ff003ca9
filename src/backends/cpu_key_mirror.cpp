#include "backends/cpu_key_mirror.h"

// GCC 12 warns inside its own AVX-512 headers when Eigen's register transpose
// is inlined here (see cpu_attention_pool.cpp); not about this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wignored-attributes"
#include <Eigen/Core>

#include "backends/cpu_gemm.h"
#include "core/error.h"

namespace plab::cpu_attention {
namespace {

using Packet = Eigen::internal::packet_traits<float>::type;
constexpr int kLanes = Eigen::internal::packet_traits<float>::size;

}  // namespace

void transpose_keys(float* dst, std::size_t dst_stride, const float* const* rows, int n) {
    using namespace Eigen::internal;
    int d = 0;
    for (; d + kLanes <= n; d += kLanes) {
        PacketBlock<Packet, kLanes> block;
        for (int jj = 0; jj < kLanes; ++jj) block.packet[jj] = ploadu<Packet>(rows[jj] + d);
        ptranspose(block);
        for (int dd = 0; dd < kLanes; ++dd)
            pstoreu(dst + std::size_t(d + dd) * dst_stride, block.packet[dd]);
    }
    for (; d < n; ++d)
        for (int jj = 0; jj < kLanes; ++jj) dst[std::size_t(d) * dst_stride + jj] = rows[jj][d];
}

bool KeyMirror::fits(int block_size) {
    return block_size > 0 && block_size % cpu_gemm::lanes() == 0;
}

KeyMirror::KeyMirror(const float* pool, float* storage, std::size_t floats, int block_size, int row)
    : block_size_(block_size), row_(row), data_(storage), floats_(floats) {
    PLAB_ASSERT(fits(block_size) && row > 0 && floats % (std::size_t(block_size) * row) == 0);
    copy_from_pool(pool, 0, floats);
}

void KeyMirror::write_slots(const float* k, std::span<const int32_t> slots) {
    const std::size_t B = std::size_t(block_size_), row = std::size_t(row_);
    const auto dst_of = [&](std::size_t i) {
        const std::size_t slot = std::size_t(slots[i]);
        return data_ + (slot / B) * row * B + slot % B;
    };
    for (std::size_t i = 0; i < slots.size(); ++i) {
        PLAB_ASSERT((std::size_t(slots[i]) + 1) * row <= floats_);
        // A whole vector of consecutive slots from a lane-aligned one (a
        // prefill chunk's rows): in register transposes, whole lines.
        const std::size_t L = std::size_t(kLanes);
        bool run = slots[i] % kLanes == 0 && i + L <= slots.size();
        for (std::size_t jj = 1; run && jj < L; ++jj) run = slots[i + jj] == slots[i] + int(jj);
        if (run) {
            const float* rows[kLanes];
            for (int jj = 0; jj < kLanes; ++jj) rows[jj] = k + (i + std::size_t(jj)) * row;
            PLAB_ASSERT((std::size_t(slots[i]) + L) * row <= floats_);
            transpose_keys(dst_of(i), B, rows, row_);
            i += L - 1;
            continue;
        }
        // A slot's features lie on `row` different cache lines, rarely in
        // cache (a decode step writes one slot per sequence): ask for the
        // next slot's lines, for writing, while this one's are written.
        if (i + 1 < slots.size()) {
            const float* next = dst_of(i + 1);
            for (std::size_t f = 0; f < row; ++f) __builtin_prefetch(next + f * B, 1);
        }
        float* dst = dst_of(i);
        const float* src = k + i * row;
        for (std::size_t f = 0; f < row; ++f) dst[f * B] = src[f];
    }
}

void KeyMirror::copy_keys(float* dst, std::size_t dst_stride, int b, int s0, int offset,
                          int n) const {
    using namespace Eigen::internal;
    const float* src = block(b) + std::size_t(offset) * block_size_ + s0;
    for (int d = 0; d < n; ++d)
        pstoreu(dst + std::size_t(d) * dst_stride,
                ploadu<Packet>(src + std::size_t(d) * block_size_));
}

void KeyMirror::copy_from_pool(const float* pool, std::size_t first, std::size_t n) {
    if (n == 0) return;
    const std::size_t B = std::size_t(block_size_), row = std::size_t(row_);
    PLAB_ASSERT(first + n <= floats_);
    for (std::size_t slot = first / row; slot <= (first + n - 1) / row; ++slot) {
        float* dst = data_ + (slot / B) * row * B + slot % B;
        const float* src = pool + slot * row;
        for (std::size_t f = 0; f < row; ++f) dst[f * B] = src[f];
    }
}

}  // namespace plab::cpu_attention
