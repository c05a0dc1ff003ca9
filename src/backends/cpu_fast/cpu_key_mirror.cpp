#include "backends/cpu_fast/cpu_key_mirror.h"

// GCC 12 warns inside its own AVX-512 headers when Eigen's register transpose
// is inlined here (see cpu_attention_pool.cpp); not about this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wignored-attributes"
#include <Eigen/Core>

#include "backends/cpu_fast/cpu_gemm.h"
#include "core/error.h"
#include "core/kv_layout.h"

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

float* KeyMirror::slot_column(std::size_t slot) {
    const std::size_t B = std::size_t(block_size_);
    PLAB_ASSERT((slot + 1) * std::size_t(row_) <= floats_);
    return data_ + (slot / B) * std::size_t(row_) * B + slot % B;
}

void KeyMirror::write_run(const float* rows, std::size_t slot0, std::size_t count) {
    const std::size_t L = std::size_t(kLanes), row = std::size_t(row_);
    for (std::size_t i = 0; i < count;) {
        const std::size_t slot = slot0 + i;
        if (slot % L == 0 && i + L <= count) {
            // A whole vector of slots from a lane-aligned one (a prefill
            // chunk's rows, a pool copied whole): register transposes, whole
            // cache lines written.
            const float* r[kLanes];
            for (std::size_t jj = 0; jj < L; ++jj) r[jj] = rows + (i + jj) * row;
            PLAB_ASSERT((slot + L) * row <= floats_);
            transpose_keys(slot_column(slot), std::size_t(block_size_), r, row_);
            i += L;
        } else {
            float* dst = slot_column(slot);
            for (std::size_t f = 0; f < row; ++f) dst[f * block_size_] = rows[i * row + f];
            ++i;
        }
    }
}

void KeyMirror::write_slots(const float* k, std::span<const int32_t> slots) {
    const std::size_t row = std::size_t(row_);
    for (std::size_t i = 0; i < slots.size();) {
        const std::size_t run = consecutive_run(slots, i);
        if (run == 1 && i + 1 < slots.size()) {
            // A lone slot's features lie on `row` different cache lines,
            // rarely in cache (a decode step writes one slot per sequence):
            // ask for the next slot's lines, for writing, while this one's
            // are written.
            const float* next = slot_column(std::size_t(slots[i + 1]));
            for (std::size_t f = 0; f < row; ++f) __builtin_prefetch(next + f * block_size_, 1);
        }
        write_run(k + i * row, std::size_t(slots[i]), run);
        i += run;
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
    const std::size_t row = std::size_t(row_);
    PLAB_ASSERT(first + n <= floats_);
    const std::size_t slot0 = first / row, slot1 = (first + n - 1) / row + 1;
    write_run(pool + slot0 * row, slot0, slot1 - slot0);
}

}  // namespace plab::cpu_attention
