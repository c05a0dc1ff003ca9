// Self-check of the mask scene (see self_check.h), under any mask.
//
// What it teaches: a mask is a promise about zeros. Whatever the spec, the
// engine's probabilities must be exactly 0 where the mask hides a key and a
// proper distribution (summing to 1) over the keys it shows; and the tile map a
// fast kernel skips work by must agree with the mask cell by cell, or the kernel
// would skip a tile that holds a visible key (a wrong answer) or compute one
// that holds none (wasted work). The facts come from the mask's own visible()
// (core/mask.h), which every backend reads; the check never recomputes softmax.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "app/heatmap_view.h"
#include "checks/self_check.h"

namespace plab::viewer {
namespace {

struct FirstFailure {
    std::string why;
    void add(const std::string& s) {
        if (why.empty()) why = s;
    }
};

// exp(x) of a float is 0 below about -103.97 (and denormal below -87.3): a
// visible key whose score is 80 or more below its row's best may get exactly 0.
constexpr float kUnderflowGap = 80.0f;

}  // namespace

CheckResult check_mask(const MaskSnapshot& mask) {
    const int t = mask.n_tokens();
    const Mask m = mask.mask.view();
    FirstFailure f;
    if (mask.maps.empty()) f.add("no attention maps");
    for (const AttentionMap& map : mask.maps) {
        const std::string head =
            "layer " + std::to_string(map.probe.layer) + " head " + std::to_string(map.probe.head);
        if (map.scores.size() != map.probs.size() ||
            map.probs.size() != static_cast<std::size_t>(t) * t) {
            f.add(head + ": maps are not T x T");
            break;
        }
        for (int q = 0; q < t && f.why.empty(); ++q) {
            double sum = 0;
            float best = -INFINITY;
            for (int k = 0; k < t; ++k)
                if (m.visible(q, k)) best = std::max(best, map.scores[std::size_t(q) * t + k]);
            for (int k = 0; k < t; ++k) {
                const std::size_t i = static_cast<std::size_t>(q) * t + k;
                const std::string cell =
                    head + ", query " + std::to_string(q) + " key " + std::to_string(k);
                const bool visible = m.visible(q, k);
                if (!visible && map.probs[i] != 0.0f)
                    f.add(cell + ": hidden by the mask but probability " +
                          std::to_string(map.probs[i]));
                if (std::isfinite(map.scores[i]) != visible)
                    f.add(cell + (visible ? ": visible but score -inf" : ": hidden but scored"));
                if (visible && !(map.probs[i] > 0.0f) && map.scores[i] > best - kUnderflowGap)
                    f.add(cell + ": visible but probability 0");
                sum += map.probs[i];
            }
            // Each p_j is rounded once (e_j / den in float): the row sum is 1 up to
            // about T ulps of 1.0, far below 1e-4 for any T this model takes.
            if (std::fabs(sum - 1.0) > 1e-4)
                f.add(head + ", query " + std::to_string(q) + ": row sums to " +
                      std::to_string(sum));
        }
        if (!f.why.empty()) break;
    }
    // The tile map against visible() on every cell of every tile.
    int counts[3] = {0, 0, 0};
    const int tile = mask.tile;
    const int n_tiles = tile > 0 ? (t + tile - 1) / tile : 0;
    if (tile <= 0 || mask.tiles.size() != static_cast<std::size_t>(n_tiles) * n_tiles)
        f.add("tile map of " + std::to_string(mask.tiles.size()) + " tiles for " +
              std::to_string(n_tiles) + " x " + std::to_string(n_tiles));
    long long visible_cells = 0;
    for (int q = 0; q < t; ++q)
        for (int k = 0; k < t; ++k) visible_cells += m.visible(q, k) ? 1 : 0;
    for (int qt = 0; qt < n_tiles && f.why.empty(); ++qt) {
        for (int kt = 0; kt < n_tiles; ++kt) {
            int seen = 0, cells = 0;
            for (int q = qt * tile; q < std::min(t, (qt + 1) * tile); ++q)
                for (int k = kt * tile; k < std::min(t, (kt + 1) * tile); ++k, ++cells)
                    seen += m.visible(q, k) ? 1 : 0;
            const TileClass want = seen == 0       ? TileClass::empty
                                   : seen == cells ? TileClass::full
                                                   : TileClass::partial;
            const TileClass got = mask.tiles[std::size_t(qt) * n_tiles + kt];
            ++counts[static_cast<int>(got)];
            if (got != want)
                f.add("tile (" + std::to_string(qt) + ", " + std::to_string(kt) + ") holds " +
                      std::to_string(seen) + " visible of " + std::to_string(cells) +
                      " cells but is classified " + std::to_string(static_cast<int>(got)));
        }
    }
    if (mask.visible_pairs != visible_cells)
        f.add("visible pairs " + std::to_string(mask.visible_pairs) + ", the mask shows " +
              std::to_string(visible_cells) + " cells");
    // Reference backends promise bitwise chunked == full for every plan the mask allows.
    if (!mask.chunked_equals_full) f.add("chunked differs from full on cpu-ref");
    CheckResult r;
    r.ok = f.why.empty();
    r.line =
        "mask: rows sum to 1, hidden cells have probability 0 and score -inf, the tile map "
        "agrees with the mask on every cell: " +
        std::string(r.ok ? "yes" : "no") + " (mask " + mask.mask.spec() + ", " + std::to_string(t) +
        " tokens, plan " + mask.plan.to_string() + ", " + std::to_string(mask.maps.size()) +
        " heads, tile " + std::to_string(tile) + ": " + std::to_string(counts[0]) + " empty, " +
        std::to_string(counts[1]) + " partial, " + std::to_string(counts[2]) + " full; " +
        std::to_string(mask.visible_pairs) + " visible pairs of " +
        std::to_string(mask.causal_pairs) + " causal; chunked == full bitwise on cpu-ref: " +
        (mask.chunked_equals_full ? "yes" : "no") + ")";
    if (!mask.refusal.empty())
        r.line += "; plan " + mask.asked_plan.to_string() + " refused: " + mask.refusal +
                  "; ran plan " + mask.plan.to_string() + " instead";
    if (!f.why.empty()) r.line += "; first failure: " + f.why;
    return r;
}

CheckResult check_mask_view(const MaskSnapshot& mask) {
    const MaskViewSnapshot& v = mask.view;
    const int t = mask.n_tokens();
    const size_t cells = static_cast<size_t>(t) * t;
    FirstFailure f;
    auto bits_equal = [](float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; };
    char buf[160];
    // 1. The shown layer's values are that layer's: every cell's bits against a fresh probe.
    const AttentionMap* map = mask.map(v.layer, v.head);
    long long shown_differs = 0;
    if (map == nullptr || map->probe.layer != v.layer || map->probe.head != v.head ||
        map->probs.size() != cells || v.probe.size() != cells) {
        f.add("the shown map is not layer " + std::to_string(v.layer) + " head " +
              std::to_string(v.head) + "'s T x T map");
    } else {
        for (size_t i = 0; i < cells; ++i) shown_differs += !bits_equal(map->probs[i], v.probe[i]);
        if (shown_differs > 0)
            f.add(std::to_string(shown_differs) +
                  " cells of the shown map differ from a fresh probe");
    }
    std::string line = "mask view: layer " + std::to_string(v.layer) + " of " +
                       std::to_string(mask.n_layers) + " head " + std::to_string(v.head) +
                       " drawn from that layer's probe, bitwise: " + (f.why.empty() ? "yes" : "no");
    // 2. The pinned query: listed keys are the fresh row's largest, values bit for bit.
    if (v.pinned >= 0 && f.why.empty()) {
        const float* fresh = &v.probe[static_cast<size_t>(v.pinned) * t];
        const float* shown = &map->probs[static_cast<size_t>(v.pinned) * t];
        std::vector<bool> listed(t, false);
        std::string keys;
        for (size_t i = 0; i < v.pinned_keys.size(); ++i) {
            const int k = v.pinned_keys[i];
            if (k < 0 || k >= t) {
                f.add("listed key " + std::to_string(k) + " is outside the prompt");
                break;
            }
            listed[k] = true;
            if (!bits_equal(shown[k], fresh[k]))
                f.add("pinned query " + std::to_string(v.pinned) + " key " + std::to_string(k) +
                      ": listed " + std::to_string(shown[k]) + ", fresh probe " +
                      std::to_string(fresh[k]));
            if (i > 0 && fresh[k] > fresh[v.pinned_keys[i - 1]])
                f.add("pinned keys not in order of probability at key " + std::to_string(k));
            std::snprintf(buf, sizeof buf, "%s%d:%.4g", i ? ", " : "", k, fresh[k]);
            keys += buf;
        }
        // No unlisted key may beat the last listed one (or be > 0 when fewer are listed).
        const float floor_p = v.pinned_keys.empty() ? 0.0f : fresh[v.pinned_keys.back()];
        for (int k = 0; k < t && f.why.empty(); ++k)
            if (!listed[k] &&
                (static_cast<int>(v.pinned_keys.size()) < kPinnedKeys ? fresh[k] > 0.0f
                                                                      : fresh[k] > floor_p))
                f.add("key " + std::to_string(k) + " (" + std::to_string(fresh[k]) +
                      ") is not listed but beats the listed keys");
        line += "; pinned query " + std::to_string(v.pinned) + ": its " +
                std::to_string(v.pinned_keys.size()) +
                " listed keys are the fresh probe's largest, probabilities bitwise: " +
                (f.why.empty() ? "yes" : "no") + " (key:p " + keys + ")";
    }
    // 3. Side by side: highlighted == bits differ, counted from the fresh probe.
    if (!v.compare.empty() && f.why.empty()) {
        long long differ = 0, visible = 0;
        const Mask m = mask.mask.view();
        if (v.differs.size() != cells || v.compare_probs.size() != cells) {
            f.add("side by side: maps are not T x T");
        } else {
            for (int q = 0; q < t; ++q)
                for (int k = 0; k < t; ++k) {
                    const size_t i = static_cast<size_t>(q) * t + k;
                    const bool d = !bits_equal(v.probe[i], v.compare_probs[i]);
                    differ += d;
                    visible += m.visible(q, k);
                    if (d != (v.differs[i] != 0))
                        f.add("side by side: cell (" + std::to_string(q) + ", " +
                              std::to_string(k) + ") " +
                              (d ? "differs but is not highlighted" : "is highlighted but equal"));
                }
            if (differ != v.n_differs)
                f.add("side by side: " + std::to_string(v.n_differs) + " cells counted, " +
                      std::to_string(differ) + " differ");
            if (v.compare_bitwise_promised && differ > 0)
                f.add("side by side: " + std::to_string(differ) +
                      " cells differ between reference runs (bitwise promised)");
        }
        line += "; side by side " + mask.backend + " plan " + mask.plan.to_string() + " vs " +
                v.compare + ": highlighted cells are the cells whose bits differ: " +
                (f.why.empty() ? "yes" : "no") + " (" + std::to_string(differ) + " of " +
                std::to_string(visible) + " visible cells differ" +
                (v.compare_bitwise_promised ? ", bitwise promised: reference backends" : "") + ")";
        if (!v.compare_refusal.empty()) line += "; compare plan refused: " + v.compare_refusal;
    }
    CheckResult r;
    r.ok = f.why.empty();
    r.line = line + (r.ok ? "" : "; first failure: " + f.why);
    return r;
}

}  // namespace plab::viewer
