// `plab grade kv_cache`: a paged KV cache — block table, append, gather —
// driven with random chunk plans and block sizes (lessons/assignments/kv_cache/README.md).
//
// The reference layout is the engine's own: core/kv_layout.h's kv_slot and
// kv_offset, the functions every backend finds K/V with; the pool is
// (blocks, B, Hkv, Dh) as runtime/kv_storage.h holds it. The grader hands the
// cache its free list (shuffled, as a pool's is after other sequences came and
// went), so the block table is determined: blocks are taken from its front, one
// whenever a position needs a new block. Known mistakes: a block per chunk,
// blocks taken in sorted order, one block too many, the logical block index
// used as the physical one.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/kv_layout.h"
#include "core/random.h"
#include "grade/grade.h"

namespace plab::grade {
namespace kv_cache_detail {

Tensor ints(const std::vector<int>& v) {
    return tensor({static_cast<int>(v.size())}, std::vector<double>(v.begin(), v.end()));
}

std::vector<int> prefix(const std::vector<int>& v, int n) {
    return std::vector<int>(v.begin(), v.begin() + std::min<int>(n, v.size()));
}

// The pool after T positions with this block table: each position's Hkv*Dh
// numbers at kv_offset(kv_slot(...)); NaN (not checked) in slots no position uses.
Tensor pool(const std::vector<float>& x, int t, int num_blocks, int b, int hkv, int dh,
            const std::vector<int>& table) {
    std::vector<double> p(std::size_t(num_blocks) * b * hkv * dh, NAN);
    for (int pos = 0; pos < t; ++pos) {
        const int slot = kv_slot(table.data(), pos, b);
        for (int h = 0; h < hkv; ++h)
            for (int d = 0; d < dh; ++d)
                p[kv_offset(slot, h, hkv, dh) + d] = x[(std::size_t(pos) * hkv + h) * dh + d];
    }
    return tensor({num_blocks, b, hkv, dh}, p);
}

Case make_case(std::mt19937_64& rng, int t, int b, int hkv, int dh, const std::vector<int>& plan) {
    const int needed = (t + b - 1) / b;
    const int num_blocks = needed + 3;
    std::vector<int> free(num_blocks);
    std::iota(free.begin(), free.end(), 0);
    random::shuffle(free.begin(), free.end(), rng);
    std::vector<int> sorted = free;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t row = std::size_t(hkv) * dh;
    const std::vector<float> k = uniform(rng, t * row), v = uniform(rng, t * row);
    const std::string shape = "B=" + std::to_string(b) + " Hkv=" + std::to_string(hkv) +
                              " Dh=" + std::to_string(dh) + ", T=" + std::to_string(t);
    Case c;
    c.calls.push_back({{"fn", "PagedKVCache"},
                       {"args",
                        {{"num_blocks", num_blocks},
                         {"block_size", b},
                         {"n_kv_heads", hkv},
                         {"head_dim", dh},
                         {"free_blocks", to_arg(ints(free), true)}}},
                       {"as", "cache"}});
    int len = 0;
    for (std::size_t n = 0; n < plan.size(); ++n) {
        const int pos0 = len;
        len += plan[n];
        const auto slice = [&](const std::vector<float>& x, int from, int to) {
            return std::vector<float>(x.begin() + from * row, x.begin() + to * row);
        };
        c.calls.push_back({{"fn", "cache.append"},
                           {"args",
                            {{"k", to_arg(tensor_f({plan[n], hkv, dh}, slice(k, pos0, len)))},
                             {"v", to_arg(tensor_f({plan[n], hkv, dh}, slice(v, pos0, len)))}}}});
        const std::string where = shape + ", after chunk " + std::to_string(n) + " (positions " +
                                  std::to_string(pos0) + ".." + std::to_string(len - 1) + ")";
        const int table_call = static_cast<int>(c.calls.size());
        c.calls.push_back({{"fn", "cache.block_table"}});
        Expectation e;
        e.call = table_call;
        e.what = "block_table";
        e.where = where;
        e.axes = {"logical block"};
        e.expected = ints(prefix(free, (len + b - 1) / b));
        e.mistakes = {
            {ints(prefix(free, static_cast<int>(n) + 1)),
             "take a new block only when the last one is full, not for every chunk"},
            {ints(prefix(sorted, (len + b - 1) / b)),
             "take blocks in the order free_blocks gives them, from its front"},
            {ints(prefix(free, len / b + 1)),
             "one block too many: T positions need ceil(T / B) blocks"},
        };
        c.expect.push_back(e);
        const std::vector<int> table = prefix(free, (len + b - 1) / b);
        std::vector<int> logical(table.size());
        std::iota(logical.begin(), logical.end(), 0);
        for (int part : {0, 1}) {
            c.calls.push_back({{"fn", part == 0 ? "cache.k_pool" : "cache.v_pool"}});
            Expectation p;
            p.call = static_cast<int>(c.calls.size()) - 1;
            p.what = part == 0 ? "k_pool" : "v_pool";
            p.where = where;
            p.axes = {"block", "offset", "kv head", "component"};
            const std::vector<float>& x = part == 0 ? k : v;
            p.expected = pool(x, len, num_blocks, b, hkv, dh, table);
            p.mistakes = {{pool(x, len, num_blocks, b, hkv, dh, logical),
                           "you wrote position p into pool block p // B; write it into block "
                           "block_table[p // B], offset p % B"}};
            p.diagnose = [](const Tensor&) {
                return std::string(
                    "the pool is (num_blocks, B, Hkv, Dh): position p's K/V at "
                    "[block_table[p // B], p % B]; append writes at positions T, T+1, ...");
            };
            c.expect.push_back(std::move(p));
        }
        c.calls.push_back({{"fn", "cache.gather"}});
        for (int part : {0, 1}) {
            Expectation g;
            g.call = static_cast<int>(c.calls.size()) - 1;
            g.part = part;
            g.what = part == 0 ? "K of gather()" : "V of gather()";
            g.where = where;
            g.axes = {"position", "kv head", "component"};
            g.expected = tensor_f({len, hkv, dh}, slice(part == 0 ? k : v, 0, len));
            g.diagnose = [b](const Tensor&) {
                return "gather reads position p from block block_table[p // B] at offset p % B "
                       "(B = " +
                       std::to_string(b) + "), for p = 0..T-1, and appends write at T";
            };
            c.expect.push_back(std::move(g));
        }
    }
    return c;
}

}  // namespace kv_cache_detail

std::vector<Check> kv_cache_checks(std::mt19937_64& rng) {
    using kv_cache_detail::make_case;
    std::vector<Check> checks(3);
    checks[0] = {
        "one chunk, one block", "append writes each position at [block_table[p // B], p % B]", {}};
    checks[0].cases.push_back(make_case(rng, 4, 4, 1, 2, {4}));
    checks[0].cases.push_back(make_case(rng, 3, 8, 2, 3, {3}));
    checks[1] = {"chunks across block boundaries",
                 "a chunk may end inside a block; the next chunk continues it",
                 {}};
    for (auto [t, b] : {std::pair{10, 4}, {17, 3}, {8, 8}, {9, 16}})
        checks[1].cases.push_back(make_case(rng, t, b, 2, 4, random_plan(rng, t, 5)));
    checks[2] = {
        "block size 1, token-by-token, GQA shapes", "one position per block when B = 1", {}};
    checks[2].cases.push_back(make_case(rng, 6, 1, 2, 5, random_plan(rng, 6, 3)));
    checks[2].cases.push_back(make_case(rng, 7, 2, 4, 1, std::vector<int>(7, 1)));
    checks[2].cases.push_back(make_case(rng, 33, 5, 1, 7, random_plan(rng, 33, 8)));
    return checks;
}

}  // namespace plab::grade
