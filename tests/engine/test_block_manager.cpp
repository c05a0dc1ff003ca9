// The KV cache's bookkeeping alone, host only (runtime/block_manager.h): blocks
// taken as positions need them, reference counts, never-used blocks before
// evicting cached ones, least recently freed first, a window's old blocks
// given back, and a full pool refused in one line.
#include <catch2/catch.hpp>
#include <vector>

#include "core/error.h"
#include "core/kv_layout.h"
#include "runtime/block_manager.h"
#include "runtime/mask_grammar.h"

namespace plab {

TEST_CASE("block manager: a block is taken only when the last one is full", "[block_manager]") {
    BlockManager pool(4, 8);
    Sequence seq;
    CHECK(pool.new_blocks_for(seq, 3) == 1);
    std::vector<int32_t> slots = pool.reserve(seq, 3);  // positions 0..2: one block
    seq.length = 3;
    CHECK(seq.block_table.size() == 1);
    CHECK(slots.size() == 3);
    CHECK(pool.new_blocks_for(seq, 1) == 0);  // position 3 fills block 0
    CHECK(pool.new_blocks_for(seq, 2) == 1);  // position 4 starts block 1
    slots = pool.reserve(seq, 6);             // positions 3..8: blocks 1 and 2
    seq.length = 9;
    CHECK(seq.block_table.size() == 3);
    // Each slot is block_table[p / B] * B + p % B.
    for (int p = 3; p < 9; ++p)
        CHECK(slots[std::size_t(p - 3)] == seq.block_table[std::size_t(p / 4)] * 4 + p % 4);
    CHECK(pool.blocks_in_use() == 3);
    pool.release(seq);
    CHECK(pool.blocks_in_use() == 0);
    CHECK(pool.free_blocks() == 8);
}

TEST_CASE("block manager: shared blocks are freed with their last reference", "[block_manager]") {
    BlockManager pool(2, 4);
    Sequence a, b;
    pool.reserve(a, 4);
    a.length = 4;
    for (int blk : a.block_table) {
        pool.retain(blk);  // b shares a's blocks (prefix sharing)
        b.block_table.push_back(blk);
    }
    b.length = 4;
    CHECK(pool.ref_count(a.block_table[0]) == 2);
    pool.release(a);
    CHECK(pool.blocks_in_use() == 2);  // b still holds them
    pool.release(b);
    CHECK(pool.blocks_in_use() == 0);
}

TEST_CASE("block manager: never-used blocks first, then the least recently freed cached one",
          "[block_manager]") {
    BlockManager pool(1, 3);
    std::vector<int> evicted;
    pool.on_evict([&](int blk) { evicted.push_back(blk); });
    Sequence a, b;
    pool.reserve(a, 1);
    pool.reserve(b, 1);
    a.length = b.length = 1;
    pool.mark_cached(a.block_table[0]);
    pool.mark_cached(b.block_table[0]);
    pool.release(a);  // freed first: evicted first
    pool.release(b);
    CHECK(pool.cached_free_blocks() == 2);
    Sequence c;
    pool.reserve(c, 1);  // the never-used third block
    CHECK(evicted.empty());
    pool.reserve(c, 1);  // now an eviction: a's block
    REQUIRE(evicted.size() == 1);
    CHECK(evicted[0] == a.block_table[0]);
    CHECK(pool.counters().evictions == 1);
    // The pool is full: one line saying so, nothing taken.
    Sequence d;
    pool.reserve(d, 1);  // b's block, the last
    try {
        pool.reserve(d, 1);
        FAIL("a full pool gave a block");
    } catch (const Error& e) {
        CHECK(std::string(e.what()).find("block") != std::string::npos);
    }
    CHECK(d.block_table.size() == 1);
}

TEST_CASE("block manager: a window's old full blocks are given back, causal keeps all",
          "[block_manager]") {
    BlockManager pool(4, 8);
    Sequence seq;
    pool.reserve(seq, 16);
    seq.length = 16;
    CHECK(pool.free_forgotten(seq, Mask{}) == 0);  // causal: every later query sees every key
    const BoundMask window = make_mask("window:5", MaskContext{std::vector<int32_t>(20, 1), -1, 1});
    // Queries from 16 on see keys > q - 5 >= 12: blocks 0..2 (keys 0..11) are forgotten.
    CHECK(pool.free_forgotten(seq, window.view()) == 3);
    CHECK(BlockManager::freed_blocks(seq) == 3);
    for (int lb = 0; lb < 3; ++lb) CHECK(seq.block_table[std::size_t(lb)] == kFreedBlock);
    CHECK(pool.blocks_in_use() == 1);
    pool.release(seq);
    CHECK(pool.blocks_in_use() == 0);
}

}  // namespace plab
