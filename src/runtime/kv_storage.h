// KvStorage: where the K/V of every cached position live — on the backend.
//
// What it teaches: attention at position p needs K and V of positions 0..p;
// the cache *keeps* them so that each decode step computes K/V for its one
// new token only. Per layer a K pool and a V pool of fixed-size blocks, each
// // (num_blocks, B, Hkv, Dh) row-major, in the backend's memory. Which block
// a position's slot is in is the bookkeeping's business (runtime/block_manager.h);
// this part only holds the numbers, reads them back and writes them in.
#pragma once

#include <cstddef>
#include <vector>

#include "core/backend.h"
#include "model/config.h"
#include "runtime/block_manager.h"

namespace plab {

// Which half of the cache a read returns: the keys or the values.
enum class KvPart { K, V };

class KvStorage {
public:
    KvStorage(Backend& backend, const ModelConfig& config, int block_size, int num_blocks);
    KvStorage(const KvStorage&) = delete;
    KvStorage& operator=(const KvStorage&) = delete;

    Buffer k_pool(int layer) const { return k_pools_[static_cast<std::size_t>(layer)].buf(); }
    Buffer v_pool(int layer) const { return v_pools_[static_cast<std::size_t>(layer)].buf(); }
    int row_size() const { return row_size_; }  // Hkv · Dh floats per position per layer
    // Bytes of K+V one position occupies across all layers.
    std::size_t bytes_per_token() const;

    // K or V of `seq`'s positions 0..length-1 for one layer, in logical order,
    // downloaded to the host: // (length, Hkv·Dh). For equivalence reports.
    // Positions whose block was freed (free_forgotten) are gone: they read as 0.
    std::vector<float> read(const Sequence& seq, int layer, KvPart part) const;
    // The inverse: uploads `data` (positions 0..n-1 of `seq`, (n, Hkv·Dh)) into
    // its slots — K/V handed over from another engine's pool.
    void write(const Sequence& seq, int layer, KvPart part, const std::vector<float>& data);

private:
    Backend& backend_;
    int n_layers_;
    int block_size_;
    int row_size_;
    std::vector<DeviceArray> k_pools_;
    std::vector<DeviceArray> v_pools_;
};

}  // namespace plab
