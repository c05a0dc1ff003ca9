#include <catch2/catch.hpp>

#include "core/error.h"
#include "runtime/kv_cache.h"
#include "runtime/registry.h"
#include "test_util.h"

using namespace plab;

TEST_CASE("paged KV cache hands out blocks and slots", "[kv_cache]") {
    auto be = make_backend("cpu-ref");
    const ModelConfig c = test::small_config(16, 2, 2, 1, 8, 24, 50, 64);
    KvCache cache(*be, c, 4, 5);
    REQUIRE(cache.storage().bytes_per_token() == 2 * 2 * 1 * 8 * sizeof(float));
    Sequence s;
    auto slots = cache.blocks().reserve(s, 6);  // positions 0..5: blocks 0 and 1
    REQUIRE(s.length == 6);
    REQUIRE(s.block_table == std::vector<int32_t>{0, 1});
    REQUIRE(slots == std::vector<int32_t>{0, 1, 2, 3, 4, 5});
    REQUIRE(cache.blocks().blocks_in_use() == 2);
    REQUIRE(cache.bytes_in_use() == 2 * 4 * cache.storage().bytes_per_token());
    slots = cache.blocks().reserve(s, 1);  // position 6: still block 1, offset 2
    REQUIRE(slots == std::vector<int32_t>{6});
    Sequence other;
    cache.blocks().reserve(other, 9);  // 3 blocks: 2, 3, 4
    REQUIRE(other.block_table == std::vector<int32_t>{2, 3, 4});
    REQUIRE(cache.blocks().free_blocks() == 0);
    // Full: refused with a message, and the sequence is left as it was.
    REQUIRE_THROWS_WITH(cache.blocks().reserve(s, 2), Catch::Contains("KV cache is full"));
    REQUIRE(s.length == 7);
    cache.blocks().release(other);
    REQUIRE(cache.blocks().free_blocks() == 3);
    cache.blocks().reserve(s, 2);
    REQUIRE(s.block_table.size() == 3);
}

TEST_CASE("shared blocks are freed when the last reference goes", "[kv_cache]") {
    auto be = make_backend("cpu-ref");
    const ModelConfig c = test::small_config(16, 1, 2, 2, 8, 24, 50, 64);
    KvCache cache(*be, c, 4, 3);
    Sequence a;
    cache.blocks().reserve(a, 4);
    cache.blocks().retain(a.block_table[0]);
    REQUIRE(cache.blocks().ref_count(a.block_table[0]) == 2);
    Sequence b;
    b.block_table = a.block_table;  // b shares a's prefix block
    b.length = 4;
    cache.blocks().release(a);
    REQUIRE(cache.blocks().free_blocks() == 2);  // still held by b
    cache.blocks().release(b);
    REQUIRE(cache.blocks().free_blocks() == 3);
}

TEST_CASE("KV cache rejects impossible shapes", "[kv_cache]") {
    auto be = make_backend("cpu-ref");
    const ModelConfig c = test::small_config(16, 1, 2, 2, 8, 24, 50, 64);
    REQUIRE_THROWS_WITH(KvCache(*be, c, 0, 4), Catch::Contains("block size"));
    REQUIRE_THROWS_WITH(KvCache(*be, c, 4, 0), Catch::Contains("at least one block"));
}
