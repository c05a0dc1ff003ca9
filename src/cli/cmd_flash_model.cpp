// `plab flash --model M --layer L --head H [--tile N] [--mask SPEC] [--chunks
// PLAN]`: one head of a real prefill walked in the gpu kernel's order
// (toy/flash_head.h): per key tile the rows it changed, their running max m
// and denominator l, how many it rescaled; the tiles skipped and why; the
// head's output against cpu-ref's whole softmax and the gpu backend's own.
// Lesson: 17 (FlashAttention).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cli/cmd_flash.h"
#include "core/error.h"
#include "toy/flash_head.h"

namespace plab::cli {
namespace {

// One tile's rows, summarised: what the text prints and the JSON holds.
struct TileSummary {
    FlashOrderTile tile;
    std::string why;  // a skipped tile: why it was never loaded
    int rows = 0, rescaled = 0;
    float m_lo = INFINITY, m_hi = -INFINITY, l_lo = INFINITY, l_hi = -INFINITY;
};

struct FlashModelResult {
    std::string model_source;
    FlashHeadRun run;
    std::vector<TileSummary> tiles;
};

const char* kind_name(TileClass c) {
    return c == TileClass::empty ? "empty" : c == TileClass::partial ? "partial" : "full";
}

// Why the kernel never loads a tile: the mask's verdict for the whole query tile.
std::string skip_reason(const Mask& mask, const FlashOrderTile& t) {
    if (!t.reached) return "past the furthest key any query of the tile sees: the loop ends first";
    const Mask::QueryTileBounds b = mask.query_tile_bounds(t.pos_lo, t.pos_hi);
    if (t.key_lo > b.max_hi) return "after every query's last visible key";
    if (t.key_hi < b.min_lo) return "before every query's first visible key";
    return "inside the queries' key ranges, but the mask hides every pair";
}

std::vector<TileSummary> summarise(const FlashHeadRun& run, const Mask& mask) {
    std::vector<TileSummary> out;
    for (const FlashOrderTile& t : run.walk.tiles) {
        TileSummary s;
        s.tile = t;
        if (!t.reached || t.kind == TileClass::empty) s.why = skip_reason(mask, t);
        out.push_back(s);
    }
    for (const FlashOrderState& st : run.walk.states) {
        for (TileSummary& s : out) {
            if (s.tile.key_lo != st.key_lo || st.pos < s.tile.pos_lo || st.pos > s.tile.pos_hi)
                continue;
            ++s.rows;
            s.rescaled += st.m_old != -INFINITY && st.rescale < 1.0f;
            s.m_lo = std::min(s.m_lo, st.m);
            s.m_hi = std::max(s.m_hi, st.m);
            s.l_lo = std::min(s.l_lo, st.l);
            s.l_hi = std::max(s.l_hi, st.l);
            break;
        }
    }
    return out;
}

FlashModelResult compute_flash_model(const FlashModelOptions& o) {
    const Model model = load_model_or_default(o.model);
    const std::vector<int32_t> tokens = o.prompt.resolve(model);
    const ChunkPlan plan = parse_chunk_plan(o.chunks, static_cast<int>(tokens.size()));
    const BoundMask mask = resolve_mask(o.mask, tokens, model);
    check_plan_for_mask(mask.view(), plan);
    FlashHeadOptions fo;
    fo.layer = o.layer;
    fo.head = o.head;
    fo.tile = o.tile;
    fo.mask_spec = o.mask;
    FlashModelResult r;
    r.model_source = model.source;
    r.run = run_flash_head(model.weights, tokens, plan, mask, fo);
    r.tiles = summarise(r.run, mask.view());
    return r;
}

std::string ulps_text(const FlashHeadDiff& d) {
    if (d.max_ulps == 0) return "bitwise equal: yes";
    char buf[240];
    std::snprintf(buf, sizeof buf,
                  "bitwise equal: no (%lld values differ, max |diff| %.3g, %lld ulps at most);\n"
                  "    within the tolerance |diff| <= %g + %g·max|v|: %s (worst %.2f of it)",
                  d.differing, double(d.max_abs), d.max_ulps, kFlashAtol, kFlashRtol,
                  d.within() ? "yes" : "no", d.worst);
    return buf;
}

void print_tile(const TileSummary& s) {
    const FlashOrderTile& t = s.tile;
    std::printf("  keys %4d-%-4d group %d  %-7s", t.key_lo, t.key_hi, t.group,
                t.reached ? kind_name(t.kind) : "unreached");
    if (!s.why.empty()) {
        std::printf(" skipped: %s\n", s.why.c_str());
        return;
    }
    std::printf(" %3d rows  m %s..%s  l %s..%s  rescaled %d\n", s.rows, exact(s.m_lo).c_str(),
                exact(s.m_hi).c_str(), exact(s.l_lo).c_str(), exact(s.l_hi).c_str(), s.rescaled);
}

void print_flash_model_text(const FlashModelResult& r) {
    const FlashHeadRun& run = r.run;
    std::printf("FlashAttention by hand: layer %d, head %d (KV head %d, Dh %d) of %s\n", run.layer,
                run.head, run.kv_head, run.head_dim, r.model_source.c_str());
    std::printf(
        "%d tokens, chunks %s, mask %s; walked in the gpu kernel's order: query tiles of %d,\n"
        "key tiles of %d (the kernel's own: %d), two warp groups (even and odd key tiles),\n"
        "8 lanes a row, segments of %d keys.\n",
        run.n_tokens, run.plan.to_string().c_str(), run.mask.c_str(), run.query_tile, run.key_tile,
        run.kernel_key_tile, flash_segment_keys(run.key_tile));
    if (run.recorded)
        std::printf(
            "States read from the emulated kernel (%s): %lld row-tile states; the CPU port\n"
            "of its order agrees bit for bit: %s\n",
            run.backend.c_str(), run.kernel_states, run.port_matches_kernel ? "yes" : "no");
    else
        std::printf(
            "States from the CPU port of the kernel's order (at this tile, or natively,\n"
            "the kernel's own states are not read).\n");
    int chunk = -1, pos_lo = -1;
    for (const TileSummary& s : r.tiles) {
        if (s.tile.chunk != chunk || s.tile.pos_lo != pos_lo) {
            chunk = s.tile.chunk;
            pos_lo = s.tile.pos_lo;
            std::printf("\nchunk %d, query tile of positions %d-%d:\n", chunk, s.tile.pos_lo,
                        s.tile.pos_hi);
        }
        print_tile(s);
    }
    std::printf(
        "\nTiles: %lld full, %lld partial, %lld skipped (empty under the mask), %lld never "
        "reached.\n",
        run.full, run.partial, run.skipped, run.unreached);
    std::printf("Output of the head (%d positions x %d components):\n", run.n_tokens, run.head_dim);
    std::printf("  vs cpu-ref's whole softmax on the same q, k, v: %s\n",
                ulps_text(run.vs_reference).c_str());
    std::printf("  vs the gpu backend's output (%s): %s\n", run.backend.c_str(),
                ulps_text(run.vs_gpu).c_str());
}

nlohmann::json diff_json(const FlashHeadDiff& d) {
    return {{"max_abs", d.max_abs},           {"max_ulps", d.max_ulps},
            {"differing", d.differing},       {"bitwise_equal", d.max_ulps == 0},
            {"within_tolerance", d.within()}, {"worst_of_tolerance", d.worst}};
}

nlohmann::json flash_model_json(const FlashModelResult& r) {
    const FlashHeadRun& run = r.run;
    nlohmann::json tiles = nlohmann::json::array();
    for (const TileSummary& s : r.tiles) {
        const FlashOrderTile& t = s.tile;
        nlohmann::json j = {{"chunk", t.chunk},
                            {"segment", t.segment},
                            {"queries", {t.pos_lo, t.pos_hi}},
                            {"keys", {t.key_lo, t.key_hi}},
                            {"group", t.group},
                            {"class", kind_name(t.kind)},
                            {"reached", t.reached},
                            {"rows", s.rows},
                            {"rescaled", s.rescaled}};
        if (!s.why.empty()) j["why"] = s.why;
        if (s.rows > 0) {
            j["m"] = {s.m_lo, s.m_hi};
            j["l"] = {s.l_lo, s.l_hi};
        }
        tiles.push_back(j);
    }
    nlohmann::json states = nlohmann::json::array();
    for (const FlashOrderState& st : run.walk.states)
        states.push_back(
            {{"position", st.pos},
             {"keys_from", st.key_lo},
             {"group", st.group},
             {"m_old", std::isinf(st.m_old) ? nlohmann::json() : nlohmann::json(st.m_old)},
             {"m", st.m},
             {"rescale", st.rescale},
             {"l", st.l},
             {"acc0", st.acc0}});
    return {{"model", r.model_source},
            {"layer", run.layer},
            {"head", run.head},
            {"kv_head", run.kv_head},
            {"head_dim", run.head_dim},
            {"tokens", run.n_tokens},
            {"chunks", run.plan.to_string()},
            {"mask", run.mask},
            {"backend", run.backend},
            {"kernel_tile", run.kernel_key_tile},
            {"tile", run.key_tile},
            {"query_tile", run.query_tile},
            {"segment_keys", flash_segment_keys(run.key_tile)},
            {"recorded", run.recorded},
            {"kernel_states", run.kernel_states},
            {"port_matches_kernel", run.port_matches_kernel},
            {"tiles", tiles},
            {"states", states},
            {"full", run.full},
            {"partial", run.partial},
            {"skipped", run.skipped},
            {"unreached", run.unreached},
            {"vs_cpu_ref", diff_json(run.vs_reference)},
            {"vs_gpu", diff_json(run.vs_gpu)},
            {"gpu_vs_cpu_ref", diff_json(run.gpu_vs_reference)}};
}

}  // namespace

void run_flash_model(const FlashModelOptions& o) {
    const FlashModelResult r = compute_flash_model(o);
    if (o.json)
        print_json(flash_model_json(r));
    else
        print_flash_model_text(r);
}

}  // namespace plab::cli
