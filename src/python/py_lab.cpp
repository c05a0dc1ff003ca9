// The small pieces of the lab: the toy example, masks as matrices, chunk
// plans, and which backends exist.
//
// What it teaches: attention by hand (lesson 1: values 2, 4, 8, 10 give
// outputs 2, 3, 14/3, 6, through the same backend ops as the model); a mask
// is data (lesson 13: the matrix is the runtime's own Mask::visible, the rule
// every backend reads); a chunk plan is a list of lengths (lesson 3).
// Lessons: 01-toy-example.md, 03-chunked-prefill.md, 13-masks.md.
#include "core/error.h"
#include "python/py_common.h"
#include "runtime/generate.h"
#include "runtime/registry.h"
#include "toy/toy.h"

namespace plab::py {
namespace {

using namespace pybind11::literals;

// A mask spec bound to a prompt of `length` positions: the token ids given
// (for docs:bos), or zeros; n_heads for the ALiBi slopes.
BoundMask bound_mask(const std::string& spec, int length, const pyb::object& tokens, int bos_id,
                     int n_heads) {
    PLAB_CHECK(length >= 1 && length <= 4096,
               "length " << length << " must be between 1 and 4096 positions");
    std::vector<int32_t> ids(static_cast<std::size_t>(length), 0);
    if (!tokens.is_none()) {
        ids = tokens.cast<std::vector<int32_t>>();
        PLAB_CHECK(static_cast<int>(ids.size()) == length,
                   "tokens gives " << ids.size() << " ids but length is " << length
                                   << "; give one id per position");
    }
    MaskContext mc;
    mc.tokens = ids;
    mc.bos_id = bos_id;
    mc.n_heads = n_heads;
    return make_mask(spec, mc);
}

pyb::array_t<bool> mask_matrix(const std::string& spec, int length, const pyb::object& tokens,
                               int bos_id) {
    const BoundMask bound = bound_mask(spec, length, tokens, bos_id, 1);
    const Mask mask = bound.view();
    pyb::array_t<bool> out({length, length});
    auto cells = out.mutable_unchecked<2>();
    for (int q = 0; q < length; ++q)
        for (int k = 0; k < length; ++k) cells(q, k) = mask.visible(q, k);
    return out;
}

pyb::array_t<int8_t> mask_tiles(const std::string& spec, int length, int tile,
                                const pyb::object& tokens, int bos_id) {
    PLAB_CHECK(tile >= 1 && tile <= length,
               "tile " << tile << " must be between 1 and the length " << length);
    const BoundMask bound = bound_mask(spec, length, tokens, bos_id, 1);
    const std::vector<TileClass> map = tile_map(bound.view(), length, tile);
    const int tiles = (length + tile - 1) / tile;
    pyb::array_t<int8_t> out({tiles, tiles});
    auto cells = out.mutable_unchecked<2>();
    for (int i = 0; i < tiles; ++i)
        for (int j = 0; j < tiles; ++j)
            cells(i, j) = static_cast<int8_t>(map[std::size_t(i) * tiles + j]);
    return out;
}

pyb::dict toy(const std::vector<float>& values, const pyb::object& queries, const pyb::object& keys,
              const std::string& chunks, const std::string& backend, const std::string& mask_spec) {
    ToyInput in;
    in.values = values;
    const std::size_t n = values.size();
    in.queries =
        queries.is_none() ? std::vector<float>(n, 1.0f) : queries.cast<std::vector<float>>();
    in.keys = keys.is_none() ? std::vector<float>(n, 1.0f) : keys.cast<std::vector<float>>();
    in.validate();
    const int t = in.n_tokens();
    // As `plab toy` binds it: no tokenizer (docs:bos cannot apply), one head.
    const BoundMask bound = bound_mask(mask_spec, t, pyb::none(), -1, 1);
    const Mask mask = bound.view();
    const ChunkPlan plan = parse_chunk_plan(chunks, t);
    check_plan_for_mask(mask, plan);
    auto be = make_backend(backend);
    ToyRun run = run_toy(*be, in, plan, mask);
    pyb::dict out;
    out["backend"] = be->name();
    out["plan"] = run.plan.lengths;
    out["outputs"] = to_numpy(std::move(run.outputs), {t});
    out["probs"] = to_numpy(std::move(run.probs), {t, t});
    std::vector<std::string> exact;
    for (int p = 0; p < t; ++p) exact.push_back(toy_exact_output(in, p, mask));
    out["exact"] = exact;
    return out;
}

}  // namespace

void bind_lab(pyb::module_& m) {
    m.attr("DEFAULT_PROMPT") = kDefaultPrompt;
    m.def("backends", &backend_names,
          "Names Engine accepts: 'cpu-ref', 'cpu', then the GPU ones ('gpu-ref', 'gpu').");
    m.def("gpu_form", &gpu_form_description,
          "How 'gpu-ref' and 'gpu' run here: natively on a CUDA device, or emulated on\n"
          "the CPU (and why).");
    m.def(
        "chunk_plan",
        [](const std::string& text, int n_tokens) {
            return parse_chunk_plan(text, n_tokens).lengths;
        },
        "text"_a, "n_tokens"_a,
        "The chunk lengths of a plan as `--chunks` takes it: 'full', a size '4' (last\n"
        "chunk shorter), or lengths '3,1,4' that must sum to n_tokens. A bad plan raises\n"
        "prefill_lab.Error with the CLI's message.");
    m.def(
        "chunk_plans",
        [](int n_tokens) {
            PLAB_CHECK(n_tokens >= 1 && n_tokens <= 16,
                       "chunk_plans(" << n_tokens << "): give 1 to 16 tokens (2^(T-1) plans)");
            std::vector<std::vector<int>> out;
            for (const ChunkPlan& p : all_chunk_plans(n_tokens)) out.push_back(p.lengths);
            return out;
        },
        "n_tokens"_a, "Every chunk plan of n_tokens tokens (all 2^(T-1) compositions).");
    m.def("toy", &toy, "values"_a = std::vector<float>{2, 4, 8, 10}, "queries"_a = pyb::none(),
          "keys"_a = pyb::none(), "chunks"_a = "full", "backend"_a = "cpu-ref", "mask"_a = "causal",
          "The toy example of lesson 1, as `plab toy` runs it: one head, head dimension\n"
          "1, the backend's own kv_append into a paged cache (blocks of 2) and attention\n"
          "op, chunk plan `chunks`. queries and keys default to all 1, so each output is\n"
          "the mean of the visible values: 2, 4, 8, 10 -> 2, 3, 14/3, 6. Returns a dict:\n"
          "backend, plan, outputs (T,), probs (T, T) with masked cells 0, exact (the\n"
          "fraction each output should be, as text, when the scores are all equal).");
    m.def("mask_matrix", &mask_matrix, "spec"_a, "length"_a, "tokens"_a = pyb::none(),
          "bos_id"_a = -1,
          "(T, T) bool: may the query of row q see the key of column k under this mask\n"
          "spec (`plab mask --help`: causal, window:W, sink:S, dilated:W,D, chunked:L,\n"
          "prefix:P, docs:N1,N2,..., docs:bos, file:PATH; '+' is AND, '|' is OR). The\n"
          "runtime's own rule (core/mask.h Mask::visible), the one every backend reads.\n"
          "tokens (for docs:bos) default to zeros; bos_id is the id that starts a document.");
    m.def("mask_tiles", &mask_tiles, "spec"_a, "length"_a, "tile"_a, "tokens"_a = pyb::none(),
          "bos_id"_a = -1,
          "(tiles, tiles) int8: each (query tile x key tile) of `tile` positions is\n"
          "0 empty (a tiled kernel skips it), 1 partial (tests each cell) or 2 full.");
}

}  // namespace plab::py
