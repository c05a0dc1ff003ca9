// A copy of one layer's K pool, transposed block by block, that the fast CPU
// backend keeps beside the pool (Backend::prepare_kv_pool) for decode
// attention.
//
// What it teaches: the layout a kernel reads decides how much work it does
// besides its arithmetic. The pool stores a position's K as one row
// ((blocks, B, Hkv, Dh), core/kv_layout.h), which is what appending a token
// wants. A decode query's scores want the other way round: for each
// dimension d, component d of 16 consecutive keys in one vector register, so
// that each score is one FMA chain over d in its own lane (the chain the
// prefill GEMM runs: same bits). Read from rows, every 16 keys x 16
// dimensions cost a register transpose, 64 shuffles: about half of a batched
// decode step's attention. vLLM's paged-attention cache lays K out as
// [blocks, heads, Dh/x, B, x] for the same reason. Here the pool keeps its
// layout (every backend, the viewer and the tests read it) and the cpu
// backend keeps this second copy, written with every append:
//
//   mirror[(block * row + f) * B + s] = pool[(block * B + s) * row + f]
//
// for feature f = g·Dh + d of KV head g and slot s of the block. The 16 keys
// of a run that starts on a multiple of 16 (in a block of B, a multiple of
// 16) and one feature are then 16 consecutive floats. It costs a second copy
// of K (half the cache again) and a strided write per appended row.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace plab::cpu_attention {

// dst[d * dst_stride + jj] = rows[jj][d] for cpu_gemm::lanes() rows (one vector
// register's lanes) and d < n, in register transposes: the prefill path's
// gather of Kᵀ, and a whole vector of slots written to a mirror at once.
void transpose_keys(float* dst, std::size_t dst_stride, const float* const* rows, int n);

class KeyMirror {
public:
    // Whether blocks of this many positions hold whole vectors of keys (a
    // multiple of the vector width): otherwise no mirror is kept.
    static bool fits(int block_size);

    // The mirror of a pool of `floats` floats in blocks of block_size
    // positions of `row` floats each, copied from its present contents into
    // `storage` (as many floats as the pool; the backend owns that memory).
    KeyMirror(const float* pool, float* storage, std::size_t floats, int block_size, int row);

    // Rows i of k (row floats each) went to slots[i] of the pool.
    void write_slots(const float* k, std::span<const int32_t> slots);
    // Pool floats [first, first + n) changed (an upload, a fill): their
    // slots are copied again from the pool.
    void copy_from_pool(const float* pool, std::size_t first, std::size_t n);

    // dst[d * dst_stride + jj] = feature offset + d of slot s0 + jj of
    // physical block b, for jj < cpu_gemm::lanes() and d < n (s0 a multiple
    // of lanes()): what transpose_keys makes from rows, as plain copies.
    void copy_keys(float* dst, std::size_t dst_stride, int b, int s0, int offset, int n) const;

    int block_size() const { return block_size_; }
    int row() const { return row_; }
    std::size_t floats() const { return floats_; }
    float* storage() const { return data_; }
    // Physical block b, feature-major: feature f of slot s at [f * B + s].
    const float* block(int b) const {
        return data_ + std::size_t(b) * std::size_t(row_) * std::size_t(block_size_);
    }

private:
    // Where feature 0 of this slot lives (feature f at [f * B]).
    float* slot_column(std::size_t slot);
    // Rows i of `rows` (row floats each) into slots slot0 + i, i < count.
    void write_run(const float* rows, std::size_t slot0, std::size_t count);

    int block_size_ = 0, row_ = 0;
    float* data_ = nullptr;
    std::size_t floats_ = 0;
};

}  // namespace plab::cpu_attention
