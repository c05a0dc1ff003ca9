// The prefix cache alone, host only: naming full blocks, matching a prompt's
// longest cached prefix in whole blocks, and what a repeated prompt costs
// through a bare scheduler. The boundaries pinned here are the ones a planted
// off-by-one slipped past while every model-level test passed.
#include <catch2/catch.hpp>
#include <numeric>
#include <vector>

#include "runtime/block_manager.h"
#include "runtime/prefix_cache.h"
#include "runtime/scheduler.h"

namespace plab {
namespace {

constexpr int B = 4;  // positions per block

std::vector<int32_t> prompt_of(int n, int first = 10) {
    std::vector<int32_t> t(static_cast<std::size_t>(n));
    std::iota(t.begin(), t.end(), first);
    return t;
}

// A sequence of `tokens` computed into the pool and its full blocks named.
Sequence computed(BlockManager& pool, PrefixCache& cache, const std::vector<int32_t>& tokens) {
    Sequence seq;
    pool.reserve(seq, static_cast<int>(tokens.size()));
    seq.length = static_cast<int>(tokens.size());
    cache.name_full_blocks(seq, tokens, /*salt=*/7);
    return seq;
}

}  // namespace

TEST_CASE("prefix cache: a match is the longest cached prefix in whole blocks", "[prefix_cache]") {
    BlockManager pool(B, 16);
    PrefixCache cache(pool);
    const std::vector<int32_t> named = prompt_of(2 * B);
    Sequence first = computed(pool, cache, named);
    REQUIRE(first.block_hashes.size() == 2);
    // Spans of the same tokens, cut at the block boundaries and one either side.
    const std::pair<int, std::size_t> spans[] = {
        {2 * B - 1, 1}, {2 * B, 2}, {B - 1, 0}, {2 * B + 1, 2}, {B, 1}, {B + 1, 1}, {0, 0}};
    for (const auto& [n, blocks] : spans) {
        INFO("span of " << n << " tokens");
        std::vector<int32_t> t = prompt_of(2 * B + 1);
        t.resize(static_cast<std::size_t>(n));
        const std::vector<int> found = cache.match(t, 7);
        REQUIRE(found.size() == blocks);
        for (std::size_t i = 0; i < found.size(); ++i) CHECK(found[i] == first.block_table[i]);
    }
    // A different model (salt) or a different first token finds nothing; a
    // different second block keeps the first.
    CHECK(cache.match(named, 8).empty());
    std::vector<int32_t> other = named;
    other[0] = 99;
    CHECK(cache.match(other, 7).empty());
    other = named;
    other[B] = 99;
    CHECK(cache.match(other, 7).size() == 1);
}

TEST_CASE("prefix cache: a released prefix stays cached until its blocks are evicted",
          "[prefix_cache]") {
    BlockManager pool(B, 4);
    PrefixCache cache(pool);
    Sequence first = computed(pool, cache, prompt_of(2 * B));
    pool.release(first);
    CHECK(pool.cached_free_blocks() == 2);
    CHECK(cache.match(prompt_of(2 * B), 7).size() == 2);
    // Sharing takes a reference: the blocks leave the cached free queue.
    Sequence again;
    cache.share(again, cache.match(prompt_of(2 * B), 7));
    CHECK(again.length == 2 * B);
    CHECK(pool.cached_free_blocks() == 0);
    pool.release(again);
    // A request needing the whole pool evicts them, tail first; the cache forgets.
    Sequence big;
    pool.reserve(big, 4 * B);
    CHECK(pool.counters().evictions == 2);
    CHECK(cache.match(prompt_of(2 * B), 7).empty());
    pool.release(big);
}

TEST_CASE("prefix cache: a repeated whole-block prompt through a bare scheduler",
          "[prefix_cache][scheduler]") {
    // The second request finds both blocks cached but must still compute its last
    // position (the first token comes from its logits): the last whole block is
    // computed again, so B positions come from the cache and B are recomputed.
    BlockManager pool(B, 16);
    PrefixCache cache(pool);
    SchedulerOptions o;
    o.salt = 7;
    Scheduler sched(pool, cache, o);
    auto request = [](int id) {
        Request r{SamplerOptions{}};
        r.id = id;
        r.seq.id = id;
        r.prompt = prompt_of(2 * B);
        r.tokens = r.prompt;
        r.new_limit = 1;
        return r;
    };
    Request a = request(0), b = request(1);
    sched.add(a);
    Schedule s = sched.schedule();
    REQUIRE(s.spans.size() == 1);
    CHECK(s.spans[0].n_tokens == 2 * B);
    a.tokens.push_back(1);  // its first token sampled: done
    sched.finish(a);
    sched.add(b);
    s = sched.schedule();
    REQUIRE(s.spans.size() == 1);
    CHECK(b.cached_tokens == B);
    CHECK(s.spans[0].n_tokens == B);
    CHECK(b.hit_blocks == 1);
    b.tokens.push_back(1);
    sched.finish(b);
}

}  // namespace plab
