#include "toy/flash_order.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/error.h"

namespace plab {
namespace {

constexpr int kLanes = 8;          // the lanes that share a row (kernels: kKeyGroup)
constexpr int kGroups = 2;         // warp groups, alternate key tiles
constexpr int kSegmentKeys = 256;  // kernels.h kFlashSegmentKeys

}  // namespace

float flash_lane_sum(const std::array<float, 8>& x) {
    std::array<float, kLanes> a = x;
    for (int offset = kLanes / 2; offset > 0; offset /= 2) {
        std::array<float, kLanes> b{};
        for (int t = 0; t < kLanes; ++t) b[t] = a[t] + a[t ^ offset];
        a = b;
    }
    return a[0];  // lane 0's; every lane ends with the same
}

namespace {

// One group's running state for one row inside a segment.
struct GroupState {
    float m = -INFINITY;
    std::array<float, kLanes> l{};
    std::vector<float> acc;
};

// The segment merge (kernels: SegmentMerge): a segment that saw nothing
// leaves the total; the first that saw something becomes it; otherwise both
// are rescaled to the larger max, with one fmaf each.
struct RowTotal {
    float m = -INFINITY, l = 0;
    std::vector<float> a;
    void merge(float m_seg, float l_seg, const std::vector<float>& a_seg) {
        if (m_seg == -INFINITY) return;
        if (m == -INFINITY) {
            m = m_seg;
            l = l_seg;
            a = a_seg;
            return;
        }
        const float m_new = fmaxf(m, m_seg);
        const float c_total = expf(m - m_new), c_seg = expf(m_seg - m_new);
        l = fmaf(l, c_total, l_seg * c_seg);
        for (std::size_t d = 0; d < a.size(); ++d) a[d] = fmaf(a[d], c_total, a_seg[d] * c_seg);
        m = m_new;
    }
};

// The scores of query row i against keys key_lo..key_hi, -inf where the tile's
// verdict or the mask hides the key: each one chain over d in order, on the
// query scaled first (the kernel scales Q as it loads it).
std::vector<float> tile_scores(const FlashOrderInput& in, const std::vector<float>& q_scaled, int i,
                               int key_lo, int key_hi, TileClass kind) {
    const int pos = in.pos0 + i, dh = in.head_dim;
    std::vector<float> x(std::size_t(key_hi - key_lo + 1), -INFINITY);
    for (int j = key_lo; j <= key_hi; ++j) {
        if (kind == TileClass::partial && !in.mask.visible(pos, j)) continue;
        float s = 0.0f;
        for (int d = 0; d < dh; ++d)
            s += q_scaled[std::size_t(i) * dh + d] * in.k[std::size_t(j) * dh + d];
        const bool modifies = in.mask.alibi || in.mask.softcap > 0.0f;
        x[std::size_t(j - key_lo)] = modifies ? in.mask.modify_score(s, in.head, pos, j) : s;
    }
    return x;
}

// Folds one key tile into one row's group state (the kernel's steps 4 to 6).
// Returns false when the row sees no key of the tile (nothing changes).
bool fold_tile(const FlashOrderInput& in, const std::vector<float>& x, int key_lo, GroupState& g,
               FlashOrderState& st) {
    float tile_max = -INFINITY;
    for (float s : x) tile_max = fmaxf(tile_max, s);
    if (tile_max == -INFINITY) return false;
    const float m_new = fmaxf(g.m, tile_max);
    const float correction = expf(g.m - m_new);  // exp(-inf) = 0 on the group's first tile
    st.m_old = g.m;
    const int n = static_cast<int>(x.size());
    std::vector<float> p(x.size());
    for (int t = 0; t < kLanes; ++t) {
        g.l[std::size_t(t)] *= correction;
        for (int jj = t; jj < n; jj += kLanes) {
            p[std::size_t(jj)] = expf(x[std::size_t(jj)] - m_new);
            g.l[std::size_t(t)] += p[std::size_t(jj)];
        }
    }
    for (float& a : g.acc) a *= correction;
    // A masked key's p is 0 and adds exactly nothing: skipping it changes no bit.
    for (int jj = 0; jj < n; ++jj) {
        if (x[std::size_t(jj)] == -INFINITY) continue;
        const float* v = in.v + std::size_t(key_lo + jj) * std::size_t(in.head_dim);
        for (int d = 0; d < in.head_dim; ++d) g.acc[std::size_t(d)] += p[std::size_t(jj)] * v[d];
    }
    g.m = m_new;
    st.m = m_new;
    st.rescale = correction;
    st.l = flash_lane_sum(g.l);
    st.acc0 = g.acc.empty() ? 0.0f : g.acc[0];
    return true;
}

// The two groups' states of one row merged at a segment's end (the kernel's step 7).
void merge_groups(const std::array<GroupState, kGroups>& g, RowTotal& total) {
    const float m_row = fmaxf(g[0].m, g[1].m);
    if (m_row == -INFINITY) return;  // the segment saw none of the row's keys
    const float c0 = expf(g[0].m - m_row), c1 = expf(g[1].m - m_row);
    std::array<float, kLanes> share{};
    for (int t = 0; t < kLanes; ++t)
        share[std::size_t(t)] = g[0].l[std::size_t(t)] * c0 + g[1].l[std::size_t(t)] * c1;
    std::vector<float> a(g[0].acc.size());
    for (std::size_t d = 0; d < a.size(); ++d) a[d] = g[0].acc[d] * c0 + g[1].acc[d] * c1;
    total.merge(m_row, flash_lane_sum(share), a);
}

// One query tile (a kernel block): its segments, pairs of key tiles, merges.
void walk_query_tile(const FlashOrderInput& in, const std::vector<float>& q_scaled, int first,
                     FlashOrderResult& r) {
    const int last = std::min(in.n_queries, first + in.query_tile) - 1;
    const int first_pos = in.pos0 + first, last_pos = in.pos0 + last;
    const Mask::QueryTileBounds bounds = in.mask.query_tile_bounds(first_pos, last_pos);
    const int last_key = std::min(std::max(0, bounds.max_hi), in.n_keys - 1);
    const int kt = in.key_tile, seg_keys = flash_segment_keys(kt);
    std::vector<RowTotal> totals(std::size_t(last - first + 1));
    for (int seg = 0; seg <= last_key / seg_keys; ++seg) {
        std::vector<std::array<GroupState, kGroups>> rows(totals.size());
        for (auto& row : rows)
            for (GroupState& g : row) g.acc.assign(std::size_t(in.head_dim), 0.0f);
        const int seg_end = std::min((seg + 1) * seg_keys, last_key + 1);
        for (int pair0 = seg * seg_keys; pair0 < seg_end; pair0 += kGroups * kt) {
            for (int group = 0; group < kGroups; ++group) {
                const int t0 = pair0 + group * kt;
                if (t0 > last_key) continue;
                const int t1 = std::min(t0 + kt, in.n_keys) - 1;
                const TileClass kind = in.mask.classify_tile(bounds, t0, t1);
                r.tiles.push_back({in.chunk, seg, first_pos, last_pos, t0, t1, group, kind, true});
                if (kind == TileClass::empty) continue;  // never loaded
                for (int i = first; i <= last; ++i) {
                    FlashOrderState st{in.pos0 + i, t0, group};
                    const std::vector<float> x = tile_scores(in, q_scaled, i, t0, t1, kind);
                    if (fold_tile(in, x, t0, rows[std::size_t(i - first)][std::size_t(group)], st))
                        r.states.push_back(st);
                }
            }
        }
        for (std::size_t i = 0; i < rows.size(); ++i) merge_groups(rows[i], totals[i]);
    }
    // The key tiles past the furthest key any of its queries sees: never reached.
    for (int t0 = (last_key / kt + 1) * kt; t0 < in.n_keys; t0 += kt)
        r.tiles.push_back({in.chunk, t0 / seg_keys, first_pos, last_pos, t0,
                           std::min(t0 + kt, in.n_keys) - 1, (t0 / kt) % kGroups, TileClass::empty,
                           false});
    for (int i = first; i <= last; ++i) {
        const RowTotal& t = totals[std::size_t(i - first)];
        for (int d = 0; d < in.head_dim; ++d)
            r.out[std::size_t(i) * std::size_t(in.head_dim) + std::size_t(d)] =
                t.a.empty() ? NAN : t.a[std::size_t(d)] / t.l;
    }
}

}  // namespace

int flash_segment_keys(int key_tile) {
    const int pair = 2 * key_tile;
    return kSegmentKeys % pair == 0 ? kSegmentKeys : (kSegmentKeys + pair - 1) / pair * pair;
}

void flash_kernel_order(const FlashOrderInput& in, FlashOrderResult& r) {
    PLAB_CHECK(in.key_tile >= 1, "--tile " << in.key_tile << " must be at least 1 (keys per tile)");
    PLAB_CHECK(in.query_tile >= 1, "a query tile holds at least one row");
    std::vector<float> q_scaled(std::size_t(in.n_queries) * std::size_t(in.head_dim));
    for (std::size_t e = 0; e < q_scaled.size(); ++e) q_scaled[e] = in.q[e] * in.scale;
    r.out.assign(q_scaled.size(), 0.0f);
    for (int first = 0; first < in.n_queries; first += in.query_tile)
        walk_query_tile(in, q_scaled, first, r);
}

}  // namespace plab
