// BPE merging with a priority queue (tokenizer_hf_bpe.h).
#include "model/tokenizers/tokenizer_hf_bpe.h"

#include <queue>

namespace plab::hf {

bool BpeMergeTable::add(int32_t left, int32_t right, int32_t merged) {
    const bool inserted =
        pairs_.emplace(key(left, right), Entry{static_cast<int32_t>(size_), merged}).second;
    if (inserted) ++size_;
    return inserted;
}

const BpeMergeTable::Entry* BpeMergeTable::find(int32_t a, int32_t b) const {
    auto it = pairs_.find(key(a, b));
    return it == pairs_.end() ? nullptr : &it->second;
}

void BpeMergeTable::apply(std::vector<int32_t>& ids, std::vector<std::size_t>* first) const {
    if (first != nullptr) {
        first->clear();
        for (std::size_t i = 0; i < ids.size(); ++i) first->push_back(i);
    }
    if (ids.size() < 2) return;
    // The piece as a doubly linked list of symbols; a merged-away symbol is dead.
    struct Symbol {
        int32_t id;
        std::ptrdiff_t prev, next;
        bool alive;
    };
    const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(ids.size());
    std::vector<Symbol> sym(ids.size());
    for (std::ptrdiff_t i = 0; i < n; ++i) sym[i] = {ids[i], i - 1, i + 1 < n ? i + 1 : -1, true};
    // (rank, position of the left symbol): the queue pops the lowest rank, then
    // the leftmost position; a popped entry is stale if its pair has changed.
    struct Candidate {
        int32_t rank;
        std::ptrdiff_t pos;
        bool operator>(const Candidate& o) const {
            return rank != o.rank ? rank > o.rank : pos > o.pos;
        }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
    auto push = [&](std::ptrdiff_t left) {
        if (left < 0 || sym[left].next < 0) return;
        if (const Entry* e = find(sym[left].id, sym[sym[left].next].id))
            queue.push({e->rank, left});
    };
    for (std::ptrdiff_t i = 0; i + 1 < n; ++i) push(i);
    while (!queue.empty()) {
        const Candidate top = queue.top();
        queue.pop();
        Symbol& left = sym[top.pos];
        if (!left.alive || left.next < 0) continue;
        Symbol& right = sym[left.next];
        const Entry* e = find(left.id, right.id);
        if (e == nullptr || e->rank != top.rank) continue;  // stale: the pair has changed
        // Merge right into left, unlink right, then queue the two new neighbour pairs.
        left.id = e->merged;
        right.alive = false;
        left.next = right.next;
        if (right.next >= 0) sym[right.next].prev = top.pos;
        push(left.prev);
        push(top.pos);
    }
    // A merged symbol sits at the position of its leftmost part.
    ids.clear();
    if (first != nullptr) first->clear();
    for (std::ptrdiff_t i = 0; i >= 0; i = sym[i].next) {
        ids.push_back(sym[i].id);
        if (first != nullptr) first->push_back(static_cast<std::size_t>(i));
    }
}

}  // namespace plab::hf
