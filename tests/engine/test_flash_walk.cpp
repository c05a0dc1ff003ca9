// The toy's tiled walk laid out as steps (src/toy/flash_walk.h, the viewer's flash scene):
// the steps in the kernel's order, each row's online-softmax state after its step, and the
// outputs, all as run_flash_toy recorded them (arranged, never recomputed).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "core/strict_math.h"
#include "runtime/registry.h"
#include "toy/flash_toy.h"
#include "toy/flash_walk.h"

namespace plab::test {
namespace {

bool walk_same_bits(float a, float b) {
    return std::memcmp(&a, &b, sizeof a) == 0;
}

// The walk of `in` with tiles of `tile` under `mask`, and the run it was made from.
struct WalkOfToy {
    FlashToyRun run;
    FlashWalk walk;
};

WalkOfToy walk_of_toy(const ToyInput& in, int tile, const std::string& mask = "causal",
                      const std::vector<int>& chunk_starts = {0}) {
    auto ref = make_backend("cpu-ref");
    WalkOfToy w;
    w.run = run_flash_toy(in, tile, *ref, mask);
    w.walk = flash_walk_of(w.run, in, chunk_starts);
    return w;
}

}  // namespace

TEST_CASE("flash walk of the toy: tiles of 2 under causal take 1+1+2+2 steps in query order",
          "[flash]") {
    const WalkOfToy t = walk_of_toy(ToyInput{}, 2, "causal", {0, 2});
    const FlashWalk& w = t.walk;
    CHECK(w.source == "toy");
    CHECK(w.mask == "causal");
    REQUIRE(w.n_queries == 4);
    REQUIRE(w.n_keys == 4);
    CHECK(w.key_tile == 2);
    CHECK(w.query_tile == 1);
    CHECK(w.chunk_starts == std::vector<int>{0, 2});
    REQUIRE(w.steps.size() == 6);
    // Query p takes the tiles 0..p/2, one query after the other, key tiles from position 0.
    const int query[] = {0, 1, 2, 2, 3, 3};
    const int key_lo[] = {0, 0, 0, 2, 0, 2};
    const TileClass kind[] = {TileClass::partial, TileClass::full, TileClass::full,
                              TileClass::partial, TileClass::full, TileClass::full};
    for (std::size_t i = 0; i < w.steps.size(); ++i) {
        INFO("step " << i);
        const FlashWalkStep& s = w.steps[i];
        CHECK(s.query_lo == query[i]);
        CHECK(s.query_hi == query[i]);
        CHECK(s.key_lo == key_lo[i]);
        CHECK(s.key_hi == key_lo[i] + 1);
        CHECK(s.kind == kind[i]);
        REQUIRE(s.rows.size() == 1);
        CHECK(s.rows[0].query == query[i]);
        CHECK_FALSE(s.rows[0].rescaled);  // equal scores: the max never moves
    }
    CHECK(w.rescales == 0);
    CHECK(w.skipped == 0);
}

TEST_CASE("flash walk of the toy: outputs 2 3 14/3 6 as run_flash_toy gave them", "[flash]") {
    const WalkOfToy t = walk_of_toy(ToyInput{}, 2);
    const FlashWalk& w = t.walk;
    REQUIRE(w.output.size() == 4);
    REQUIRE(w.full.size() == 4);
    REQUIRE(w.ulps.size() == 4);
    const float want[] = {2.0f, 3.0f, 14.0f / 3.0f, 6.0f};
    for (std::size_t p = 0; p < 4; ++p) {
        INFO("query " << p);
        CHECK(walk_same_bits(w.output[p], t.run.queries[p].output));
        CHECK(walk_same_bits(w.full[p], t.run.queries[p].full));
        CHECK(w.ulps[p] == t.run.queries[p].ulps);
        CHECK(walk_same_bits(w.output[p], want[p]));
        CHECK(w.ulps[p] == 0);
    }
    // Each query's last row holds its output so far = the output; l = p + 1 (exp(0) a key).
    for (const FlashWalkStep& s : w.steps)
        for (const FlashWalkRow& r : s.rows) CHECK(r.l <= float(r.query + 1));
    CHECK(walk_same_bits(w.steps.back().rows[0].out, w.output[3]));
    CHECK(w.steps.back().rows[0].l == 4.0f);
}

TEST_CASE("flash walk of the toy: scores where the query sees a key and -inf where masked",
          "[flash]") {
    const FlashWalk w = walk_of_toy(ToyInput{}, 2).walk;
    REQUIRE(w.scores.size() == 16);
    for (int q = 0; q < 4; ++q)
        for (int k = 0; k < 4; ++k) {
            INFO("query " << q << ", key " << k);
            const float s = w.scores[std::size_t(q) * 4 + std::size_t(k)];
            if (k <= q)
                CHECK(s == 1.0f);  // q_p * k_j / sqrt(1) with every q and k equal to 1
            else
                CHECK((std::isinf(s) && s < 0));
        }
}

TEST_CASE("flash walk of the toy: rising keys rescale by exp(m_old - m)", "[flash]") {
    ToyInput in;
    in.keys = {1, 2, 3, 4};
    const WalkOfToy t = walk_of_toy(in, 2);
    const FlashWalk& w = t.walk;
    int rescaled = 0;
    for (const FlashWalkStep& s : w.steps)
        for (const FlashWalkRow& r : s.rows) {
            INFO("query " << r.query << ", keys " << s.key_lo << ".." << s.key_hi);
            if (!r.rescaled) continue;
            ++rescaled;
            CHECK(r.m > r.m_old);
            CHECK(r.rescale < 1.0f);
            // The same bits as core/online_softmax.h's begin_tile takes them, and exp's value.
            CHECK(walk_same_bits(r.rescale, strict_expf(strict_sub(r.m_old, r.m))));
            CHECK(r.rescale == Approx(std::exp(double(r.m_old) - double(r.m))).epsilon(1e-6));
        }
    CHECK(rescaled == 2);  // queries 2 and 3: their second tile raised the max
    CHECK(w.rescales == t.run.rescales);
    CHECK(w.rescales == rescaled);
    // A first tile is never a rescale: nothing was summed before it (m_old = -inf).
    for (const FlashWalkStep& s : w.steps)
        for (const FlashWalkRow& r : s.rows)
            if (std::isinf(r.m_old)) CHECK_FALSE(r.rescaled);
}

TEST_CASE("flash walk of the toy: an empty tile under dilated:2 2 is a step with no rows",
          "[flash]") {
    const WalkOfToy t = walk_of_toy(ToyInput{}, 1, "dilated:2,2");
    const FlashWalk& w = t.walk;
    CHECK(w.mask == "dilated:2,2");
    CHECK(w.key_tile == 1);
    int empty = 0;
    for (const FlashWalkStep& s : w.steps) {
        INFO("query " << s.query_lo << ", key " << s.key_lo);
        CHECK(s.key_lo == s.key_hi);  // tiles of one key
        if (s.kind != TileClass::empty) {
            CHECK(s.rows.size() == 1);
            continue;
        }
        ++empty;
        CHECK(s.rows.empty());  // skipped: never loaded, m, l and acc stay
        CHECK((std::isinf(w.scores[std::size_t(s.query_lo) * 4 + std::size_t(s.key_lo)])));
    }
    CHECK(empty > 0);
    CHECK(w.skipped == empty);
    CHECK(w.skipped == t.run.skipped);
}

}  // namespace plab::test
