#include "runtime/prefix_cache.h"

#include <algorithm>

#include "core/error.h"
#include "core/kv_layout.h"

namespace plab {

PrefixCache::PrefixCache(BlockManager& blocks) : blocks_(blocks) {
    const std::size_t n = static_cast<std::size_t>(blocks.num_blocks());
    hash_.assign(n, 0);
    parent_.assign(n, 0);
    tokens_.assign(n * static_cast<std::size_t>(blocks.block_size()), 0);
    by_hash_.reserve(n);  // at most one name a block: never rehashed
    blocks_.on_evict([this](int b) { forget(b); });
}

void PrefixCache::forget(int b) {
    by_hash_.erase(hash_[b]);
}

std::uint64_t PrefixCache::block_hash(std::uint64_t parent, std::span<const int32_t> tokens,
                                      std::uint64_t salt) {
    // splitmix64 finaliser over (salt, parent, each token): every input word
    // changes every output bit. 64 bits make a collision unlikely, and
    // match checks the tokens anyway, so one would cost a miss, never a
    // wrong answer.
    auto mix = [](std::uint64_t z) {
        z += 0x9e3779b97f4a7c15ULL;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    };
    std::uint64_t h = mix(salt ^ 0x70726566696c6cULL);  // "prefill"
    h = mix(h ^ parent);
    for (int32_t t : tokens) h = mix(h ^ static_cast<std::uint32_t>(t));
    return h == 0 ? 1 : h;  // 0 is the first block's parent
}

std::vector<int> PrefixCache::match(std::span<const int32_t> tokens, std::uint64_t salt) const {
    const std::size_t B = static_cast<std::size_t>(blocks_.block_size());
    std::vector<int> found_blocks;
    std::uint64_t parent = 0;
    for (std::size_t lb = 0; (lb + 1) * B <= tokens.size(); ++lb) {
        const auto block_tokens = tokens.subspan(lb * B, B);
        const std::uint64_t h = block_hash(parent, block_tokens, salt);
        const auto found = by_hash_.find(h);
        if (found == by_hash_.end()) break;
        const int b = found->second;
        if (parent_[b] != parent ||
            !std::equal(block_tokens.begin(), block_tokens.end(),
                        tokens_.begin() + std::ptrdiff_t(std::size_t(b) * B)))
            break;  // a collision: same name, other tokens
        found_blocks.push_back(b);
        parent = h;
    }
    return found_blocks;
}

void PrefixCache::share(Sequence& seq, const std::vector<int>& blocks) {
    PLAB_ASSERT(seq.length == 0 && seq.block_table.empty());
    for (int b : blocks) {
        blocks_.reuse(b);
        seq.block_table.push_back(b);
        seq.block_hashes.push_back(hash_[b]);
    }
    seq.length = static_cast<int>(blocks.size()) * blocks_.block_size();
}

void PrefixCache::name_full_blocks(Sequence& seq, std::span<const int32_t> tokens,
                                   std::uint64_t salt) {
    PLAB_ASSERT(static_cast<int>(tokens.size()) >= seq.length);
    const std::size_t B = static_cast<std::size_t>(blocks_.block_size());
    const std::size_t full = static_cast<std::size_t>(seq.length) / B;
    while (seq.block_hashes.size() < full) {
        const std::size_t lb = seq.block_hashes.size();
        const std::uint64_t parent = lb == 0 ? 0 : seq.block_hashes[lb - 1];
        const auto block_tokens = tokens.subspan(lb * B, B);
        const std::uint64_t h = block_hash(parent, block_tokens, salt);
        const int b = seq.block_table[lb];
        PLAB_ASSERT(b != kFreedBlock);
        if (!blocks_.is_cached(b) && by_hash_.find(h) == by_hash_.end()) {
            blocks_.mark_cached(b);
            hash_[b] = h;
            parent_[b] = parent;
            std::copy(block_tokens.begin(), block_tokens.end(),
                      tokens_.begin() + std::ptrdiff_t(std::size_t(b) * B));
            by_hash_.emplace(h, b);
        }
        seq.block_hashes.push_back(h);
    }
}

}  // namespace plab
