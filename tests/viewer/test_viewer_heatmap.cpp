// The mask panel's heatmap for long prompts, layer by layer and side by side (issue 17,
// items 3, 4 and 6), without a window.
//
// heatmap_view.h is pure arithmetic: zooming about the pointer keeps the cell under it,
// panning follows the drag, every view stays inside the grid, the pixels of the square
// cover the cells in view without a gap, labels never overlap, and top_keys agrees with
// a full sort (the oracle). The view's self-check (check_mask_view) passes on the engine's
// answer for every layer, and fails when the shown map is another layer's, when the
// pinned keys are out of order or miss a larger key, and when a highlighted cell does not
// differ (or a differing one is not highlighted) side by side.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "app/controller.h"
#include "app/heatmap_view.h"
#include "checks/self_check.h"
#include "test_util.h"
#include "tiny_model.h"

namespace plab::viewer {
using plab::test::same_bits;
namespace {

// Pixel positions round-trip through cell coordinates in float: a couple of ulps of a
// coordinate up to 512 (ulp 6.1e-5 cells) times up to 150 px per cell (span >= 4 cells over
// about 600 px) is about 0.01 px; 0.02 px is far below what changes a drawn pixel.
constexpr float kPixelTol = 0.02f;

HeatmapView random_view(std::mt19937& rng, int t) {
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    HeatmapView v;
    v.span = std::min<float>(t, kMinSpanCells) + u(rng) * (t - std::min<float>(t, kMinSpanCells));
    v.x0 = u(rng) * (t - v.span);
    v.y0 = u(rng) * (t - v.span);
    return v;
}

void require_inside(const HeatmapView& v, int t) {
    INFO("view x0 " << v.x0 << " y0 " << v.y0 << " span " << v.span << " of " << t);
    REQUIRE(v.span >= std::min<float>(t, kMinSpanCells));
    REQUIRE(v.span <= t);
    REQUIRE(v.x0 >= 0);
    REQUIRE(v.y0 >= 0);
    REQUIRE(v.x0 + v.span <= t + 1e-3f);
    REQUIRE(v.y0 + v.span <= t + 1e-3f);
}

}  // namespace

TEST_CASE("heatmap view: fit, clamping and the screen-cell round trip", "[viewer][heatmap]") {
    std::mt19937 rng(17);
    for (int t : {1, 7, 33, 129, 512}) {
        const HeatmapView fit = fit_view(t);
        REQUIRE(fit.span == t);
        REQUIRE(zoom_of(fit, t) == 1.0f);
        const float side = 601;  // odd: pixels and cells never line up by accident
        for (int i = 0; i < 50; ++i) {
            const HeatmapView v = random_view(rng, t);
            require_inside(v, t);
            const float px = std::uniform_real_distribution<float>(0, side)(rng);
            const float py = std::uniform_real_distribution<float>(0, side)(rng);
            const CellPoint c = screen_to_cell(v, side, px, py);
            REQUIRE(std::fabs(key_to_screen(v, side, c.k) - px) < kPixelTol);
            REQUIRE(std::fabs(query_to_screen(v, side, c.q) - py) < kPixelTol);
            // Out-of-range views come back inside, spans too deep or too wide clamped.
            HeatmapView wild = v;
            wild.x0 = -3 * t;
            wild.y0 = 5.0f * t;
            wild.span = 0.01f;
            require_inside(clamp_view(wild, t), t);
            wild.span = 10.0f * t;
            REQUIRE(clamp_view(wild, t).span == t);
        }
    }
}

TEST_CASE("heatmap view: the wheel zooms about the pointer, a drag pans", "[viewer][heatmap]") {
    std::mt19937 rng(4711);
    const int t = 512;
    const float side = 577;
    for (int i = 0; i < 200; ++i) {
        const HeatmapView v = random_view(rng, t);
        const float px = std::uniform_real_distribution<float>(0, side)(rng);
        const float py = std::uniform_real_distribution<float>(0, side)(rng);
        const float factor = i % 2 ? 1.25f : 0.8f;
        const HeatmapView z = zoom_about(v, t, side, factor, px, py);
        require_inside(z, t);
        const CellPoint before = screen_to_cell(v, side, px, py);
        const CellPoint after = screen_to_cell(z, side, px, py);
        // Unless clamping moved the window (a zoom out at the grid's edge), the cell
        // under the pointer stays under it.
        const float want_span = std::clamp(v.span / factor, kMinSpanCells, float(t));
        const float want_x0 = before.k - px * want_span / side;
        const float want_y0 = before.q - py * want_span / side;
        const bool clamped =
            want_x0 < 0 || want_y0 < 0 || want_x0 + want_span > t || want_y0 + want_span > t;
        if (!clamped) {
            // Cell coordinates up to 512: a few ulps (6.1e-5 each) of rounding.
            REQUIRE(std::fabs(after.k - before.k) < 1e-3f);
            REQUIRE(std::fabs(after.q - before.q) < 1e-3f);
        }
        REQUIRE(z.span == Approx(want_span));
        // A drag of (dx, dy) moves the content by exactly that many pixels when it fits.
        const HeatmapView p = pan_by(z, t, side, 7.0f, -5.0f);
        require_inside(p, t);
        const float dx = key_to_screen(p, side, 100.0f) - key_to_screen(z, side, 100.0f);
        const float dy = query_to_screen(p, side, 100.0f) - query_to_screen(z, side, 100.0f);
        const bool room_x = z.x0 - 7.0f * z.span / side >= 0;
        const bool room_y = z.y0 + 5.0f * z.span / side + z.span <= t;
        if (room_x) REQUIRE(dx == Approx(7.0f).margin(kPixelTol));
        if (room_y) REQUIRE(dy == Approx(-5.0f).margin(kPixelTol));
    }
    // zoom_to centres the asked cell unless the grid's edge is nearer than half a view.
    const HeatmapView c = zoom_to(t, 8, 300, 280);
    REQUIRE(c.span == Approx(64));
    REQUIRE(c.y0 + c.span / 2 == Approx(300));
    REQUIRE(c.x0 + c.span / 2 == Approx(280));
    const HeatmapView edge = zoom_to(t, 8, 510, 2);
    REQUIRE(edge.y0 == Approx(t - 64));
    REQUIRE(edge.x0 == 0);
}

TEST_CASE("heatmap view: the square's pixels cover the cells in view without a gap",
          "[viewer][heatmap]") {
    std::mt19937 rng(99);
    for (int t : {7, 33, 512})
        for (int side : {64, 301, 600})
            for (int i = 0; i < 20; ++i) {
                const HeatmapView v = i == 0 ? fit_view(t) : random_view(rng, t);
                const CellRange in_view = visible_cells(v.x0, v.span, t);
                int covered_to = in_view.first;
                for (int p = 0; p < side; ++p) {
                    const CellRange r = cells_of_pixel(v.x0, v.span, t, float(side), p);
                    INFO("t " << t << " side " << side << " pixel " << p << " cells " << r.first
                              << ".." << r.last);
                    REQUIRE(r.first < r.last);
                    REQUIRE(r.first <= covered_to);  // no cell skipped between pixels
                    covered_to = std::max(covered_to, r.last);
                }
                REQUIRE(covered_to >= in_view.last);
            }
}

TEST_CASE("heatmap labels: round steps that never overlap", "[viewer][heatmap]") {
    for (float cell : {0.3f, 1.0f, 2.7f, 5.0f, 9.9f, 19.2f, 40.0f}) {
        const float label = 19.2f;
        const int n = label_every(cell, label);
        INFO("cell " << cell << " every " << n);
        REQUIRE(n * cell >= label);
        int lower = 1;  // the next smaller round step would overlap
        for (int d = 1; d <= n; d *= 10)
            for (int m : {1, 2, 5})
                if (m * d < n) lower = m * d;
        if (n > 1) REQUIRE(lower * cell < label);
    }
    REQUIRE(label_every(0.0f, 10) > 1000);
}

TEST_CASE("top_keys agrees with a full sort", "[viewer][heatmap]") {
    std::mt19937 rng(5);
    for (int t : {1, 7, 33, 129}) {
        std::vector<float> row(t);
        for (float& p : row) {
            const int r = static_cast<int>(rng() % 10);
            p = r < 2 ? 0.0f : r < 4 ? 0.125f : std::uniform_real_distribution<float>(0, 1)(rng);
        }
        std::vector<int> all(t);
        std::iota(all.begin(), all.end(), 0);
        std::stable_sort(all.begin(), all.end(), [&](int a, int b) { return row[a] > row[b]; });
        all.erase(std::remove_if(all.begin(), all.end(), [&](int k) { return row[k] == 0; }),
                  all.end());
        all.resize(std::min<size_t>(all.size(), kPinnedKeys));
        REQUIRE(top_keys(row.data(), t, kPinnedKeys) == all);
    }
}

namespace {

ViewerState view_state() {
    ViewerState s;
    s.prompt = "the cat sat on the mat";  // 22 bytes + BOS = 23 tokens
    s.chunks = "8";
    s.mask_tile = 4;
    s.attn_layer = 1;
    s.attn_head = 2;
    s.pinned_query = 15;
    return s;
}

MaskSnapshot refreshed(Controller& ctrl, const ViewerState& st) {
    MaskSnapshot m;
    ctrl.refresh_mask(st, m);
    m.ready = true;
    bool failed = false;
    ctrl.refresh_mask_view(st, m, false, failed);
    INFO(m.view.error);
    REQUIRE(m.view.ready);
    return m;
}

void require_view_fails(const MaskSnapshot& bad, const char* why) {
    const CheckResult r = check_mask_view(bad);
    INFO(r.line);
    REQUIRE_FALSE(r.ok);
    REQUIRE(r.line.find(why) != std::string::npos);
}

}  // namespace

TEST_CASE("each layer shown is that layer's fresh probe", "[viewer][heatmap]") {
    Controller ctrl(plab::test::tiny_viewer_model());
    ViewerState st = view_state();
    st.pinned_query = -1;
    MaskSnapshot m;
    ctrl.refresh_mask(st, m);
    m.ready = true;
    for (int layer = 0; layer < m.n_layers; ++layer) {
        st.attn_layer = layer;
        bool failed = false;
        ctrl.refresh_mask_view(st, m, false, failed);
        const CheckResult r = check_mask_view(m);
        INFO(r.line);
        REQUIRE(r.ok);
        REQUIRE_FALSE(failed);
        REQUIRE(m.view.layer == layer);
        // The fresh probe tells layers apart: it equals exactly one layer's map of this head.
        int equal = 0;
        for (int l = 0; l < m.n_layers; ++l) equal += same_bits(m.map(l, 2)->probs, m.view.probe);
        REQUIRE(equal == 1);
    }
    // The shown map swapped with another layer's (map() indexing the wrong layer) fails.
    MaskSnapshot bad = m;
    std::swap(bad.maps[0 * m.n_heads + 2].probs, bad.maps[1 * m.n_heads + 2].probs);
    require_view_fails(bad, "cells of the shown map differ from a fresh probe");
}

TEST_CASE("the pinned query's keys are the fresh probe's largest", "[viewer][heatmap]") {
    Controller ctrl(plab::test::tiny_viewer_model());
    const MaskSnapshot m = refreshed(ctrl, view_state());
    const CheckResult r = check_mask_view(m);
    INFO(r.line);
    REQUIRE(r.ok);
    REQUIRE(m.view.pinned == 15);
    REQUIRE(m.view.pinned_keys.size() == kPinnedKeys);  // 16 visible keys, all above 0
    REQUIRE(r.line.find("pinned query 15: its 8 listed keys") != std::string::npos);
    {  // Two listed keys out of order.
        MaskSnapshot bad = m;
        std::swap(bad.view.pinned_keys[0], bad.view.pinned_keys[1]);
        require_view_fails(bad, "not in order of probability");
    }
    {  // The largest key left out, the ninth listed instead.
        MaskSnapshot bad = m;
        const std::vector<int> nine = top_keys(&m.view.probe[15 * m.n_tokens()], m.n_tokens(), 9);
        bad.view.pinned_keys.erase(bad.view.pinned_keys.begin());
        bad.view.pinned_keys.push_back(nine[8]);
        require_view_fails(bad, "is not listed but beats the listed keys");
    }
    {  // A pin past the prompt is one line.
        ViewerState st = view_state();
        st.pinned_query = 99;
        MaskSnapshot out;
        ctrl.refresh_mask(st, out);
        out.ready = true;
        bool failed = false;
        ctrl.refresh_mask_view(st, out, false, failed);
        REQUIRE(failed);
        REQUIRE(out.view.error == "--pin-query 99: the prompt has 23 tokens (rows 0..22)");
    }
}

TEST_CASE("side by side: highlighted cells are exactly the cells whose bits differ",
          "[viewer][heatmap]") {
    Controller ctrl(plab::test::tiny_viewer_model());
    ViewerState st = view_state();
    st.compare_chunks = "5";  // 5,5,5,5,3 against 8,8,7
    const MaskSnapshot m = refreshed(ctrl, st);
    CheckResult r = check_mask_view(m);
    INFO(r.line);
    REQUIRE(r.ok);
    // cpu-ref promises bitwise across chunkings: nothing to highlight.
    REQUIRE(m.view.compare_bitwise_promised);
    REQUIRE(m.view.n_differs == 0);
    REQUIRE(m.view.compare_plan.to_string() == "5,5,5,5,3");
    {  // A highlighted cell that does not differ.
        MaskSnapshot bad = m;
        bad.view.differs[15 * 23 + 3] = 1;
        bad.view.n_differs = 1;
        require_view_fails(bad, "cell (15, 3) is highlighted but equal");
    }
    {  // A cell that differs (one ulp) but is not highlighted; and one that is: on
        // reference backends even that breaks the promise.
        MaskSnapshot bad = m;
        float& p = bad.view.compare_probs[15 * 23 + 3];
        p = std::nextafter(p, 2.0f);
        require_view_fails(bad, "cell (15, 3) differs but is not highlighted");
        bad.view.differs[15 * 23 + 3] = 1;
        bad.view.n_differs = 1;
        require_view_fails(bad, "differ between reference runs (bitwise promised)");
    }
    // Against the fast cpu backend (Eigen's reduction order) some cells may differ in
    // their last bits: the check holds the highlight to them whatever their number.
    st.compare_chunks.clear();
    st.compare_backend = "cpu";
    const MaskSnapshot fast = refreshed(ctrl, st);
    r = check_mask_view(fast);
    INFO(r.line);
    REQUIRE(r.ok);
    REQUIRE_FALSE(fast.view.compare_bitwise_promised);
    long long differ = 0;
    for (size_t i = 0; i < fast.view.compare_probs.size(); ++i)
        differ += std::memcmp(&fast.map(1, 2)->probs[i], &fast.view.compare_probs[i], 4) != 0;
    REQUIRE(fast.view.n_differs == differ);
    WARN("cpu-ref vs cpu, layer 1 head 2, 23 tokens: " << differ << " cells' bits differ");
}

}  // namespace plab::viewer
