// BPE merging by rank, as Hugging Face's `tokenizers` does it (models/bpe/word.rs).
//
// What it teaches: a merge list is an ordered list of pairs; the rank of a
// pair is its index. Inside one piece, the adjacent pair of lowest rank is
// merged first, the leftmost one when a pair occurs twice, until no adjacent
// pair is in the list. A priority queue of (rank, position) finds that pair in
// O(n log n) instead of rescanning the piece after every merge (the plain
// rescanning loop is what tests/reference/hf_tokenizer_reference.py does).
// For SentencePiece-converted files (Llama 2) the ranks follow the pieces'
// scores, so "lowest rank" is SentencePiece's "highest score".
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace plab::hf {

class BpeMergeTable {
public:
    // Adds the next merge (rank = merges added so far); false if (left, right)
    // is already there (a file that lists a pair twice is ambiguous).
    bool add(int32_t left, int32_t right, int32_t merged);
    std::size_t size() const { return size_; }
    // Merges the ids of one piece in place. `first`, when given, receives for
    // each resulting token the index of the first symbol of `ids` it was merged
    // from (where the token starts in the piece: tokenizer.h's spans).
    void apply(std::vector<int32_t>& ids, std::vector<std::size_t>* first = nullptr) const;

private:
    struct Entry {
        int32_t rank, merged;
    };
    static std::uint64_t key(int32_t a, int32_t b) {
        return (std::uint64_t(std::uint32_t(a)) << 32) | std::uint32_t(b);
    }
    const Entry* find(int32_t a, int32_t b) const;
    std::unordered_map<std::uint64_t, Entry> pairs_;
    std::size_t size_ = 0;
};

}  // namespace plab::hf
