// The rows of the backend-ops table that read or write the KV cache: the
// K/V append (alone and with RoPE) and attention (alone, batched, probed),
// over paged pools whose unused slots hold NaN (backend_op_rows.h).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend_op_rows.h"
#include "core/attention_shape.h"
#include "test_util.h"

namespace plab::test::backend_ops {

namespace {

int slot_of(const std::vector<int32_t>& table, int pos, int block_size) {
    return table[std::size_t(pos / block_size)] * block_size + pos % block_size;
}

// A layer's K and V pools: `pool_blocks` blocks of `block_size` rows of
// `row` floats, NaN except the slots of positions 0..n_keys-1 (seeded random)
// whose block is not freed.
struct Pools {
    std::vector<float> k, v;
};
Pools make_pools(const std::vector<int32_t>& table, int pool_blocks, int block_size, int row,
                 int n_keys, std::uint64_t seed) {
    Pools p{std::vector<float>(std::size_t(pool_blocks) * block_size * row, NAN), {}};
    p.v = p.k;
    const auto k = random_floats(std::size_t(n_keys) * row, seed, -2.0f, 2.0f);
    const auto v = random_floats(std::size_t(n_keys) * row, seed + 1);
    for (int pos = 0; pos < n_keys; ++pos) {
        if (table[std::size_t(pos / block_size)] == kFreedBlock) continue;  // stays NaN
        const std::size_t to = std::size_t(slot_of(table, pos, block_size)) * row;
        std::copy_n(k.begin() + std::ptrdiff_t(pos) * row, row, p.k.begin() + std::ptrdiff_t(to));
        std::copy_n(v.begin() + std::ptrdiff_t(pos) * row, row, p.v.begin() + std::ptrdiff_t(to));
    }
    return p;
}

// A mask as data (core/mask.h) with the words it points to (ALiBi slopes),
// kept alive with it; view() gives the value an AttentionShape holds.
struct MaskData {
    std::string what = "causal";
    Mask mask;  // n_terms 0: causal
    std::vector<uint32_t> words;
    Mask view() const {
        Mask m = mask;
        m.data = words.empty() ? nullptr : words.data();
        m.data_words = int32_t(words.size());
        return m;
    }
};

// window:W (+ sink:S) (Mistral; StreamingLLM), with ALiBi slopes 2^(-8(h+1)/H)
// (Press et al. 2022) and tanh soft-capping at `cap` (Gemma 2) when cap > 0.
std::shared_ptr<MaskData> window_mask(int window, int sinks, int n_heads, float cap) {
    auto m = std::make_shared<MaskData>();
    m->what = "window " + str(window) + (sinks > 0 ? " + sink " + str(sinks) : "") +
              (cap > 0 ? " + ALiBi + softcap " + str(int(cap)) : "");
    m->mask.n_terms = 1;
    m->mask.terms[0] = MaskTerm{MaskKind::window, window, sinks, 0, 0};
    if (cap > 0) {
        m->mask.alibi = 1;
        m->mask.alibi_offset = 0;
        m->mask.n_heads = n_heads;
        m->mask.softcap = cap;
        for (int h = 0; h < n_heads; ++h) {
            const float slope = float(std::exp2(-8.0 * (h + 1) / n_heads));
            uint32_t bits;
            std::memcpy(&bits, &slope, sizeof bits);
            m->words.push_back(bits);
        }
    }
    return m;
}

// prefix:P (prefix-LM, Raffel et al. 2020): the first P positions see each other.
std::shared_ptr<MaskData> prefix_mask(int p) {
    auto m = std::make_shared<MaskData>();
    m->what = "prefix " + str(p);
    m->mask.n_terms = 1;
    m->mask.terms[0] = MaskTerm{MaskKind::prefix, p, 0, 0, 0};
    return m;
}

// One attention problem: a chunk of queries over a paged cache.
struct AttentionCase {
    int n_queries, pos0, n_heads, n_kv_heads, head_dim, block_size;
    std::shared_ptr<MaskData> mask = std::make_shared<MaskData>();
    // Blocks the mask lets no query of the chunk see are freed (kFreedBlock in
    // the table), as a KV cache does once a key slides out of every window.
    bool free_unseen_blocks = false;
};

struct AttentionInputs {
    AttentionCase c;
    std::vector<int32_t> table;
    Pools pools;
    std::vector<float> q;
    int pool_blocks = 0;

    AttentionShape shape() const {
        return attention_shape(c.n_queries, c.pos0, c.n_heads, c.n_kv_heads, c.head_dim,
                               c.block_size, c.mask->view());
    }
    int row() const { return c.n_kv_heads * c.head_dim; }
    std::string describe() const {
        return "C " + str(c.n_queries) + ", pos0 " + str(c.pos0) + ", H " + str(c.n_heads) +
               ", Hkv " + str(c.n_kv_heads) + ", Dh " + str(c.head_dim) + ", B " +
               str(c.block_size) + ", " + c.mask->what +
               (c.free_unseen_blocks ? ", unseen blocks freed" : "");
    }
};

AttentionInputs attention_inputs(const AttentionCase& c, std::uint64_t seed) {
    AttentionInputs in{c, {}, {}, {}, 0};
    const int n_keys = c.pos0 + c.n_queries;
    const int n_blocks = (n_keys + c.block_size - 1) / c.block_size;
    in.pool_blocks = n_blocks + 2;
    in.table = shuffled_block_table(n_blocks, n_blocks + 2, seed);
    if (c.free_unseen_blocks) {
        const Mask m = c.mask->view();
        for (int blk = 0; blk < n_blocks; ++blk) {
            bool seen = false;
            for (int q = c.pos0; q < n_keys; ++q)
                for (int k = blk * c.block_size; k < (blk + 1) * c.block_size; ++k)
                    seen = seen || m.visible(q, k);
            if (!seen) in.table[std::size_t(blk)] = kFreedBlock;
        }
        CHECK(std::count(in.table.begin(), in.table.end(), kFreedBlock) > 0);
    }
    in.pools = make_pools(in.table, in.pool_blocks, c.block_size, in.row(), n_keys, seed + 1);
    in.q = random_floats(std::size_t(c.n_queries) * c.n_heads * c.head_dim, seed + 3, -2.0f, 2.0f);
    return in;
}

// The pools on a backend as a KV cache makes them: prepare_kv_pool first (cpu
// keeps a transposed copy of K; results must not depend on it), then the contents.
struct DevicePools {
    DeviceArray k, v;
};
DevicePools upload_pools(Backend& b, const AttentionInputs& in) {
    DevicePools d{DeviceArray(b, in.pools.k.size()), upload(b, in.pools.v)};
    b.prepare_kv_pool(d.k.buf(), in.c.block_size, in.row());
    b.upload(d.k.buf(), in.pools.k.data(), in.pools.k.size());
    return d;
}

}  // namespace

OpRow kv_append_row() {
    OpRow row{"kv_append", {}};
    struct Case {
        int rows, pos0, row_size, block_size;
    };
    // A chunk that crosses blocks, a decode step, a cold prompt of 33 rows;
    // rows of 12 (Hkv 2 · Dh 6), 7 and 16 floats.
    for (const Case c : {Case{7, 3, 12, 5}, Case{1, 22, 7, 4}, Case{33, 0, 16, 16}}) {
        const int n_blocks = (c.pos0 + c.rows + c.block_size - 1) / c.block_size;
        const int pool_blocks = n_blocks + 2;
        const auto table = shuffled_block_table(n_blocks, n_blocks + 2, 800 + c.rows);
        std::vector<int32_t> slots;
        for (int p = c.pos0; p < c.pos0 + c.rows; ++p)
            slots.push_back(slot_of(table, p, c.block_size));
        const auto k = random_floats(std::size_t(c.rows) * c.row_size, 810 + c.rows, -2.0f, 2.0f);
        const auto v = random_floats(std::size_t(c.rows) * c.row_size, 820 + c.rows);
        const std::size_t pool = std::size_t(pool_blocks) * c.block_size * c.row_size;
        row.cases.push_back({"C " + str(c.rows) + " at " + str(c.pos0) + ", row " +
                                 str(c.row_size) + ", B " + str(c.block_size),
                             [=](Backend& b) {
                                 const DeviceArray dk = upload(b, k), dv = upload(b, v);
                                 DeviceArray k_pool(b, pool);
                                 b.prepare_kv_pool(k_pool.buf(), c.block_size, c.row_size);
                                 b.fill(k_pool.buf(), NAN);
                                 const DeviceArray v_pool = poisoned(b, pool);
                                 b.kv_append(k_pool.buf(), v_pool.buf(), dk.buf(), dv.buf(), slots,
                                             c.row_size);
                                 return Outputs{{"K pool", download(b, k_pool), false, true},
                                                {"V pool", download(b, v_pool), false, true}};
                             },
                             kCopy, kCopy});
    }
    return row;
}

OpRow rope_kv_append_row() {
    OpRow row{"rope_kv_append", {}};
    struct Case {
        std::vector<int32_t> positions;
        int n_heads, n_kv_heads, head_dim, block_size;
    };
    // A decode step (Dh odd: its last column has no pair), a chunk of
    // consecutive positions across blocks (GQA), a batched step's rows at
    // their own positions (two at one), Dh 1 (nothing to rotate).
    for (const Case& c : {Case{{22}, 4, 2, 7, 4}, Case{{3, 4, 5, 6, 7, 8, 9}, 3, 1, 8, 5},
                          Case{{40, 2, 2, 17, 63}, 2, 2, 5, 8}, Case{{0, 1, 2}, 2, 1, 1, 2}}) {
        const int rows = int(c.positions.size());
        const int kvd = c.n_kv_heads * c.head_dim;
        const int pool_blocks = 64 / c.block_size + 3;
        const auto table = shuffled_block_table(pool_blocks - 1, pool_blocks, 830 + rows);
        std::vector<int32_t> slots;  // distinct: row r's position r of the sequence
        for (int r = 0; r < rows; ++r) slots.push_back(slot_of(table, 7 * r + 1, c.block_size));
        const auto q = random_floats(std::size_t(rows) * c.n_heads * c.head_dim, 840 + rows);
        const auto k = random_floats(std::size_t(rows) * kvd, 850 + rows, -2.0f, 2.0f);
        const auto v = random_floats(std::size_t(rows) * kvd, 860 + rows);
        const Rope t = rope_table(64, c.head_dim);
        const std::size_t pool = std::size_t(pool_blocks) * c.block_size * kvd;
        row.cases.push_back({"C " + str(rows) + ", H " + str(c.n_heads) + ", Hkv " +
                                 str(c.n_kv_heads) + ", Dh " + str(c.head_dim),
                             [=](Backend& b) {
                                 const DeviceArray dq = upload(b, q), dk = upload(b, k),
                                                   dv = upload(b, v);
                                 const DeviceArray cos = upload(b, t.cos), sin = upload(b, t.sin);
                                 DeviceArray k_pool(b, pool);
                                 b.prepare_kv_pool(k_pool.buf(), c.block_size, kvd);
                                 b.fill(k_pool.buf(), NAN);
                                 const DeviceArray v_pool = poisoned(b, pool);
                                 b.rope_kv_append({dq.buf(), dk.buf(), dv.buf(), rows, c.n_heads,
                                                   c.n_kv_heads, c.head_dim, c.positions, cos.buf(),
                                                   sin.buf(), k_pool.buf(), v_pool.buf(), slots});
                                 return Outputs{{"q (in place)", download(b, dq)},
                                                {"k (in place)", download(b, dk)},
                                                {"K pool", download(b, k_pool), false, true},
                                                {"V pool", download(b, v_pool), false, true}};
                             },
                             kRope, kRope});
    }
    return row;
}

// The attention problems of the attention and attention_probs rows: a decode
// query, chunks with and without cached positions before them (65 queries:
// gpu's 64-query tile and one more; 129 keys), GQA, block
// sizes that do not divide the keys, Dh odd (7, 33: gpu's flash kernel runs
// them on the next compiled head dim, 8 and 48, with the extra components
// zero — kernels/kernels.h; above 256 gpu runs gpu-ref's kernel), Dh 32 with blocks of
// 16 (cpu's decode reads K from its transposed mirror), and masks that look
// back a window (its unseen blocks freed in the last case), forward in a
// prefix, and modify scores.
std::vector<AttentionCase> attention_cases() {
    return {
        {1, 33, 3, 1, 7, 5},
        {7, 0, 4, 2, 16, 16},
        {33, 5, 2, 1, 8, 7},
        {3, 40, 2, 2, 8, 4, window_mask(9, 2, 2, 5.0f)},
        {7, 0, 3, 3, 1, 3, prefix_mask(4)},
        {1, 70, 4, 2, 32, 16},
        {2, 50, 2, 1, 33, 8, window_mask(20, 1, 2, 30.0f)},
        {3, 40, 2, 1, 8, 4, window_mask(9, 0, 2, 0.0f), true},
        {65, 64, 4, 2, 48, 16},
    };
}

OpRow attention_row() {
    OpRow row{"attention", {}};
    std::uint64_t seed = 900;
    for (const AttentionCase& c : attention_cases()) {
        const AttentionInputs in = attention_inputs(c, seed += 10);
        row.cases.push_back({in.describe(),
                             [=](Backend& b) {
                                 const DevicePools pools = upload_pools(b, in);
                                 const DeviceArray q = upload(b, in.q);
                                 const DeviceArray out = poisoned(b, in.q.size());
                                 b.attention(out.buf(), q.buf(), pools.k.buf(), pools.v.buf(),
                                             in.table, in.shape());
                                 return Outputs{{"out", download(b, out)}};
                             },
                             kAttentionCpu, kAttentionGpu, c.head_dim});
    }
    return row;
}

OpRow attention_batch_row() {
    OpRow row{"attention_batch", {}};
    // A batched step: decode queries, a 3-query chunk and a 7-query prompt,
    // each over its own blocks of one shared pool, in one call. Dh 16 and Dh 7
    // (gpu runs 7 on its 8 kernel, the extra component zero).
    struct Seq {
        int n_queries, pos0;
    };
    const std::vector<Seq> seqs = {{1, 20}, {3, 9}, {7, 0}, {1, 0}, {1, 44}};
    for (const auto& [h, hkv, dh, bs] : {std::tuple{4, 2, 16, 4}, std::tuple{3, 1, 7, 5}}) {
        const int n_heads = h, n_kv_heads = hkv, head_dim = dh, block_size = bs;
        const int row_size = n_kv_heads * head_dim;
        std::vector<std::vector<int32_t>> tables;
        std::vector<std::vector<float>> qs;
        std::vector<AttentionShape> shapes;
        int next_block = 0;
        for (std::size_t i = 0; i < seqs.size(); ++i) {
            const int n_keys = seqs[i].pos0 + seqs[i].n_queries;
            const int n_blocks = (n_keys + block_size - 1) / block_size;
            std::vector<int32_t> t(static_cast<std::size_t>(n_blocks));
            std::iota(t.begin(), t.end(), next_block);
            std::shuffle(t.begin(), t.end(), std::mt19937_64(1000 + i));
            next_block += n_blocks;
            tables.push_back(t);
            qs.push_back(random_floats(std::size_t(seqs[i].n_queries) * n_heads * head_dim,
                                       1010 + i, -2.0f, 2.0f));
            shapes.push_back(attention_shape(seqs[i].n_queries, seqs[i].pos0, n_heads, n_kv_heads,
                                             head_dim, block_size));
        }
        // Every sequence's positions filled; the pool's last block spare (NaN).
        const int pool_blocks = next_block + 1;
        Pools pools{std::vector<float>(std::size_t(pool_blocks) * block_size * row_size, NAN), {}};
        pools.v = pools.k;
        for (std::size_t i = 0; i < seqs.size(); ++i) {
            const Pools own = make_pools(tables[i], pool_blocks, block_size, row_size,
                                         seqs[i].pos0 + seqs[i].n_queries, 1020 + i);
            for (std::size_t f = 0; f < own.k.size(); ++f) {
                if (!std::isnan(own.k[f])) pools.k[f] = own.k[f];
                if (!std::isnan(own.v[f])) pools.v[f] = own.v[f];
            }
        }
        row.cases.push_back(
            {str(int(seqs.size())) + " sequences (C 1..7), H " + str(n_heads) + ", Hkv " +
                 str(n_kv_heads) + ", Dh " + str(head_dim) + ", B " + str(block_size),
             [=](Backend& b) {
                 DeviceArray k_pool(b, pools.k.size());
                 b.prepare_kv_pool(k_pool.buf(), block_size, row_size);
                 b.upload(k_pool.buf(), pools.k.data(), pools.k.size());
                 const DeviceArray v_pool = upload(b, pools.v);
                 std::vector<DeviceArray> q, out;
                 std::vector<AttentionCall> calls;
                 for (std::size_t i = 0; i < qs.size(); ++i) {
                     q.push_back(upload(b, qs[i]));
                     out.push_back(poisoned(b, qs[i].size()));
                     calls.push_back({out.back().buf(), q.back().buf(), tables[i], shapes[i]});
                 }
                 b.attention_batch(k_pool.buf(), v_pool.buf(), calls);
                 Outputs o;
                 for (std::size_t i = 0; i < out.size(); ++i)
                     o.push_back({"out of sequence " + str(int(i)), download(b, out[i])});
                 return o;
             },
             kAttentionCpu, kAttentionGpu, head_dim});
    }
    return row;
}

OpRow attention_probs_row() {
    OpRow row{"attention_probs", {}};
    std::uint64_t seed = 1100;
    for (const AttentionCase& c : attention_cases()) {
        const AttentionInputs in = attention_inputs(c, seed += 10);
        const int head = c.n_heads - 1;
        const std::size_t cells = std::size_t(c.n_queries) * (c.pos0 + c.n_queries);
        row.cases.push_back(
            {in.describe() + ", head " + str(head),
             [=](Backend& b) {
                 const DevicePools pools = upload_pools(b, in);
                 const DeviceArray q = upload(b, in.q);
                 const DeviceArray probs = poisoned(b, cells);
                 const DeviceArray scores = poisoned(b, cells);
                 b.attention_probs(probs.buf(), scores.buf(), q.buf(), pools.k.buf(), in.table,
                                   in.shape(), head);
                 return Outputs{{"probs", download(b, probs)}, {"scores", download(b, scores)}};
             },
             kProbsFast, kProbsFast});
    }
    return row;
}

}  // namespace plab::test::backend_ops
