#include "backends/cpu_fast/cpu_gemm.h"

#include <Eigen/Core>
#include <algorithm>

#include "core/error.h"

namespace plab::cpu_gemm {
namespace {

using Packet = Eigen::internal::packet_traits<float>::type;
constexpr int kLanes = Eigen::internal::packet_traits<float>::size;
constexpr int kPanel = 2 * kLanes;  // columns per panel: two registers
// The main micro-tile: 6 rows x kMainPanels panels. With AVX-512 (32 vector
// registers) 6 x 2 panels = 24 accumulators + 4 of B + 1 broadcast; with AVX2
// (16 registers) 6 x 1 panel = 12 + 2 + 1. Fewer rows (a small chunk, a decode
// step) take more panels at once, so enough independent chains hide the FMA
// latency. None of this changes a bit of the result: only which outputs are
// computed side by side.
constexpr int kRows = 6;
constexpr int kMainPanels = kLanes >= 16 ? 2 : 1;
constexpr int kLine = 64;  // bytes per cache line

constexpr int panels_for(int rows) {
    return rows == 1 ? 4 : rows == 2 ? 3 : rows == 3 ? 2 : rows == 4 ? kMainPanels : 1;
}

// An empty asm that takes v in a vector register: the compiler can no
// longer fold v's load into the instructions that use it. No arithmetic.
inline void keep_in_register(Packet& v) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __asm__("" : "+v"(v));
#else
    (void)v;
#endif
}

// Cache lines of B that a tile asks for ahead of their use while it computes
// (see gemm): `lines` lines from `at`, `per` of them every `every` k steps.
struct Ahead {
    const char* at = nullptr;
    int lines = 0, every = 1, per = 1;
};

// R rows times P panels from panel p: each output one FMA chain over k.
// c points at the tile's first output (its first row, panel p's first column),
// a at the tile's first row of A. LastHalves: vector registers of the last
// panel that are computed — 1 when its real columns fit in the first (B.n
// past a multiple of kPanel by at most kLanes, e.g. attention's O = P·V with
// Dh = 48 in panels of 32: without it a quarter of that product was padding).
// WithAhead: the tile also asks for `ahead`'s lines (prefetcht0), spread over
// its k loop; loads and FMAs are the same.
template <int R, int P, int LastHalves = 2, bool WithAhead = false>
inline void tile(float* c, std::size_t ldc, const float* a, std::size_t lda, const Panels& b, int p,
                 Ahead ahead = {}) {
    // Halves of panel q computed: both, except possibly in the last panel.
    constexpr auto halves = [](int q) { return q == P - 1 ? LastHalves : 2; };
    using namespace Eigen::internal;
    Packet acc[R][P][2];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
        for (int q = 0; q < P; ++q) acc[r][q][0] = acc[r][q][1] = pset1<Packet>(0.0f);
    const float* bp = b.data + std::size_t(p) * b.panel_stride;
    const float* ar = a;
    // One k step of R < kRows rows (decode steps, batched decode, a chunk's
    // last 1-5 rows). GCC 12 folds B's load into each row's FMA here
    // (vfmadd231ps (mem), ...), reading B R times per k, and a 4-row tile
    // took longer than a 6-row one. So: broadcast A's values, load each
    // vector of B once into a register the compiler must keep
    // (keep_in_register), and let every row use it in turn. The same FMAs
    // into the same accumulators in the same k order: the same bits. (32 rows
    // x k 512 x 64 panels: the 2-row remainder 11.2 -> 8.6 us, two 4-row
    // blocks 45 -> 25 us.)
    const auto few_rows_step = [&](int k) __attribute__((always_inline)) {
        const float* bk = bp + std::size_t(k) * b.row_stride;
        Packet av[R];
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) av[r] = pset1<Packet>(ar[r * lda + k]);
#pragma GCC unroll 16
        for (int q = 0; q < P; ++q) {
#pragma GCC unroll 16
            for (int h = 0; h < 2; ++h) {
                if (h >= halves(q)) continue;  // known at compile time once unrolled
                Packet bv = ploadu<Packet>(bk + q * b.panel_stride + h * kLanes);
                keep_in_register(bv);
#pragma GCC unroll 16
                for (int r = 0; r < R; ++r) acc[r][q][h] = pmadd(av[r], bv, acc[r][q][h]);
            }
        }
    };
    // One k step of the main tile: load B's vectors, then each row's value
    // broadcast and multiplied into them.
    const auto main_step = [&](int k) __attribute__((always_inline)) {
        const float* bk = bp + std::size_t(k) * b.row_stride;
        Packet bv[P][2];
#pragma GCC unroll 16
        for (int q = 0; q < P; ++q) {
#pragma GCC unroll 16
            for (int h = 0; h < 2; ++h)
                if (h < halves(q)) bv[q][h] = ploadu<Packet>(bk + q * b.panel_stride + h * kLanes);
        }
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            const Packet av = pset1<Packet>(ar[r * lda + k]);
#pragma GCC unroll 16
            for (int q = 0; q < P; ++q) {
#pragma GCC unroll 16
                for (int h = 0; h < 2; ++h)
                    if (h < halves(q)) acc[r][q][h] = pmadd(av, bv[q][h], acc[r][q][h]);
            }
        }
    };
    if constexpr (R < kRows) {
        for (int k = 0; k < b.k; ++k) few_rows_step(k);
    } else {
        // With ahead: `per` lines asked for at the start of every run of
        // `every` k steps, until they are all asked for. The runs keep that
        // bookkeeping out of the innermost loop. Inside it (a check of k
        // against the next step that asks), with AVX2's 16 registers, GCC 12
        // kept the six row pointers of A and B's stride on the stack: 8
        // loads more per k step of 12 FMAs, and on a Zen 3 core the loads,
        // not the FMAs, set the pace. One thread, B packed and hot, three
        // interleaved runs on an AVX2 EPYC: 132 x 864 x 288 40-64 -> 62-70
        // GFLOP/s, 132 x 1536 x 288 38-42 -> 53-60, 132 x 288 x 768 42-47 ->
        // 53-70. Same loads of A and B, same FMAs in the same order.
        for (int k = 0; k < b.k;) {
            int k_end = b.k;
            if constexpr (WithAhead) {
                if (ahead.lines > 0) {
                    for (int l = 0; l < std::min(ahead.per, ahead.lines); ++l)
                        __builtin_prefetch(ahead.at + l * kLine);
                    ahead.at += ahead.per * kLine;
                    ahead.lines -= ahead.per;
                    k_end = std::min(b.k, k + ahead.every);
                }
            }
            for (; k < k_end; ++k) main_step(k);
        }
    }
    for (int q = 0; q < P; ++q) {
        // Real columns only (an uncomputed half holds none).
        const int valid = std::min(halves(q) * kLanes, b.n - (p + q) * kPanel);
        for (int r = 0; r < R; ++r) {
            float* dst = c + std::size_t(r) * ldc + q * kPanel;
            for (int h = 0; h < 2; ++h) {
                const int n_here = valid - h * kLanes;
                if (n_here >= kLanes) {
                    pstoreu(dst + h * kLanes, acc[r][q][h]);
                } else if (n_here > 0) {  // the last panel's real columns only
                    alignas(64) float tmp[kLanes];
                    pstoreu(tmp, acc[r][q][h]);
                    std::copy(tmp, tmp + n_here, dst + h * kLanes);
                }
            }
        }
    }
}

// Whether panel p1 - 1, the last of a range, is B's last and holds at most
// one vector register of real columns: then only its first half is computed.
bool half_panel_at(const Panels& b, int p1) {
    return p1 * kPanel >= b.n && b.n - (p1 - 1) * kPanel <= kLanes;
}

// R rows, panels [p0, p1), P at a time; c and a point at the rows' first
// output of panel p0 and their first row of A.
template <int R>
void rows_block(float* c, std::size_t ldc, const float* a, std::size_t lda, const Panels& b, int p0,
                int p1) {
    constexpr int P = panels_for(R);
    // The last panel half-computed when that is all it holds (tile's LastHalves).
    const int full_end = half_panel_at(b, p1) ? p1 - 1 : p1;
    int p = p0;
    for (; p + P <= full_end; p += P) tile<R, P>(c + (p - p0) * kPanel, ldc, a, lda, b, p);
    for (; p < full_end; ++p) tile<R, 1>(c + (p - p0) * kPanel, ldc, a, lda, b, p);
    if (full_end < p1) tile<R, 1, 1>(c + (p - p0) * kPanel, ldc, a, lda, b, p);
}

void remainder_rows(int rows, float* c, std::size_t ldc, const float* a, std::size_t lda,
                    const Panels& b, int p0, int p1) {
    static_assert(kRows == 6, "one case per row count below kRows");
    switch (rows) {
        case 0:
            return;
        case 1:
            return rows_block<1>(c, ldc, a, lda, b, p0, p1);
        case 2:
            return rows_block<2>(c, ldc, a, lda, b, p0, p1);
        case 3:
            return rows_block<3>(c, ldc, a, lda, b, p0, p1);
        case 4:
            return rows_block<4>(c, ldc, a, lda, b, p0, p1);
        case 5:
            return rows_block<5>(c, ldc, a, lda, b, p0, p1);
        default:
            PLAB_ASSERT(false);
    }
}

}  // namespace

int lanes() {
    return kLanes;
}
int panel_columns() {
    return kPanel;
}
int tile_rows() {
    return kRows;
}
int tile_panels() {
    return kMainPanels;
}
int padded_columns(int n) {
    return (n + kPanel - 1) / kPanel * kPanel;
}

Panels pack_transposed(const float* w, int n, int k, HostVector& out) {
    const int panels = padded_columns(n) / kPanel;
    out.assign(std::size_t(panels) * k * kPanel, 0.0f);
    for (int j = 0; j < n; ++j) {
        float* dst = out.data() + std::size_t(j / kPanel) * k * kPanel + j % kPanel;
        const float* src = w + std::size_t(j) * k;
        for (int kk = 0; kk < k; ++kk) dst[std::size_t(kk) * kPanel] = src[kk];
    }
    return Panels{out.data(), k, n, std::size_t(k) * kPanel, std::size_t(kPanel)};
}

void gemm(float* c, std::size_t ldc, const float* a, std::size_t lda, const Panels& b, int row0,
          int row1, int panel0, int panel1) {
    PLAB_ASSERT(row0 <= row1 && panel0 <= panel1 && panel1 * kPanel < b.n + kPanel);
    const auto c_at = [&](int i, int p) {
        return c + std::size_t(i) * ldc + (p - panel0) * kPanel;
    };
    const auto a_at = [&](int i) { return a + std::size_t(i) * lda; };
    if (row1 - row0 < kRows) {  // a decode step or a tiny chunk: all panels for these rows
        remainder_rows(row1 - row0, c_at(row0, panel0), ldc, a_at(row0), lda, b, panel0, panel1);
        return;
    }
    // Panels outer, rows inner: a group of panels of B stays in cache while
    // every row block of A passes over it.
    //
    // Reading ahead. A weight not in cache (a prefill's products, a batched
    // step's classifier: the model is larger than the caches) comes from
    // memory during a group's first row block; the group's other blocks find
    // it in L2. That first block needs B faster than one core can read it
    // from memory (two panels a k step: 256 bytes per ~12 cycles of FMAs,
    // ~85 GB/s at 4 GHz), so it waits, while the blocks after it read no
    // memory at all. So every row block of a packed weight also asks for its
    // share of the *next* group's lines, one line every few k steps inside
    // its FMA loop: by the time the next group starts, it is in cache.
    // (Asking for a block's whole share at once before its tile, as 3ec963f
    // did, made the classifier slower: ~100 prefetches queued ahead of the
    // loads the tile needed.)
    // Interleaved A/B, three runs each: the 64-row classifier (64 x 32000 x
    // 288, 2 threads) 3.17-3.23 -> 2.91-3.04 ms; gate/up at 128 rows from
    // cold weights 294-302 -> 279-285 us; a 64-sequence stories15M step
    // 8.22-8.92 -> 7.79-8.16 ms. Products with one group per task (W_o,
    // W_down at 288 columns) have no next group and are unchanged. Nothing
    // but the order of memory reads changes: the same FMAs, the same bits.
    const bool packed =
        b.row_stride == std::size_t(kPanel) && b.panel_stride == std::size_t(b.k) * kPanel;
    const int blocks = (row1 - row0) / kRows;
    for (int p = panel0; p < panel1; p += kMainPanels) {
        const int pe = std::min(p + kMainPanels, panel1);
        const bool half = half_panel_at(b, pe);
        // The next group's panels lie end to end in a packed weight.
        const int next_end = std::min(pe + kMainPanels, panel1);
        const char* next = reinterpret_cast<const char*>(b.data + std::size_t(pe) * b.panel_stride);
        const int next_lines =
            packed ? int(std::size_t(next_end - pe) * b.panel_stride * sizeof(float) / kLine) : 0;
        const int share = blocks > 0 ? (next_lines + blocks - 1) / blocks : 0;
        int i = row0;
        for (int block = 0; i + kRows <= row1; i += kRows, ++block) {
            const int first = std::min(next_lines, block * share);
            Ahead ahead{next + std::size_t(first) * kLine, std::min(next_lines - first, share)};
            if (ahead.lines > 0) {
                // Runs of at least 4 k steps. With a few row blocks (a batched
                // step of 6-23 sequences) a block's share is about a line per k
                // step, and runs of one step cost more in bookkeeping than their
                // FMAs: the 6-row tile at 41 GFLOP/s against the 5-row remainder
                // tile's 87 (one thread, 6 x 864 x 288, B in cache). So a run
                // asks for several lines at once instead. One thread, median of
                // 300, B in cache / B from memory: 6 x 864 x 288 41 -> 74 / 34 ->
                // 47 GFLOP/s, 16 x 864 x 288 68 -> 84 / 59 -> 73, 16 x 32000 x 288
                // 57 -> 68 / 55 -> 70; 64 rows and more unchanged within noise.
                ahead.every = std::max(4, b.k / ahead.lines);
                const int runs = (b.k + ahead.every - 1) / ahead.every;
                ahead.per = (ahead.lines + runs - 1) / runs;
            }
            if (ahead.lines > 0 && pe - p == kMainPanels && !half) {
                tile<kRows, kMainPanels, 2, true>(c_at(i, p), ldc, a_at(i), lda, b, p, ahead);
            } else if (pe - p == kMainPanels) {
                if (half)
                    tile<kRows, kMainPanels, 1>(c_at(i, p), ldc, a_at(i), lda, b, p);
                else
                    tile<kRows, kMainPanels>(c_at(i, p), ldc, a_at(i), lda, b, p);
            } else {
                for (int q = p; q < pe; ++q) {
                    if (half && q == pe - 1)
                        tile<kRows, 1, 1>(c_at(i, q), ldc, a_at(i), lda, b, q);
                    else
                        tile<kRows, 1>(c_at(i, q), ldc, a_at(i), lda, b, q);
                }
            }
        }
        remainder_rows(row1 - i, c_at(i, p), ldc, a_at(i), lda, b, p, pe);
    }
}

}  // namespace plab::cpu_gemm
