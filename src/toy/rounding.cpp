#include "toy/rounding.h"

#include <bit>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "core/random.h"

namespace plab {
namespace {

// Left to right, one rounding per add: the order every other sum is compared with.
float sum_range(const std::vector<float>& v, std::size_t lo, std::size_t hi) {
    float s = 0.0f;
    for (std::size_t i = lo; i < hi; ++i) s += v[i];
    return s;
}

// Element i into lane i % lanes, left to right; then the lanes pairwise
// ((l0 + l1) + (l2 + l3)) ...: how a vectorised loop adds (lanes a power of 2).
float sum_in_lanes(const std::vector<float>& v, int lanes) {
    std::vector<float> lane(std::size_t(lanes), 0.0f);
    for (std::size_t i = 0; i < v.size(); ++i) lane[i % std::size_t(lanes)] += v[i];
    while (lane.size() > 1) {
        std::vector<float> next(lane.size() / 2);
        for (std::size_t i = 0; i < next.size(); ++i) next[i] = lane[2 * i] + lane[2 * i + 1];
        lane = next;
    }
    return lane[0];
}

// Neighbours pairwise, then their sums pairwise, ... (an odd one out carried up).
float sum_pairwise(std::vector<float> v) {
    while (v.size() > 1) {
        std::vector<float> next;
        for (std::size_t i = 0; i + 1 < v.size(); i += 2) next.push_back(v[i] + v[i + 1]);
        if (v.size() % 2 == 1) next.push_back(v.back());
        v = next;
    }
    return v.empty() ? 0.0f : v[0];
}

// "v2", "v2 + v3", "v2 + .. + v5": the values lo..hi-1 as a sum.
std::string range_text(std::size_t lo, std::size_t hi) {
    const std::string first = "v" + std::to_string(lo), last = "v" + std::to_string(hi - 1);
    return hi - lo == 1 ? first : first + (hi - lo == 2 ? " + " : " + .. + ") + last;
}

// range_text in parentheses when it is a sum.
std::string grouped(std::size_t lo, std::size_t hi) {
    return hi - lo == 1 ? range_text(lo, hi) : "(" + range_text(lo, hi) + ")";
}

// "((v0 + v1) + v2) + v3", or with "..." past 6 values.
std::string left_to_right_text(std::size_t n) {
    if (n > 6) return "(((v0 + v1) + v2) + ...) + v" + std::to_string(n - 1);
    std::string t = "v0";
    for (std::size_t i = 1; i < n; ++i)
        t = (i > 1 ? "(" + t + ")" : t) + " + v" + std::to_string(i);
    return t;
}

std::string right_to_left_text(std::size_t n) {
    if (n > 6)
        return "v0 + (... + (v" + std::to_string(n - 2) + " + v" + std::to_string(n - 1) + "))";
    std::string t = "v" + std::to_string(n - 1);
    for (std::size_t i = n - 1; i-- > 0;)
        t = "v" + std::to_string(i) + " + " + (i + 2 < n ? "(" + t + ")" : t);
    return t;
}

std::vector<int> tile_starts(int from, int to, int tile) {
    std::vector<int> starts;
    for (int s = from; s < to; s += tile) starts.push_back(s);
    return starts;
}

}  // namespace

std::string float_bits(float f) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%08x", std::bit_cast<std::uint32_t>(f));
    return text;
}

long long ulps_between(float a, float b) {
    // Floats of one sign are ordered like their bit patterns read as integers;
    // map negative ones below zero so the distance runs across the sign.
    const auto ordered = [](float f) {
        const auto i = static_cast<long long>(std::bit_cast<std::int32_t>(f));
        return i < 0 ? -(i & 0x7fffffff) : i;
    };
    return std::llabs(ordered(a) - ordered(b));
}

PieceSum piece_sum(std::string name, const std::vector<float>& v, std::vector<int> starts) {
    PieceSum p{std::move(name), std::move(starts), {}, 0.0f};
    for (std::size_t i = 0; i < p.starts.size(); ++i) {
        const std::size_t lo = std::size_t(p.starts[i]);
        const std::size_t hi = i + 1 < p.starts.size() ? std::size_t(p.starts[i + 1]) : v.size();
        PLAB_ASSERT(lo < hi && hi <= v.size());
        p.pieces.push_back(sum_range(v, lo, hi));
    }
    p.sum = sum_range(p.pieces, 0, p.pieces.size());
    return p;
}

OrdersScene orders_scene(const std::vector<float>& values) {
    PLAB_CHECK(values.size() >= 2 && values.size() <= 4096,
               "--values needs 2 to 4096 numbers, got " << values.size());
    for (float v : values)
        PLAB_CHECK(std::isfinite(v), "--values must be finite numbers, got " << v);
    OrdersScene s;
    s.values = values;
    for (float v : values) s.exact += double(v);
    const std::size_t n = values.size(), half = n / 2;
    std::vector<float> reversed(values.rbegin(), values.rend());
    s.orders = {
        {"left to right", left_to_right_text(n), sum_range(values, 0, n)},
        {"right to left", right_to_left_text(n), sum_range(reversed, 0, n)},
        {"two halves", grouped(0, half) + " + " + grouped(half, n),
         sum_range(values, 0, half) + sum_range(values, half, n)},
        {"4 lanes", "lane i % 4 left to right, then (l0 + l1) + (l2 + l3)",
         sum_in_lanes(values, 4)},
        {"pairwise", "(v0 + v1) + (v2 + v3), ... then their sums pairwise", sum_pairwise(values)},
    };
    return s;
}

TilesScene tiles_scene(int cached, int fresh, int tile, std::uint32_t seed) {
    PLAB_CHECK(cached >= 1 && cached <= 100000, "--cached must be 1..100000, got " << cached);
    PLAB_CHECK(fresh >= 1 && fresh <= 100000, "--new must be 1..100000, got " << fresh);
    PLAB_CHECK(tile >= 1 && tile <= 4096, "--tile must be 1..4096, got " << tile);
    TilesScene s{cached, fresh, tile, {}, {}, {}, {}};
    const int n = cached + fresh;
    // Scores like a trained head's: mostly small, a few large (random, seeded).
    std::mt19937 rng(seed);
    random::Normal<float> score(0.0f, 2.0f);
    std::vector<float> scores(static_cast<std::size_t>(n));
    float max = -INFINITY;
    for (float& x : scores) max = std::max(max, x = score(rng));
    for (float x : scores) s.weights.push_back(std::exp(x - max));
    s.full = piece_sum("full prefill (" + std::to_string(n) + " keys in one chunk)", s.weights,
                       tile_starts(0, n, tile));
    // Cached keys reduced in their own tiles, new keys in tiles that start at
    // the chunk's first key: the tiles move with the chunk boundary.
    std::vector<int> starts = tile_starts(0, cached, tile);
    for (int t : tile_starts(cached, n, tile)) starts.push_back(t);
    s.separate = piece_sum("chunked " + std::to_string(cached) + " + " + std::to_string(fresh) +
                               ", cache and new keys reduced separately",
                           s.weights, starts);
    s.appended = piece_sum("chunked " + std::to_string(cached) + " + " + std::to_string(fresh) +
                               ", new keys appended, tiles from key 0",
                           s.weights, tile_starts(0, n, tile));
    return s;
}

SplitsScene splits_scene(const std::vector<float>& weights, const std::vector<int>& counts,
                         int size) {
    const int n = int(weights.size());
    PLAB_CHECK(size >= 1 && size <= n, "--split-size must be 1.." << n << ", got " << size);
    SplitsScene s{n, size, {}, {}};
    for (int count : counts) {
        PLAB_CHECK(count >= 1 && count <= n,
                   "--split-counts entries must be 1.." << n << ", got " << count);
        const int per = (n + count - 1) / count;
        s.by_count.push_back(
            piece_sum(std::to_string(count) + " splits (of " + std::to_string(per) + " keys)",
                      weights, tile_starts(0, n, per)));
    }
    s.by_size = piece_sum("splits of " + std::to_string(size) + " keys, however many", weights,
                          tile_starts(0, n, size));
    return s;
}

}  // namespace plab
