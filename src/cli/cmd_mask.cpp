// `plab mask`: a mask spec drawn as text — which keys each query sees, the tile
// map a tiled kernel works from, and the work saved against causal.
// The grammar is in runtime/mask_grammar.h; `plab mask --help` prints it.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/common.h"
#include "core/error.h"
#include "runtime/mask_grammar.h"

namespace plab::cli {
namespace {

struct MaskOptions {
    std::string spec;
    int length = 16;
    int tile = 0;
    bool tile_given = false;  // else kDefaultTile, or the length when shorter
    std::string tokens;       // for docs:bos
    int bos_id = -1;
    bool json = false;
};

constexpr int kDefaultTile = 4;

char mask_tile_char(TileClass c) {
    return c == TileClass::full ? 'F' : c == TileClass::partial ? 'P' : '.';
}

// Everything `plab mask` shows, text or JSON: the mask drawn cell by cell and
// tile by tile, and the pairs it lets through against causal.
struct MaskResult {
    std::string spec;
    int length = 0;                      // T
    int tile = 0;                        // positions per tile side
    int tiles = 0;                       // tiles per side: ceil(T / tile)
    std::vector<std::string> rows;       // (T): 'x' where query q sees key k, '.' elsewhere
    std::vector<std::string> tile_rows;  // (tiles): 'F' full, 'P' partial, '.' empty
    int counts[3] = {0, 0, 0};           // tiles by TileClass: empty, partial, full
    long long visible = 0;               // pairs the mask lets through
    long long causal = 0;                // T(T+1)/2
    double saved = 0;                    // 1 - visible / causal
};

// The token ids of the prompt the mask is bound to: zeros, or --tokens (for docs:bos).
std::vector<int32_t> mask_tokens(const MaskOptions& o) {
    std::vector<int32_t> tokens(static_cast<std::size_t>(o.length), 0);
    if (o.tokens.empty()) return tokens;
    const std::vector<int> ids = parse_int_list(o.tokens, "--tokens");
    PLAB_CHECK(static_cast<int>(ids.size()) == o.length,
               "--tokens gives " << ids.size() << " ids but --length is " << o.length
                                 << "; give one id per position");
    tokens.assign(ids.begin(), ids.end());
    return tokens;
}

MaskResult compute_mask(MaskOptions o) {
    PLAB_CHECK(o.length >= 1 && o.length <= 4096,
               "--length " << o.length << " must be between 1 and 4096 positions");
    // The default tile fits any length the user gives; a tile the user gave
    // that does not fit is their mistake to hear about.
    if (!o.tile_given) o.tile = std::min(kDefaultTile, o.length);
    PLAB_CHECK(o.tile >= 1 && o.tile <= o.length,
               "--tile " << o.tile << " must be between 1 and the length " << o.length);
    const std::vector<int32_t> tokens = mask_tokens(o);  // the span below points into it
    MaskContext mc;
    mc.tokens = tokens;
    mc.bos_id = o.bos_id;
    mc.n_heads = 1;
    const BoundMask bound = make_mask(o.spec, mc);
    const Mask m = bound.view();
    MaskResult r;
    const int t = r.length = o.length;
    r.spec = o.spec;
    r.tile = o.tile;
    r.visible = count_visible_pairs(m, t);
    r.causal = static_cast<long long>(t) * (t + 1) / 2;
    r.saved = 1.0 - double(r.visible) / double(r.causal);
    r.tiles = (t + o.tile - 1) / o.tile;
    const std::vector<TileClass> map = tile_map(m, t, o.tile);
    for (TileClass c : map) ++r.counts[static_cast<int>(c)];
    for (int q = 0; q < t; ++q) {
        std::string row;
        for (int k = 0; k < t; ++k) row += m.visible(q, k) ? 'x' : '.';
        r.rows.push_back(row);
    }
    for (int qt = 0; qt < r.tiles; ++qt) {
        std::string row;
        for (int kt = 0; kt < r.tiles; ++kt)
            row += mask_tile_char(map[std::size_t(qt) * r.tiles + kt]);
        r.tile_rows.push_back(row);
    }
    return r;
}

nlohmann::json mask_json(const MaskResult& r) {
    nlohmann::json j;
    j["mask"] = r.spec;
    j["length"] = r.length;
    j["tile"] = r.tile;
    j["rows"] = r.rows;
    j["tile_map"] = r.tile_rows;
    j["tiles"] = {{"empty", r.counts[0]}, {"partial", r.counts[1]}, {"full", r.counts[2]}};
    j["visible_pairs"] = r.visible;
    j["causal_pairs"] = r.causal;
    j["saved_vs_causal"] = r.saved;
    return j;
}

void print_mask_text(const MaskResult& r) {
    std::printf(
        "Mask %s over %d positions (x: the query of the row may see the key of the "
        "column)\n",
        r.spec.c_str(), r.length);
    for (int q = 0; q < r.length; ++q) std::printf("  q%-4d %s\n", q, r.rows[q].c_str());
    std::printf(
        "\nTile map, %d x %d positions per tile (F full, P partial, . empty: a tiled "
        "kernel skips it):\n",
        r.tile, r.tile);
    for (const std::string& row : r.tile_rows) std::printf("  %s\n", row.c_str());
    std::printf("Tiles: %d empty, %d partial, %d full of %d\n", r.counts[0], r.counts[1],
                r.counts[2], r.tiles * r.tiles);
    std::printf("Visible pairs: %lld; causal: %lld (T(T+1)/2); work saved against causal: %.1f%%\n",
                r.visible, r.causal, 100.0 * r.saved);
}

void run(const MaskOptions& o) {
    const MaskResult r = compute_mask(o);
    if (o.json)
        print_json(mask_json(r));
    else
        print_mask_text(r);
}

}  // namespace

void add_mask_command(CLI::App& app) {
    auto o = std::make_shared<MaskOptions>();
    CLI::App* cmd = app.add_subcommand(
        "mask", "draw an attention mask: visible cells, tile map, pairs saved against causal");
    cmd->add_option("spec", o->spec, "the mask, e.g. window:8+sink:2 (grammar below)")->required();
    cmd->add_option("--length", o->length, "positions T")->capture_default_str();
    CLI::Option* tile =
        cmd->add_option("--tile", o->tile,
                        "tile size in positions for the tile map (default: 4, or the length when "
                        "shorter)");
    cmd->add_option("--tokens", o->tokens, "token ids, one per position (for docs:bos)");
    cmd->add_option("--bos-id", o->bos_id, "which id is BOS (for docs:bos)");
    cmd->add_flag("--json", o->json, "machine-readable output");
    cmd->footer(mask_grammar_help());  // the grammar, from the table of item kinds
    cmd->callback([o, tile] {
        o->tile_given = tile->count() > 0;
        run(*o);
    });
}

}  // namespace plab::cli
