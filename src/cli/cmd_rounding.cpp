// `plab rounding`: the reduction-order lab (toy/rounding.h, lesson 15) —
// the same numbers added in different orders, with the bits of each sum.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/common.h"
#include "toy/rounding.h"

namespace plab::cli {
namespace {

struct RoundingOptions {
    std::string values = "0.1,0.1,0.1,0.1,0.1,0.1,0.1,0.1";
    int cached = 80, fresh = 48, tile = 32;
    std::string split_counts = "3,4,6";
    int split_size = 32;
    unsigned seed = 1;
    bool json = false;
};

// Everything `plab rounding` shows, text or JSON: its three scenes.
struct RoundingResult {
    OrdersScene orders;  // 1. one list of floats added in several orders
    TilesScene tiles;    // 2. a softmax denominator tiled three ways
    SplitsScene splits;  // 3. the same weights split by count and by size
    unsigned seed = 1;   // of scene 2's random scores
};

RoundingResult compute_rounding(const RoundingOptions& o) {
    RoundingResult r;
    r.orders = orders_scene(parse_float_list(o.values, "--values"));
    r.tiles = tiles_scene(o.cached, o.fresh, o.tile, o.seed);
    r.splits = splits_scene(r.tiles.weights, parse_int_list(o.split_counts, "--split-counts"),
                            o.split_size);
    r.seed = o.seed;
    return r;
}

nlohmann::json rounding_piece_json(const PieceSum& p) {
    nlohmann::json pieces = nlohmann::json::array();
    for (std::size_t i = 0; i < p.pieces.size(); ++i)
        pieces.push_back({{"start", p.starts[i]}, {"sum", p.pieces[i]}});
    return {{"name", p.name}, {"pieces", pieces}, {"sum", p.sum}, {"bits", float_bits(p.sum)}};
}

nlohmann::json rounding_json(const RoundingResult& r) {
    nlohmann::json j;
    nlohmann::json ord = nlohmann::json::array();
    for (const OrderedSum& s : r.orders.orders)
        ord.push_back(
            {{"name", s.name}, {"how", s.how}, {"sum", s.sum}, {"bits", float_bits(s.sum)}});
    j["orders"] = {{"values", r.orders.values}, {"exact", r.orders.exact}, {"sums", ord}};
    j["tiles"] = {{"cached", r.tiles.cached},
                  {"new", r.tiles.fresh},
                  {"tile", r.tiles.tile},
                  {"seed", r.seed},
                  {"full", rounding_piece_json(r.tiles.full)},
                  {"separate", rounding_piece_json(r.tiles.separate)},
                  {"appended", rounding_piece_json(r.tiles.appended)}};
    nlohmann::json counts = nlohmann::json::array();
    for (const PieceSum& p : r.splits.by_count) counts.push_back(rounding_piece_json(p));
    j["splits"] = {{"keys", r.splits.n},
                   {"by_count", counts},
                   {"by_size", rounding_piece_json(r.splits.by_size)}};
    return j;
}

// "  name  3.85000014  0x40766667  (+1 ulp)" against `base`.
void print_rounding_sum(const std::string& name, float sum, float base, int width) {
    const long long ulps = ulps_between(sum, base);
    std::printf("  %-*s %.9g  %s  %s\n", width, name.c_str(), sum, float_bits(sum).c_str(),
                ulps == 0 ? "same bits" : (std::to_string(ulps) + " ulp apart").c_str());
}

void print_rounding_pieces(const PieceSum& p, float base) {
    std::printf("  %s\n    pieces from key:", p.name.c_str());
    for (std::size_t i = 0; i < p.starts.size(); ++i) std::printf(" %d", p.starts[i]);
    std::printf("\n");
    print_rounding_sum("    sum", p.sum, base, 4);
}

void print_rounding_text(const RoundingResult& r) {
    const OrdersScene& orders = r.orders;
    std::printf("1. The same %zu floats added in different orders\n", orders.values.size());
    const float first = orders.orders.front().sum;
    const float nearest = static_cast<float>(orders.exact);
    std::printf("  exact sum %.17g (in double); the nearest float: %.9g  %s\n", orders.exact,
                nearest, float_bits(nearest).c_str());
    for (const OrderedSum& s : orders.orders) {
        print_rounding_sum(s.name, s.sum, first, 14);
        std::printf("  %-14s %s\n", "", s.how.c_str());
    }
    std::printf(
        "  Each add rounds to the nearest float; another grouping rounds at other places.\n\n");

    const TilesScene& tiles = r.tiles;
    std::printf(
        "2. The last query's softmax denominator over %d cached + %d new keys, tiles of %d "
        "keys\n",
        tiles.cached, tiles.fresh, tiles.tile);
    print_rounding_pieces(tiles.full, tiles.full.sum);
    print_rounding_pieces(tiles.separate, tiles.full.sum);
    print_rounding_pieces(tiles.appended, tiles.full.sum);
    std::printf(
        "  Tiles that restart at the chunk's first key move with the chunk plan; tiles\n"
        "  aligned to key 0 do not, so chunked prefill keeps full prefill's bits.\n\n");

    const SplitsScene& splits = r.splits;
    std::printf("3. The same %d weights split for parallelism (split-K, FlashDecoding)\n",
                splits.n);
    for (const PieceSum& p : splits.by_count) print_rounding_pieces(p, splits.by_size.sum);
    print_rounding_pieces(splits.by_size, splits.by_size.sum);
    std::printf(
        "  A kernel that picks the number of splits (from the batch, the context, the\n"
        "  device) moves the boundaries; a fixed split size never does.\n");
}

void run(const RoundingOptions& o) {
    const RoundingResult r = compute_rounding(o);
    if (o.json)
        print_json(rounding_json(r));
    else
        print_rounding_text(r);
}

}  // namespace

void add_rounding_command(CLI::App& app) {
    auto o = std::make_shared<RoundingOptions>();
    CLI::App* cmd = app.add_subcommand(
        "rounding", "why fast kernels differ in the last bits: one sum in several orders");
    cmd->add_option("--values", o->values, "scene 1: the floats to add")->capture_default_str();
    cmd->add_option("--cached", o->cached, "scene 2: keys already in the KV cache")
        ->capture_default_str();
    cmd->add_option("--new", o->fresh, "scene 2: keys of the new chunk")->capture_default_str();
    cmd->add_option("--tile", o->tile, "scene 2: keys per tile")->capture_default_str();
    cmd->add_option("--seed", o->seed, "scene 2: seed of the random scores")->capture_default_str();
    cmd->add_option("--split-counts", o->split_counts, "scene 3: numbers of splits to compare")
        ->capture_default_str();
    cmd->add_option("--split-size", o->split_size, "scene 3: keys per split of the fixed size")
        ->capture_default_str();
    cmd->add_flag("--json", o->json, "machine-readable output");
    cmd->callback([o] { run(*o); });
}

}  // namespace plab::cli
