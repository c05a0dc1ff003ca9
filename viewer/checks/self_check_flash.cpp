// The FlashAttention scene's self-check (see self_check.h), lesson 17.
//
// What it holds the walk to, without running softmax again: the online softmax's
// bookkeeping from step to step (each row's m_old is the m the step before left, the
// max only grows, the rescale is exp(m_old - m), l never drops below the 1 its max's own
// key adds), each tile's class against the scores the mask left, the counts the walk
// reports, the table's last row equal to each output, and on the toy the whole
// softmax's answers equal to the means worked out by hand. A model head has no answers
// worked out by hand: its walk is held to the same bookkeeping inside each warp group's
// 256-key segment (where the kernel keeps one m, l and acc per group), to the run's own
// counts, and to what run_flash_head measured (the CPU port equal to the emulated kernel
// where it read the kernel's states, the output within the tolerance of cpu-ref's).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>
#include <vector>

#include "app/flash_view.h"
#include "checks/known_mean.h"
#include "checks/self_check.h"
#include "core/strict_math.h"
#include "toy/flash_order.h"
#include "toy/rounding.h"

namespace plab::viewer {
namespace {

// The first reason the check failed, for its line.
struct FlashFailure {
    std::string why;
    void add(const std::string& s) {
        if (why.empty()) why = s;
    }
};

bool flash_same_bits(float a, float b) {
    return std::memcmp(&a, &b, sizeof a) == 0;
}

// The toy's answer at query p worked out by hand (checks/known_mean.h): every key the
// walk shows it (a finite score) with the same score, the mean of their values.
KnownMean flash_known(const FlashWalk& w, const ToyInput& in, int p) {
    KnownMean k;
    const float* row = w.scores.data() + static_cast<std::size_t>(p) * w.n_keys;
    float first = 0;
    for (int j = 0; j < w.n_keys; ++j) {
        if (std::isinf(row[j])) continue;  // hidden by the mask
        const float v = in.values[static_cast<std::size_t>(j)];
        if (k.count == 0) first = row[j];
        if (!flash_same_bits(row[j], first) || v != std::floor(v)) return {};
        k.sum += static_cast<long long>(v);
        ++k.count;
    }
    if (k.count == 0 || std::llabs(k.sum) >= (1LL << 24)) return {};
    k.known = true;
    return k;
}

// Visible (finite-score) cells of a step's tile, and all its cells.
void flash_tile_cells(const FlashWalk& w, const FlashWalkStep& s, int& visible, int& all) {
    visible = all = 0;
    for (int q = s.query_lo; q <= s.query_hi; ++q)
        for (int k = s.key_lo; k <= s.key_hi; ++k) {
            ++all;
            visible += !std::isinf(w.scores[static_cast<std::size_t>(q) * w.n_keys + k]);
        }
}

// 1. The walk's shape, and each step's tile inside the grid and of its class.
void flash_check_tiles(const FlashWalk& w, FlashFailure& f) {
    if (w.n_queries <= 0 || w.n_keys <= 0 ||
        w.scores.size() != static_cast<std::size_t>(w.n_queries) * w.n_keys ||
        w.output.size() != static_cast<std::size_t>(w.n_queries) ||
        w.full.size() != w.output.size() || w.ulps.size() != w.output.size()) {
        f.add("the walk's grid, outputs and ulps do not have n_queries x n_keys and n_queries");
        return;
    }
    if (w.chunk_starts.empty() || w.chunk_starts.front() != 0 ||
        !std::is_sorted(w.chunk_starts.begin(), w.chunk_starts.end()))
        f.add("chunk starts do not begin at 0 and grow");
    for (std::size_t i = 0; i < w.steps.size(); ++i) {
        const FlashWalkStep& s = w.steps[i];
        const std::string where = "step " + std::to_string(i + 1);
        if (s.key_lo < 0 || s.key_hi >= w.n_keys || s.key_lo > s.key_hi ||
            s.key_hi - s.key_lo + 1 > w.key_tile || s.query_lo < 0 || s.query_hi >= w.n_queries ||
            s.query_lo > s.query_hi) {
            f.add(where + ": its tile is not inside the grid, or wider than the key tile");
            continue;
        }
        int visible = 0, all = 0;
        flash_tile_cells(w, s, visible, all);
        const bool agrees = s.kind == TileClass::empty  ? visible == 0
                            : s.kind == TileClass::full ? visible == all
                                                        : visible > 0 && visible < all;
        if (!agrees)
            f.add(where + ": a tile classed " +
                  (s.kind == TileClass::empty  ? "empty"
                   : s.kind == TileClass::full ? "full"
                                               : "partial") +
                  " holds " + std::to_string(visible) + " of " + std::to_string(all) +
                  " visible cells");
        if ((s.kind == TileClass::empty) != s.rows.empty())
            f.add(where + ": an empty tile changes no row, every other tile changes its rows");
        for (const FlashWalkRow& r : s.rows)
            if (r.query < s.query_lo || r.query > s.query_hi)
                f.add(where + ": a row outside its query tile");
    }
}

// The rescale a row must hold: exp(m_old - m), and 0 before the first key (m_old = -inf:
// nothing summed yet). The toy takes exp with core/strict_math.h, as begin_tile does: the
// same bits. A model head's kernel may take exp another way: within 1e-6.
bool flash_rescale_ok(const FlashWalkRow& r, bool exact) {
    if (std::isinf(r.m_old)) return r.rescale == 0.0f;
    const float want = strict_expf(strict_sub(r.m_old, r.m));
    return exact ? flash_same_bits(r.rescale, want) : std::fabs(r.rescale - want) <= 1e-6f;
}

// 2. Each query's rows, step after step: the online softmax's bookkeeping.
void flash_check_rows(const FlashWalk& w, FlashFailure& f, int& rescaled, int& skipped) {
    std::vector<float> m(static_cast<std::size_t>(std::max(0, w.n_queries)), -INFINITY);
    std::vector<bool> seen(m.size(), false);
    rescaled = skipped = 0;
    for (std::size_t i = 0; i < w.steps.size(); ++i) {
        skipped += w.steps[i].kind == TileClass::empty;
        for (const FlashWalkRow& r : w.steps[i].rows) {
            if (r.query < 0 || r.query >= w.n_queries) continue;  // flash_check_tiles says so
            const std::size_t q = static_cast<std::size_t>(r.query);
            const std::string where =
                "step " + std::to_string(i + 1) + ", query " + std::to_string(r.query);
            if (!flash_same_bits(r.m_old, m[q]))
                f.add(where + ": m_old is not the m the step before left");
            if (!(r.m >= r.m_old)) f.add(where + ": the running max went down");
            if (!flash_rescale_ok(r, w.source == "toy"))
                f.add(where + ": rescale " + std::to_string(r.rescale) + " is not exp(m_old - m)");
            if (r.rescaled != (seen[q] && r.rescale < 1))
                f.add(where + ": 'rescaled' does not say whether a later tile raised the max");
            if (!(r.l >= 1.0f) || !std::isfinite(r.l) || !std::isfinite(r.out))
                f.add(where + ": l below 1 (the max's own key adds exp(0) = 1) or not finite");
            rescaled += r.rescaled;
            m[q] = r.m;
            seen[q] = true;
        }
    }
    if (rescaled != w.rescales || skipped != w.skipped)
        f.add("the walk counts " + std::to_string(w.rescales) + " rescales and " +
              std::to_string(w.skipped) + " skipped tiles; its steps hold " +
              std::to_string(rescaled) + " and " + std::to_string(skipped));
}

// 3. The table after the last step shows each output; the ulps are the outputs' against
//    the whole softmax; on the toy, the whole softmax gives the means known by hand.
void flash_check_outputs(const FlashSnapshot& fl, FlashFailure& f, std::string& known_list,
                         int& bitwise) {
    const FlashWalk& w = fl.walk;
    const std::vector<FlashRowState> last = flash_rows_after(w, static_cast<int>(w.steps.size()));
    const bool toy = w.source == "toy" && fl.input.n_tokens() == w.n_queries;
    bitwise = 0;
    for (int p = 0; p < w.n_queries; ++p) {
        const std::size_t i = static_cast<std::size_t>(p);
        const std::string where = "query " + std::to_string(p);
        if (last[i].reached && !flash_same_bits(last[i].row.out, w.output[i]))
            f.add(where + ": the table's last output is not the walk's output");
        if (w.ulps[i] != ulps_between(w.output[i], w.full[i]))
            f.add(where + ": the ulps are not those between the output and the whole softmax");
        bitwise += w.ulps[i] == 0;
        const KnownMean k = toy ? flash_known(w, fl.input, p) : KnownMean{};
        if (!k.known) continue;
        known_list += (known_list.empty() ? "" : ", ") + k.text();
        if (!flash_same_bits(w.full[i], k.value()))
            f.add(where + ": the whole softmax gives " + std::to_string(w.full[i]) +
                  ", not the mean " + k.text());
        if (ulps_between(w.output[i], k.value()) != w.ulps[i])
            f.add(where + ": the output is not the " + std::to_string(w.ulps[i]) + " ulps from " +
                  k.text() + " the walk reports");
    }
}

// A model head's rescale: exp(m_old - m) as the strict expf takes it, within 1e-6 of it
// relative (the kernel takes the library's expf, which may round its last bit otherwise);
// 0 on a warp group's first tile of a segment (m_old = -inf: nothing summed yet).
bool flash_head_rescale_ok(const FlashWalkRow& r) {
    if (std::isinf(r.m_old)) return r.rescale == 0.0f;
    const float want = strict_expf(strict_sub(r.m_old, r.m));
    return std::fabs(r.rescale - want) <= 1e-6f * want + std::numeric_limits<float>::min();
}

// 2'. A model head's rows, step after step. The kernel's two warp groups keep their own
//     m, l and acc (group 0 the even key tiles, group 1 the odd ones), started afresh at
//     each segment of flash_segment_keys keys and merged at its end: a row's chain runs
//     within one (group, segment), and each one starts from m = -inf.
void flash_check_head_rows(const FlashWalk& w, FlashFailure& f, int& rescaled, int& skipped) {
    const int segment_keys = flash_segment_keys(std::max(1, w.key_tile));
    std::map<std::tuple<int, int, int>, float> left;  // (query, group, segment) -> its last m
    rescaled = skipped = 0;
    for (std::size_t i = 0; i < w.steps.size(); ++i) {
        const FlashWalkStep& s = w.steps[i];
        skipped += s.kind == TileClass::empty;
        const int segment = s.key_lo / segment_keys;
        for (const FlashWalkRow& r : s.rows) {
            const std::string where =
                "step " + std::to_string(i + 1) + ", query " + std::to_string(r.query);
            const auto it = left.find({r.query, s.group, segment});
            const float before = it == left.end() ? -INFINITY : it->second;
            if (!flash_same_bits(r.m_old, before))
                f.add(where + ": m_old is not the m its warp group left in this segment");
            if (!(r.m >= r.m_old)) f.add(where + ": the running max went down");
            if (!flash_head_rescale_ok(r))
                f.add(where + ": rescale " + std::to_string(r.rescale) +
                      " is not exp(m_old - m) within 1e-6");
            if (r.rescaled != (!std::isinf(r.m_old) && r.rescale < 1))
                f.add(where + ": 'rescaled' does not say whether a later tile raised the max");
            if (!(r.l >= 1.0f) || !std::isfinite(r.l) || !std::isfinite(r.out))
                f.add(where + ": l below 1 (the max's own key adds exp(0) = 1) or not finite");
            rescaled += r.rescaled;
            left[{r.query, s.group, segment}] = r.m;
        }
    }
    if (rescaled != w.rescales || skipped != w.skipped)
        f.add("the walk counts " + std::to_string(w.rescales) + " rescales and " +
              std::to_string(w.skipped) + " skipped tiles; its steps hold " +
              std::to_string(rescaled) + " and " + std::to_string(skipped));
}

// 3'. A model head's outputs: the ulps are the outputs' against cpu-ref's whole softmax
//     (first components, so never more than the run's largest over every component), the
//     tiles of each class are the run's counts, and what the run measured holds: the
//     output within the tolerance of cpu-ref's, and where the kernel's states were read,
//     the CPU port's equal to them and its output the gpu backend's, bit for bit.
void flash_check_head_outputs(const FlashSnapshot& fl, FlashFailure& f, int& bitwise,
                              long long& most_ulps) {
    const FlashWalk& w = fl.walk;
    const FlashHeadSummary& h = fl.head;
    bitwise = 0;
    most_ulps = 0;
    for (int p = 0; p < w.n_queries; ++p) {
        const std::size_t i = static_cast<std::size_t>(p);
        if (w.ulps[i] != ulps_between(w.output[i], w.full[i]))
            f.add("query " + std::to_string(p) +
                  ": the ulps are not those between the output and the whole softmax");
        bitwise += w.ulps[i] == 0;
        most_ulps = std::max(most_ulps, w.ulps[i]);
    }
    if (most_ulps > h.vs_reference.max_ulps)
        f.add("an output is " + std::to_string(most_ulps) + " ulps from cpu-ref's, the run says " +
              std::to_string(h.vs_reference.max_ulps) + " at most");
    long long full = 0, partial = 0;
    for (const FlashWalkStep& s : w.steps) {
        full += s.kind == TileClass::full;
        partial += s.kind == TileClass::partial;
    }
    if (full != h.full || partial != h.partial || w.skipped != h.skipped + h.unreached)
        f.add("the steps' tile classes are not the run's counts of full, partial and skipped");
    if (!h.vs_reference.within())
        f.add("the output is outside the tolerance of cpu-ref's whole softmax (" +
              std::to_string(h.vs_reference.worst) + " of it)");
    if (h.recorded && !h.port_matches_kernel)
        f.add("the CPU port's states are not the emulated kernel's, bit for bit");
    if (h.recorded && h.vs_gpu.max_ulps != 0)
        f.add("at the kernel's own tile the walk's output is not the gpu backend's bits");
}

// The check of a model head's walk (check_flash when fl.model_head).
CheckResult check_flash_head(const FlashSnapshot& fl) {
    const FlashWalk& w = fl.walk;
    const FlashHeadSummary& h = fl.head;
    FlashFailure f;
    int rescaled = 0, skipped = 0, bitwise = 0;
    long long most_ulps = 0;
    flash_check_tiles(w, f);
    if (f.why.empty()) {
        flash_check_head_rows(w, f, rescaled, skipped);
        flash_check_head_outputs(fl, f, bitwise, most_ulps);
    }
    const std::string tile = "tile " + std::to_string(w.key_tile) +
                             (w.key_tile == h.kernel_key_tile
                                  ? std::string(" (the kernel's)")
                                  : " (the kernel's is " + std::to_string(h.kernel_key_tile) + ")");
    const std::string states =
        h.recorded ? std::string(
                         "states read from the emulated kernel, output vs the gpu "
                         "backend bitwise equal: ") +
                         (h.vs_gpu.max_ulps == 0 ? "yes" : "no")
                   : std::string("states from the CPU port of its order (not recorded)");
    CheckResult r;
    r.ok = f.why.empty();
    r.line =
        "flash: a model head in the gpu kernel's order: every step's rows inside its query "
        "tile, tile classes agree with the mask, within each warp group's segment m_old is "
        "the m it left and m never falls, rescale = exp(m_old - m) within 1e-6, empty tiles "
        "change no row, " +
        std::string(h.recorded ? "the CPU port equals the emulated kernel bit for bit, " : "") +
        "the output within the tolerance of cpu-ref's whole softmax: " + (r.ok ? "yes" : "no") +
        " (" + w.source + ", " + tile + ", mask " + w.mask + ", " + std::to_string(w.steps.size()) +
        " steps, " + std::to_string(w.rescales) + " rescales, " + std::to_string(w.skipped) +
        " skipped, " + std::to_string(bitwise) + " of " + std::to_string(w.n_queries) +
        " outputs bitwise equal to cpu-ref, at most " + std::to_string(most_ulps) +
        " ulps apart; " + states + ")" + (f.why.empty() ? "" : "; first failure: " + f.why);
    return r;
}

}  // namespace

CheckResult check_flash(const FlashSnapshot& fl) {
    if (fl.model_head) return check_flash_head(fl);
    const FlashWalk& w = fl.walk;
    FlashFailure f;
    int rescaled = 0, skipped = 0, bitwise = 0;
    std::string known;
    flash_check_tiles(w, f);
    if (f.why.empty()) {
        flash_check_rows(w, f, rescaled, skipped);
        flash_check_outputs(fl, f, known, bitwise);
    }
    CheckResult r;
    r.ok = f.why.empty();
    r.line =
        "flash: m, l and the rescale exp(m_old - m) chain step to step, tile classes agree "
        "with the mask, the table's last row is each output, the whole softmax gives the "
        "means known by hand (" +
        (known.empty() ? std::string("none known") : known) +
        ") within the ulps the walk reports: " + (r.ok ? "yes" : "no") + " (" + w.source +
        ", tile " + std::to_string(w.key_tile) + ", mask " + w.mask + ", " +
        std::to_string(w.steps.size()) + " steps, " + std::to_string(w.rescales) + " rescales, " +
        std::to_string(w.skipped) + " skipped, " + std::to_string(bitwise) + " of " +
        std::to_string(w.n_queries) + " outputs bitwise equal)" +
        (f.why.empty() ? "" : "; first failure: " + f.why);
    return r;
}

}  // namespace plab::viewer
