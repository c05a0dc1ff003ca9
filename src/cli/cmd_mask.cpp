// `plab mask`: a mask spec drawn as text — which keys each query sees, the tile
// map a tiled kernel works from, and the work saved against causal.
// The grammar is in runtime/mask_grammar.h; `plab mask --help` prints it.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/common.h"
#include "core/error.h"
#include "runtime/mask_grammar.h"

namespace plab::cli {
namespace {

constexpr const char* kGrammar =
    R"(Mask grammar (the same for --mask on prefill, generate, compare, toy, bench, eval):
  spec  := group ( '|' group )*     OR of groups (FlexAttention's or_masks)
  group := item ( '+' item )*       AND of the group's masks (and_masks)
  causal          query q sees keys 0..q (the default)
  window:W        the last W keys, itself included: q-W < k <= q (Mistral, Gemma local layers)
  sink:S          beside a window in its group (window:8+sink:2): keys 0..S-1 stay visible
                  (attention sinks, StreamingLLM)
  dilated:W,D     W keys spaced D apart: q, q-D, ..., q-(W-1)D (Longformer)
  chunked:L       causal inside chunks of L positions (Llama 4 local layers)
  prefix:P        positions 0..P-1 see each other both ways (prefix-LM, PaliGemma);
                  a chunk plan may not split the prefix
  docs:N1,N2,...  packed documents of these lengths (they must sum to the prompt):
                  causal inside a document, nothing across
  docs:bos        a new document at every BOS token of the prompt
  file:PATH       a T x T matrix of 0/1, one row per query ('0110' or '0 1 1 0';
                  '#' comments and blank lines skipped; every row needs a 1)
  alibi           modifier: adds -slope_h * |q - k| to each score (Press et al. 2022)
  softcap:C       modifier: score -> C * tanh(score / C) (Gemma 2)
Modifiers apply to the whole mask wherever written. Examples:
  window:8+sink:2    chunked:16|prefix:4    docs:5,7,3+alibi    causal+softcap:30)";

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

char tile_char(TileClass c) {
    return c == TileClass::full ? 'F' : c == TileClass::partial ? 'P' : '.';
}

void run(MaskOptions o) {
    PLAB_CHECK(o.length >= 1 && o.length <= 4096,
               "--length " << o.length << " must be between 1 and 4096 positions");
    // The default tile fits any length the user gives; a tile the user gave
    // that does not fit is their mistake to hear about.
    if (!o.tile_given) o.tile = std::min(kDefaultTile, o.length);
    PLAB_CHECK(o.tile >= 1 && o.tile <= o.length,
               "--tile " << o.tile << " must be between 1 and the length " << o.length);
    std::vector<int32_t> tokens(static_cast<std::size_t>(o.length), 0);
    if (!o.tokens.empty()) {
        const std::vector<int> ids = parse_int_list(o.tokens, "--tokens");
        PLAB_CHECK(static_cast<int>(ids.size()) == o.length,
                   "--tokens gives " << ids.size() << " ids but --length is " << o.length
                                     << "; give one id per position");
        tokens.assign(ids.begin(), ids.end());
    }
    MaskContext mc;
    mc.tokens = tokens;
    mc.bos_id = o.bos_id;
    mc.n_heads = 1;
    const BoundMask bound = make_mask(o.spec, mc);
    const Mask m = bound.view();
    const int t = o.length;
    const long long visible = count_visible_pairs(m, t);
    const long long causal = static_cast<long long>(t) * (t + 1) / 2;
    const double saved = 1.0 - double(visible) / double(causal);
    const int tiles = (t + o.tile - 1) / o.tile;
    const std::vector<TileClass> map = tile_map(m, t, o.tile);
    int counts[3] = {0, 0, 0};
    for (TileClass c : map) ++counts[static_cast<int>(c)];
    std::vector<std::string> rows, tile_rows;
    for (int q = 0; q < t; ++q) {
        std::string r;
        for (int k = 0; k < t; ++k) r += m.visible(q, k) ? 'x' : '.';
        rows.push_back(r);
    }
    for (int qt = 0; qt < tiles; ++qt) {
        std::string r;
        for (int kt = 0; kt < tiles; ++kt) r += tile_char(map[std::size_t(qt) * tiles + kt]);
        tile_rows.push_back(r);
    }
    if (o.json) {
        nlohmann::json j;
        j["mask"] = o.spec;
        j["length"] = t;
        j["tile"] = o.tile;
        j["rows"] = rows;
        j["tile_map"] = tile_rows;
        j["tiles"] = {{"empty", counts[0]}, {"partial", counts[1]}, {"full", counts[2]}};
        j["visible_pairs"] = visible;
        j["causal_pairs"] = causal;
        j["saved_vs_causal"] = saved;
        print_json(j);
        return;
    }
    std::printf(
        "Mask %s over %d positions (x: the query of the row may see the key of the "
        "column)\n",
        o.spec.c_str(), t);
    for (int q = 0; q < t; ++q) std::printf("  q%-4d %s\n", q, rows[q].c_str());
    std::printf(
        "\nTile map, %d x %d positions per tile (F full, P partial, . empty: a tiled "
        "kernel skips it):\n",
        o.tile, o.tile);
    for (const std::string& r : tile_rows) std::printf("  %s\n", r.c_str());
    std::printf("Tiles: %d empty, %d partial, %d full of %d\n", counts[0], counts[1], counts[2],
                tiles * tiles);
    std::printf("Visible pairs: %lld; causal: %lld (T(T+1)/2); work saved against causal: %.1f%%\n",
                visible, causal, 100.0 * saved);
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
    cmd->footer(kGrammar);
    cmd->callback([o, tile] {
        o->tile_given = tile->count() > 0;
        run(*o);
    });
}

}  // namespace plab::cli
