// `plab flash`: FlashAttention by hand. The toy's attention walked key tile by
// key tile with the online softmax (src/toy/flash_toy.h): per query and tile the
// scores, the running max m, the rescale exp(m_old - m), l and acc, then acc / l
// beside the whole softmax's output, bit for bit. Lesson: 17 (FlashAttention).
#include "cli/cmd_flash.h"

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

// Which of the two walks: the toy (default) or a model head (--model, --layer
// or --head named). Flags of the one given to the other are refused, not ignored.
struct FlashFlags {
    CLI::Option *tile, *q, *k, *v, *model, *layer, *head, *chunks;
    PromptOptions* prompt;
};

void run(const FlashOptions& o, FlashModelOptions& m, const FlashFlags& f) {
    const bool model = f.model->count() + f.layer->count() + f.head->count() > 0;
    if (model) {
        PLAB_CHECK(f.q->count() + f.k->count() + f.v->count() == 0,
                   "--q, --k and --v are the toy's vectors; a model head (--model, --layer, "
                   "--head) takes its q, k and v from the model: drop one or the other");
        m.tile = f.tile->count() > 0 ? o.tile : 0;
        PLAB_CHECK(f.tile->count() == 0 || o.tile >= 1,
                   "--tile " << o.tile
                             << " must be at least 1 (keys per tile; leave it out for "
                                "the gpu kernel's own)");
        m.mask = o.mask;
        m.json = o.json;
        run_flash_model(m);
        return;
    }
    PLAB_CHECK(f.chunks->count() == 0 && !f.prompt->given(),
               "--chunks and a prompt are for a model head: add --layer L --head H "
               "(and --model M), or drop them for the toy");
    const FlashResult r = compute_flash(o);
    if (o.json)
        print_json(flash_json(r));
    else
        print_flash_text(r);
}

}  // namespace

void add_flash_command(CLI::App& app) {
    auto o = std::make_shared<FlashOptions>();
    auto m = std::make_shared<FlashModelOptions>();
    auto f = std::make_shared<FlashFlags>();
    CLI::App* cmd = app.add_subcommand(
        "flash",
        "FlashAttention by hand: the softmax online, key tile by key tile (the toy, or a model "
        "head in the gpu kernel's order)");
    f->tile = cmd->add_option("--tile", o->tile,
                              "keys per tile, aligned to position 0 (toy: default 2; a model "
                              "head: default the gpu kernel's own)");
    f->q = cmd->add_option("--q", o->q, "toy: queries q_p, one per position (default: all 1)");
    f->k = cmd->add_option("--k", o->k, "toy: keys k_p (default: all 1)");
    f->v = cmd->add_option("--v", o->v, "toy: values v_p (default 2,4,8,10)");
    add_mask_option(cmd, o->mask);
    add_model_option(cmd, m->model);
    f->model = cmd->get_option("--model");
    f->layer = cmd->add_option("--layer", m->layer, "a model head: its layer (default 0)");
    f->head = cmd->add_option("--head", m->head, "a model head: its query head (default 0)");
    f->chunks =
        cmd->add_option("--chunks", m->chunks,
                        "a model head: the prefill's chunk plan (\"full\", \"4\", \"3,1,4\")");
    m->prompt.add_to(cmd);
    f->prompt = &m->prompt;
    cmd->add_flag("--json", o->json, "every step's m, l, rescale and acc, machine-readable");
    cmd->callback([o, m, f] { run(*o, *m, *f); });
}

}  // namespace plab::cli
