// PrefixCache: names for full KV blocks, so a prompt that starts like an
// earlier one takes its blocks instead of computing them again (vLLM's
// automatic prefix caching, SGLang's RadixAttention in block form).
//
// What it teaches: a full block is named by a hash chain — the hash of its
// parent block's name, its own B token ids and the model's identity (a salt)
// — so equal names mean an equal prefix of tokens, not just an equal block.
// A hit is checked against the block's stored tokens and parent, so a hash
// collision costs a miss, never a wrong answer. Only full blocks are shared: a
// partly filled block would take the next positions' K/V. Host only, like the
// bookkeeping it marks (runtime/block_manager.h): a named block, freed, waits
// on the LRU queue there; evicted, its name is forgotten here.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "runtime/block_manager.h"

namespace plab {

class PrefixCache {
public:
    explicit PrefixCache(BlockManager& blocks);
    PrefixCache(const PrefixCache&) = delete;
    PrefixCache& operator=(const PrefixCache&) = delete;

    // The name of a full block: the parent block's name (0 for the first
    // block), the block's B token ids and the model's identity, mixed.
    static std::uint64_t block_hash(std::uint64_t parent, std::span<const int32_t> tokens,
                                    std::uint64_t salt);
    // The physical blocks holding the longest cached prefix of `tokens`, in
    // full blocks. Takes no reference: share does.
    std::vector<int> match(std::span<const int32_t> tokens, std::uint64_t salt) const;
    // Starts an empty `seq` on `blocks` (from match): one more reference each
    // (a cached free block leaves the queue), length = blocks·B.
    void share(Sequence& seq, const std::vector<int>& blocks);
    // Names the full blocks of `seq` not named yet; `tokens` are its token
    // ids, at least seq.length of them. A block whose name another block
    // already has (two requests computed the same prefix at once) stays
    // unnamed: one copy is cached, the other freed plainly.
    void name_full_blocks(Sequence& seq, std::span<const int32_t> tokens, std::uint64_t salt);

private:
    void forget(int block);  // the bookkeeping evicted it

    BlockManager& blocks_;
    // A named block's name, parent name and token ids (to check a hit), and name -> block.
    std::vector<std::uint64_t> hash_, parent_;
    // Each named block's B token ids, block b at b·B (one array: naming a
    // block allocates nothing, and a simulated run names millions).
    std::vector<int32_t> tokens_;
    std::unordered_map<std::uint64_t, int> by_hash_;
};

}  // namespace plab
