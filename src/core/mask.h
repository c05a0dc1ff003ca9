// The attention mask as data: which keys a query may see, and how its scores are modified.
//
// What it teaches: causality is one mask among many. Real models use others —
// sliding windows (Mistral; Gemma's local layers), attention sinks
// (StreamingLLM, Xiao et al. 2023), dilated windows (Longformer, Beltagy et al.
// 2020), chunked-local attention (Llama 4), a bidirectional prefix (prefix-LM,
// Raffel et al. 2020; PaliGemma), packed documents (every training pipeline)
// and hand-made masks. Each is a rule visible(q, k) for query position q and
// key position k; this file writes every rule once, for the host and for the
// device (PLAB_HD), and every backend reads it from here — no backend writes a
// loop bound of its own.
//
//   // clang-format off
//   causal          window:3        window:3+sink:1   chunked:3       prefix:3        docs:2,3
//   k→ 0 1 2 3 4    0 1 2 3 4       0 1 2 3 4         0 1 2 3 4       0 1 2 3 4       0 1 2 3 4
//   q0 x . . . .    x . . . .       x . . . .         x . . . .       x x x . .       x . . . .
//   q1 x x . . .    x x . . .       x x . . .         x x . . .       x x x . .       x x . . .
//   q2 x x x . .    x x x . .       x x x . .         x x x . .       x x x . .       . . x . .
//   q3 x x x x .    . x x x .       x x x x .         . . . x .       x x x x .       . . x x .
//   q4 x x x x x    . . x x x       x . x x x         . . . x x       x x x x x       . . x x x
//   // clang-format on
//
// A Mask is a small trivially-copyable value: it is passed by value into GPU
// kernels inside AttentionShape. Masks that need data (packed documents'
// boundaries, a custom 0/1 matrix, ALiBi slopes) keep it in one array of
// 32-bit words that the Mask points to; a host Mask points to host memory, and
// a GPU backend uploads the words and hands its kernels a copy of the Mask that
// points to device memory (runtime/mask_grammar.h owns the host words).
//
// Composition (FlexAttention's and_masks / or_masks): up to kMaxTerms terms;
// a term may start a new OR group, and inside a group the terms are ANDed:
//   visible = OR over groups ( AND over the group's terms )
// Score modifiers live here too, so that the reference backends apply them in
// one place: ALiBi (Press et al. 2022) adds -slope_h·|q - k| to the scaled
// score; tanh soft-capping (Gemma 2) maps s to cap·tanh(s/cap), after ALiBi.
//
// Left out on purpose: masks that depend on the head (only ALiBi's slope
// does), and masks that change during decoding other than by position.
// Lesson: lessons/ (masks lesson, a later session).
#pragma once

#include <cstdint>

#include "core/hd.h"
#include "core/strict_math.h"

namespace plab {

enum class MaskKind : int32_t {
    causal,   // k <= q
    window,   // a = W: q-W < k <= q (W keys, itself included); b = S sinks: also k < S
    dilated,  // a = W keys, b = D spacing: k = q, q-D, ..., q-(W-1)D
    chunked,  // a = L: same chunk floor(k/L) == floor(q/L), k <= q (Llama 4)
    prefix,   // a = P: k <= q, or both q and k inside the bidirectional prefix 0..P-1
    docs,     // a = number of documents; data[offset..] their start positions: same document,
              // k <= q. Positions past the last start belong to the last document.
    custom,   // a = N rows (and columns); data[offset..] the rows' bits, row-major,
              // ceil(N/32) words per row. Positions >= N see nothing (the session refuses them).
};

struct MaskTerm {
    MaskKind kind = MaskKind::causal;
    int32_t a = 0;
    int32_t b = 0;
    int32_t offset = 0;     // where this term's words start in Mask::data
    int32_t new_group = 0;  // 1: this term starts a new OR group
};

// Keys lo..hi (inclusive) bound what a query may see: visible() is false
// outside. lo > hi means none.
struct KeyRange {
    int lo;
    int hi;
};

enum class TileClass : int32_t { empty = 0, partial = 1, full = 2 };

PLAB_HD inline int mask_min(int a, int b) {
    return a < b ? a : b;
}
PLAB_HD inline int mask_max(int a, int b) {
    return a > b ? a : b;
}

struct Mask {
    static constexpr int kMaxTerms = 4;

    MaskTerm terms[kMaxTerms];
    int32_t n_terms = 0;  // 0: plain causal (the default)
    int32_t alibi = 0;    // 1: add ALiBi biases; slopes at data[alibi_offset + head]
    int32_t alibi_offset = 0;
    int32_t n_heads = 0;   // heads the ALiBi slopes were made for
    float softcap = 0.0f;  // > 0: tanh soft-capping of scores at this value
    int32_t limit = 0;     // > 0: positions >= limit are not covered (a custom mask's size)
    const uint32_t* data = nullptr;  // words of docs/custom/ALiBi, in the evaluator's memory
    int32_t data_words = 0;
    int32_t unused = 0;  // the tail padding, named (see AttentionShape)

    // ---- one term ----------------------------------------------------------
    // Start of the document holding position q (docs term): the largest start <= q.
    PLAB_HD int doc_start(const MaskTerm& t, int q) const {
        const uint32_t* starts = data + t.offset;
        int lo = 0, hi = t.a - 1;  // binary search over the sorted starts; starts[0] == 0
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (static_cast<int>(starts[mid]) <= q)
                lo = mid;
            else
                hi = mid - 1;
        }
        return static_cast<int>(starts[lo]);
    }

    PLAB_HD bool custom_bit(const MaskTerm& t, int q, int k) const {
        if (q >= t.a || k >= t.a) return false;
        const int words_per_row = (t.a + 31) / 32;
        const uint32_t w = data[t.offset + q * words_per_row + k / 32];
        return ((w >> (k % 32)) & 1u) != 0;
    }

    PLAB_HD bool term_visible(const MaskTerm& t, int q, int k) const {
        switch (t.kind) {
            case MaskKind::causal:
                return k <= q;
            case MaskKind::window:
                return k <= q && (q - k < t.a || k < t.b);
            case MaskKind::dilated:
                return k <= q && (q - k) % t.b == 0 && (q - k) / t.b < t.a;
            case MaskKind::chunked:
                return k <= q && k / t.a == q / t.a;
            case MaskKind::prefix:
                return k <= q || (q < t.a && k < t.a);
            case MaskKind::docs:
                return k <= q && k >= doc_start(t, q);
            case MaskKind::custom:
                return custom_bit(t, q, k);
        }
        return false;
    }

    // Does dilated(W, D) reach back W-1 strides from query q without passing
    // key 0, i.e. (W-1)·D <= q? Asked by division so that a large W and D
    // never form a product that overflows int (a fuzzer found 335850·55555).
    PLAB_HD static bool dilated_reaches_back(const MaskTerm& t, int q) {
        return t.a - 1 <= q / t.b;
    }

    // A bound on the keys of query q under one term (tight for every kind but
    // custom, where it is the row's first and last 1).
    PLAB_HD KeyRange term_range(const MaskTerm& t, int q) const {
        switch (t.kind) {
            case MaskKind::causal:
                return {0, q};
            case MaskKind::window:
                return {t.b > 0 ? 0 : mask_max(0, q - t.a + 1), q};
            case MaskKind::dilated:  // the W-th key back, or the earliest one of q's stride
                return {dilated_reaches_back(t, q) ? q - (t.a - 1) * t.b : q % t.b, q};
            case MaskKind::chunked:
                return {q / t.a * t.a, q};
            case MaskKind::prefix:
                return {0, q < t.a ? t.a - 1 : q};
            case MaskKind::docs:
                return {doc_start(t, q), q};
            case MaskKind::custom: {
                KeyRange r{1, 0};
                if (q >= t.a) return r;
                for (int k = 0; k < t.a; ++k) {
                    if (!custom_bit(t, q, k)) continue;
                    if (r.lo > r.hi) r.lo = k;
                    r.hi = k;
                }
                return r;
            }
        }
        return {1, 0};
    }

    // True when the term's visible keys are exactly its range (no holes).
    PLAB_HD static bool term_is_interval(const MaskTerm& t) {
        return t.kind == MaskKind::causal || (t.kind == MaskKind::window && t.b == 0) ||
               (t.kind == MaskKind::dilated && t.b == 1) || t.kind == MaskKind::chunked ||
               t.kind == MaskKind::prefix || t.kind == MaskKind::docs;
    }

    // ---- the whole mask ----------------------------------------------------
    // May the query at position q look at the key at position k?
    PLAB_HD bool visible(int q, int k) const {
        if (k < 0 || q < 0) return false;
        if (n_terms == 0) return k <= q;  // causal
        bool any = false, group = true;
        for (int i = 0; i < n_terms; ++i) {
            if (i > 0 && terms[i].new_group) {
                any = any || group;
                group = true;
            }
            group = group && term_visible(terms[i], q, k);
        }
        return any || group;
    }

    // The keys query q may see lie in [lo, hi]; visible() decides inside it.
    // AND narrows (max of lo, min of hi), OR widens (min of lo, max of hi).
    PLAB_HD KeyRange key_range(int q) const {
        if (n_terms == 0) return {0, q};
        KeyRange all{1, 0};
        KeyRange group{0, 0x7fffffff};
        for (int i = 0; i <= n_terms; ++i) {
            if (i == n_terms || (i > 0 && terms[i].new_group)) {
                if (group.lo <= group.hi) {
                    if (all.lo > all.hi) {
                        all = group;
                    } else {
                        all.lo = mask_min(all.lo, group.lo);
                        all.hi = mask_max(all.hi, group.hi);
                    }
                }
                if (i == n_terms) break;
                group = KeyRange{0, 0x7fffffff};
            }
            const KeyRange r = term_range(terms[i], q);
            group.lo = mask_max(group.lo, r.lo);
            group.hi = mask_min(group.hi, r.hi);
        }
        return all;
    }

    // True when every query sees exactly its key_range (one group of interval terms).
    PLAB_HD bool ranges_exact() const {
        for (int i = 0; i < n_terms; ++i) {
            if (terms[i].new_group || !term_is_interval(terms[i])) return false;
        }
        return true;
    }

    // Queries q0..q1 × keys k0..k1 (inclusive): no visible cell (empty), some
    // (partial) or all (full)? Exact, so a kernel may skip every empty tile and
    // drop the per-cell test inside a full one. Interval masks decide from the
    // rows' ranges; others look at the cells, stopping as soon as both kinds of
    // cell have been seen.
    PLAB_HD TileClass classify_tile(int q0, int q1, int k0, int k1) const {
        bool any_visible = false, any_hidden = false;
        const bool exact = ranges_exact();
        for (int q = q0; q <= q1; ++q) {
            const KeyRange r = key_range(q);
            const int lo = mask_max(k0, r.lo), hi = mask_min(k1, r.hi);
            if (lo > hi) {
                any_hidden = true;
            } else {
                if (lo > k0 || hi < k1) any_hidden = true;
                if (exact) {
                    any_visible = true;
                } else {
                    for (int k = lo; k <= hi && !(any_visible && any_hidden); ++k) {
                        if (visible(q, k))
                            any_visible = true;
                        else
                            any_hidden = true;
                    }
                }
            }
            if (any_visible && any_hidden) return TileClass::partial;
        }
        return any_visible ? TileClass::full : TileClass::empty;
    }

    // The same verdicts for many key tiles of one query tile. The bounds of
    // its queries' key ranges are found once; a key tile outside every range
    // is empty, and (interval masks) one inside every range is full, without
    // asking each query again. Only the tiles some range's edge crosses take
    // classify_tile's row-by-row path. (Asking every query of every tile, the
    // fast backend's attention at 2048 tokens spent ~6% of its time here.)
    struct QueryTileBounds {
        int q0, q1;
        bool exact;
        int min_lo, max_lo, min_hi, max_hi;  // over the queries' key ranges
    };
    PLAB_HD QueryTileBounds query_tile_bounds(int q0, int q1) const {
        QueryTileBounds b{q0, q1, ranges_exact(), 0x7fffffff, -1, 0x7fffffff, -1};
        for (int q = q0; q <= q1; ++q) {
            const KeyRange r = key_range(q);
            b.min_lo = mask_min(b.min_lo, r.lo);
            b.max_lo = mask_max(b.max_lo, r.lo);
            b.min_hi = mask_min(b.min_hi, r.hi);
            b.max_hi = mask_max(b.max_hi, r.hi);
        }
        return b;
    }
    PLAB_HD TileClass classify_tile(const QueryTileBounds& b, int k0, int k1) const {
        // Every query's visible keys lie in its range: none reach this tile.
        if (k1 < b.min_lo || k0 > b.max_hi) return TileClass::empty;
        // Every query's range covers the tile, and sees all of it.
        if (b.exact && b.max_lo <= k0 && b.min_hi >= k1) return TileClass::full;
        return classify_tile(b.q0, b.q1, k0, k1);
    }

    // ---- what the KV cache may forget ----------------------------------------
    // True when no query at position q0 or later may see key k under this
    // term: the key has slid out of a window, or its chunk or document ended.
    // Conservative: false where a term cannot tell (causal, prefix-LM, custom,
    // and a window's sink tokens, which every later query sees).
    PLAB_HD bool term_forgets(const MaskTerm& t, int k, int q0) const {
        switch (t.kind) {
            case MaskKind::window:  // later queries see q-W < k: k <= q0-W is gone for good
                return k >= t.b && k <= q0 - t.a;
            case MaskKind::dilated:  // the furthest key back a query q sees is q-(W-1)D
                return dilated_reaches_back(t, q0) && k < q0 - (t.a - 1) * t.b;
            case MaskKind::chunked:  // the chunk of k ended before q0's chunk began
                return k / t.a < q0 / t.a;
            case MaskKind::docs:  // the document of k ended before q0's began
                return k < doc_start(t, q0);
            case MaskKind::causal:
            case MaskKind::prefix:
            case MaskKind::custom:
                return false;
        }
        return false;
    }

    // May the KV cache drop key k once the next query is at position q0? True
    // when no query at q0 or later may see k: an AND group forgets k when any
    // of its terms does; the mask forgets it when every OR group does. This is
    // what keeps a sliding window's KV memory flat as the prompt grows.
    PLAB_HD bool forgets(int k, int q0) const {
        if (n_terms == 0) return false;  // causal: every later query sees every key
        bool all_groups = true, group = false;
        for (int i = 0; i < n_terms; ++i) {
            if (i > 0 && terms[i].new_group) {
                all_groups = all_groups && group;
                group = false;
            }
            group = group || term_forgets(terms[i], k, q0);
        }
        return all_groups && group;
    }

    // The position RoPE rotates the token at cache position p by: under packed
    // documents it restarts at 0 in each document (as packed training does), so
    // a document gives the same K, V and outputs as when it runs alone;
    // otherwise it is p itself. The KV cache still stores the token at slot p.
    PLAB_HD int rope_position(int p) const {
        for (int i = 0; i < n_terms; ++i) {
            if (terms[i].kind == MaskKind::docs) return p - doc_start(terms[i], p);
        }
        return p;
    }

    // ---- score modifiers ----------------------------------------------------
    // The scaled score q·k/sqrt(Dh) of (query q, key k) in head `head`, modified:
    // ALiBi first (a linear distance penalty instead of position embeddings),
    // then soft-capping (keeps every logit inside (-cap, cap)).
    PLAB_HD float modify_score(float s, int head, int q, int k) const {
        if (alibi) {
            const float slope = bits_to_float(data[alibi_offset + head]);
            const int distance = q >= k ? q - k : k - q;
            s = strict_sub(s, strict_mul(slope, static_cast<float>(distance)));
        }
        if (softcap > 0.0f) s = strict_mul(softcap, strict_tanhf(strict_div(s, softcap)));
        return s;
    }
};

}  // namespace plab
