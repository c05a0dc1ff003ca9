// SHA-256 (FIPS 180-4), for digests anyone can recompute with sha256sum or
// Python's hashlib: `plab generate --logits-digest` prints one per request, a
// fingerprint of every logits row it sampled from, so "same request, same
// bits" can be checked across runs, batch-mates, chunkings and machines
// without shipping the rows themselves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace plab {

class Sha256 {
public:
    Sha256();
    void update(const void* data, std::size_t bytes);
    std::string hex();  // the digest in lowercase hex; call once, last

private:
    void block(const std::uint8_t* p);
    std::uint32_t h_[8];
    std::uint8_t buf_[64];
    std::size_t used_ = 0;
    std::uint64_t total_ = 0;
};

std::string sha256_hex(const void* data, std::size_t bytes);

}  // namespace plab
