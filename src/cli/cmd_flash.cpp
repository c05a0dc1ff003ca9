// `plab flash`: FlashAttention by hand. The toy's attention walked key tile by
// key tile with the online softmax (src/toy/flash_toy.h): per query and tile the
// scores, the running max m, the rescale exp(m_old - m), l and acc, then acc / l
// beside the whole softmax's output, bit for bit. Lesson: 17 (FlashAttention).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/common.h"
#include "core/error.h"
#include "runtime/registry.h"
#include "toy/flash_toy.h"

namespace plab::cli {
namespace {

struct FlashOptions {
    std::string q, k;  // default: all 1
    std::string v = "2,4,8,10";
    int tile = 2;
    std::string mask = "causal";
    bool json = false;
};

struct FlashResult {
    ToyInput input;
    std::string backend;  // the whole softmax's (cpu-ref)
    FlashToyRun run;
};

FlashResult compute_flash(const FlashOptions& o) {
    FlashResult r;
    r.input.values = parse_float_list(o.v, "--v");
    const std::size_t n = r.input.values.size();
    r.input.queries = o.q.empty() ? std::vector<float>(n, 1.0f) : parse_float_list(o.q, "--q");
    r.input.keys = o.k.empty() ? std::vector<float>(n, 1.0f) : parse_float_list(o.k, "--k");
    auto backend = make_backend("cpu-ref");
    r.backend = backend->name();
    r.run = run_flash_toy(r.input, o.tile, *backend, o.mask);
    return r;
}

// -inf as the lessons write it; every other value with enough digits to be exact.
std::string flash_number(float x) {
    return std::isinf(x) ? (x < 0 ? "-inf" : "inf") : exact(x);
}

// The keys a tile's query sees: "2-3" when they follow each other, else "2,4".
std::string seen_keys(const std::vector<int>& keys) {
    bool runs = true;
    for (std::size_t i = 1; i < keys.size(); ++i) runs = runs && keys[i] == keys[i - 1] + 1;
    if (runs && !keys.empty())
        return std::to_string(keys.front()) + "-" + std::to_string(keys.back());
    std::string out;
    for (int k : keys) out += (out.empty() ? "" : ",") + std::to_string(k);
    return out;
}

const char* tile_kind(TileClass c) {
    return c == TileClass::empty ? "empty" : c == TileClass::partial ? "partial" : "full";
}

std::string flash_scores(const std::vector<float>& s) {
    std::string out;
    for (float x : s) out += (out.empty() ? "" : ",") + flash_number(x);
    return out;
}

void print_flash_query(const FlashQuery& q) {
    std::printf("query %d: keys %d..%d\n", q.position, q.key_lo, q.key_hi);
    std::printf("  %4s  %-7s %-16s %10s %10s %11s %12s %12s\n", "tile", "keys", "scores", "m_old",
                "m", "rescale", "l", "acc");
    for (const FlashTile& t : q.tiles) {
        const std::string keys = t.kind == TileClass::empty
                                     ? std::to_string(t.key_lo) + "-" + std::to_string(t.key_hi)
                                     : seen_keys(t.keys);
        if (t.kind == TileClass::empty) {  // never loaded: m, l and acc stay
            std::printf("  %4d  %-7s skipped: the mask hides every key of this tile\n", t.tile,
                        keys.c_str());
            continue;
        }
        std::printf("  %4d  %-7s %-16s %10s %10s %11s %12s %12s\n", t.tile, keys.c_str(),
                    flash_scores(t.scores).c_str(), flash_number(t.m_old).c_str(),
                    flash_number(t.m).c_str(), flash_number(t.rescale).c_str(),
                    flash_number(t.l).c_str(), flash_number(t.acc).c_str());
    }
    std::printf("  output acc / l = %s; whole softmax %s%s; bitwise equal: %s",
                exact(q.output).c_str(), exact(q.full).c_str(),
                q.exact.empty() ? "" : (" (" + q.exact + ")").c_str(), q.ulps == 0 ? "yes" : "no");
    if (q.ulps != 0) std::printf(" (%lld ulp%s apart)", q.ulps, q.ulps == 1 ? "" : "s");
    std::printf("\n");
}

void print_flash_text(const FlashResult& r) {
    const FlashToyRun& run = r.run;
    std::printf(
        "FlashAttention by hand: the toy (one head, head dimension 1, causal), key tiles "
        "of %d\n",
        run.tile_width);
    std::printf(
        "Each query takes its keys one tile at a time, keeping a running max m, a\n"
        "denominator l = sum exp(s - m) and an output acc = sum exp(s - m) * v. A tile\n"
        "that raises m first multiplies l and acc by rescale = exp(m_old - m).\n"
        "At the end, output = acc / l.\n\n");
    for (const FlashQuery& q : run.queries) print_flash_query(q);
    int same = 0;
    for (const FlashQuery& q : run.queries) same += q.ulps == 0;
    std::printf(
        "\n%d of %zu outputs bitwise equal to the whole softmax (plab toy, %s); %d rescale%s "
        "(a later tile raised the max).\n",
        same, run.queries.size(), r.backend.c_str(), run.rescales, run.rescales == 1 ? "" : "s");
    if (run.skipped > 0)
        std::printf(
            "%d tile%s skipped: inside a query's key range, but hidden by the mask "
            "(never loaded).\n",
            run.skipped, run.skipped == 1 ? "" : "s");
}

nlohmann::json flash_json(const FlashResult& r) {
    nlohmann::json j;
    j["tile"] = r.run.tile_width;
    j["backend"] = r.backend;
    j["q"] = r.input.queries;
    j["k"] = r.input.keys;
    j["v"] = r.input.values;
    nlohmann::json queries = nlohmann::json::array();
    for (const FlashQuery& q : r.run.queries) {
        nlohmann::json steps = nlohmann::json::array();
        for (const FlashTile& t : q.tiles) {
            // m_old of the first tile is -inf: null in JSON (the first tile has no m before it).
            // "keys": the tile's span [first, last]; "seen": those the query sees in it
            // (none in an "empty" tile, which is skipped: m, l and acc stay).
            steps.push_back(
                {{"tile", t.tile},
                 {"class", tile_kind(t.kind)},
                 {"keys", {t.key_lo, t.key_hi}},
                 {"seen", t.keys},
                 {"scores", t.scores},
                 {"m_old", std::isinf(t.m_old) ? nlohmann::json() : nlohmann::json(t.m_old)},
                 {"m", t.m},
                 {"rescale", t.rescale},
                 {"l", t.l},
                 {"acc", t.acc}});
        }
        queries.push_back({{"query", q.position},
                           {"steps", steps},
                           {"output", q.output},
                           {"full", q.full},
                           {"bitwise_equal", q.ulps == 0},
                           {"ulps", q.ulps}});
    }
    j["queries"] = queries;
    j["rescales"] = r.run.rescales;
    j["skipped"] = r.run.skipped;
    j["mask"] = r.run.mask;
    j["all_bitwise_equal"] = r.run.all_bitwise;
    return j;
}

void run(const FlashOptions& o) {
    const FlashResult r = compute_flash(o);
    if (o.json)
        print_json(flash_json(r));
    else
        print_flash_text(r);
}

}  // namespace

void add_flash_command(CLI::App& app) {
    auto o = std::make_shared<FlashOptions>();
    CLI::App* cmd = app.add_subcommand(
        "flash", "FlashAttention by hand: the toy's softmax online, key tile by key tile");
    cmd->add_option("--tile", o->tile, "keys per tile, aligned to position 0")
        ->capture_default_str();
    cmd->add_option("--q", o->q, "queries q_p, one per position (default: all 1)");
    cmd->add_option("--k", o->k, "keys k_p (default: all 1)");
    cmd->add_option("--v", o->v, "values v_p")->capture_default_str();
    add_mask_option(cmd, o->mask);
    cmd->add_flag("--json", o->json, "every step's m, l, rescale and acc, machine-readable");
    cmd->callback([o] { run(*o); });
}

}  // namespace plab::cli
