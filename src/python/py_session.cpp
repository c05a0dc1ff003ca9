// prefill_lab.Session: one sequence's prefill and decode, and everything the
// engine lets a caller see of them.
//
// What it teaches: prefill leaves every position's K and V in a paged KV
// cache (a block table maps logical blocks to physical ones); the first new
// token comes from the last position's logits; each decode step adds one
// position. The probes (attention probabilities and scores, logits of every
// position) are the runtime's own (runtime/forward.h ForwardProbes), the
// ones `plab eval` scores heads with and the viewer draws.
// Lessons: 02-prefill-and-the-kv-cache.md, 03-chunked-prefill.md, 14-decode.md.
#include "python/py_session.h"

#include "core/error.h"
#include "runtime/sampler.h"

namespace plab::py {
namespace {

using namespace pybind11::literals;

const ModelConfig& config_of(const PySession& s) {
    return s.engine->model->model.weights.config;
}

// The index of (layer, head) among the last prefill's probes.
std::size_t probe_index(const PySession& s, int layer, int head) {
    for (std::size_t i = 0; i < s.probes.size(); ++i)
        if (s.probes[i].layer == layer && s.probes[i].head == head) return i;
    PLAB_CHECK(false, "attention of layer " << layer << " head " << head
                                            << " was not probed by the last prefill; prefill "
                                               "with attention='all' or attention=[("
                                            << layer << ", " << head << ")]");
    return 0;
}

pyb::array_t<float> attention_map(const PySession& s, int layer, int head, bool scores) {
    const AttentionMap& m = s.last.attention[probe_index(s, layer, head)];
    PLAB_CHECK(!scores || !m.scores.empty(),
               "the last prefill did not keep attention scores; prefill with scores=True");
    std::vector<float> v = scores ? m.scores : m.probs;
    return to_numpy(std::move(v), {m.n_queries, m.n_keys});
}

// Every probed map stacked: (P, Tq, Tk) in probe order.
pyb::array_t<float> attention_stack(const PySession& s, bool scores) {
    PLAB_CHECK(!s.last.attention.empty(),
               "the last prefill probed no attention; prefill with attention='all'");
    const AttentionMap& first = s.last.attention.front();
    std::vector<float> all;
    for (const AttentionMap& m : s.last.attention) {
        PLAB_CHECK(!scores || !m.scores.empty(),
                   "the last prefill did not keep attention scores; prefill with scores=True");
        const std::vector<float>& v = scores ? m.scores : m.probs;
        all.insert(all.end(), v.begin(), v.end());
    }
    return to_numpy(std::move(all), {static_cast<pyb::ssize_t>(s.last.attention.size()),
                                     first.n_queries, first.n_keys});
}

pyb::array_t<float> kv_of(const PySession& s, int layer, KvPart part) {
    const ModelConfig& c = config_of(s);
    PLAB_CHECK(layer >= 0 && layer < c.n_layers,
               "layer " << layer << " is out of range; valid layers are 0.." << c.n_layers - 1);
    return to_numpy(s.session->read_kv(layer, part),
                    {s.session->length(), c.n_kv_heads, c.head_dim});
}

KvPart part_of(const std::string& part) {
    PLAB_CHECK(part == "k" || part == "v", "KV part '" << part << "' is not 'k' or 'v'");
    return part == "k" ? KvPart::K : KvPart::V;
}

// The physical pool of one layer, every block whether this sequence owns it or not.
pyb::array_t<float> pool_of(const PySession& s, int layer, const std::string& part) {
    const ModelConfig& c = config_of(s);
    PLAB_CHECK(layer >= 0 && layer < c.n_layers,
               "layer " << layer << " is out of range; valid layers are 0.." << c.n_layers - 1);
    const KvCache& cache = s.session->cache();
    const Buffer buf =
        part_of(part) == KvPart::K ? cache.storage().k_pool(layer) : cache.storage().v_pool(layer);
    std::vector<float> host(buf.size);
    s.engine->loaded.backend().download(host.data(), buf, buf.size);
    return to_numpy(std::move(host), {cache.blocks().num_blocks(), cache.blocks().block_size(),
                                      c.n_kv_heads, c.head_dim});
}

}  // namespace

pyb::list trace_spans(const Trace& t) {
    pyb::list out;
    for (const TraceEvent& e : t.events()) {
        pyb::dict d;
        d["name"] = e.name;
        d["category"] = e.category;
        d["start_us"] = e.start_us;
        d["dur_us"] = e.dur_us;
        d["args"] = e.args;
        out.append(std::move(d));
    }
    return out;
}

ForwardProbes probes_from(const ModelConfig& c, const pyb::object& attention, bool scores,
                          bool all_logits) {
    ForwardProbes p;
    p.all_logits = all_logits;
    p.attention_scores = scores;
    if (attention.is_none()) {
        PLAB_CHECK(!scores, "scores=True needs attention='all' or a list of (layer, head)");
        return p;
    }
    if (pyb::isinstance<pyb::str>(attention)) {
        PLAB_CHECK(attention.cast<std::string>() == "all",
                   "attention='" << attention.cast<std::string>()
                                 << "' is not 'all'; give 'all' or a list of (layer, head)");
        for (int l = 0; l < c.n_layers; ++l)
            for (int h = 0; h < c.n_heads; ++h) p.attention.push_back({l, h});
        return p;
    }
    // A list of pairs; the runtime checks their ranges (forward_step).
    for (const pyb::handle item : attention) {
        std::pair<int, int> pair;
        try {
            pair = item.cast<std::pair<int, int>>();
        } catch (const pyb::cast_error&) {
            PLAB_CHECK(false, "attention item " << pyb::repr(item).cast<std::string>()
                                                << " is not a (layer, head) pair of integers");
        }
        p.attention.push_back({pair.first, pair.second});
    }
    return p;
}

void prefill_into(PySession& s, const std::vector<int32_t>& tokens, const std::string& chunks,
                  const ForwardProbes& probes) {
    const ChunkPlan plan = parse_chunk_plan(chunks, static_cast<int>(tokens.size()));
    const int pos0 = s.session->length();
    s.last = s.session->prefill(tokens, plan, probes);
    s.last_pos0 = pos0;
    s.probes = probes.attention;
    s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
}

using SessionClass = pyb::class_<PySession, std::shared_ptr<PySession>>;

// What the session is: its backend, mask, tokens, length and last chunk plan.
void bind_session_state(SessionClass& c) {
    c.def_property_readonly(
         "backend", [](const PySession& s) { return s.engine->loaded.backend().name(); },
         "The backend's name, e.g. 'cpu-ref' or 'gpu (emulated)'.")
        .def_property_readonly(
            "mask", [](const PySession& s) { return s.session->mask().spec(); },
            "The mask spec every prefill and decode step of this session uses.")
        .def_property_readonly(
            "tokens", [](const PySession& s) { return s.tokens; },
            "Every token id in the cache, in position order.")
        .def_property_readonly(
            "length", [](const PySession& s) { return s.session->length(); },
            "Positions in the KV cache (T so far).")
        .def_property_readonly(
            "plan", [](const PySession& s) { return s.last.plan.lengths; },
            "The chunk lengths of the last prefill.")
        .def_property_readonly(
            "prefill_ms", [](const PySession& s) { return s.last.prefill_us / 1000; },
            "Wall time of the last prefill's chunks (one cold run), milliseconds.");
}

// The last prefill's logits: the first new token comes from the last position's row.
void bind_session_logits(SessionClass& c) {
    c.def_property_readonly(
         "last_logits",
         [](const PySession& s) {
             return to_numpy(std::vector(s.last.last_logits),
                             {static_cast<pyb::ssize_t>(s.last.last_logits.size())});
         },
         "(V,) logits of the last prefilled position: the first new token's distribution.")
        .def_property_readonly(
            "logits",
            [](const PySession& s) -> pyb::object {
                if (s.last.all_logits.empty()) return pyb::none();
                const int v = config_of(s).vocab_size;
                return to_numpy(std::vector(s.last.all_logits),
                                {static_cast<pyb::ssize_t>(s.last.all_logits.size() / v), v});
            },
            "(C, V) logits of every position of the last prefill, or None unless it was\n"
            "asked with all_logits=True (an engine computes only the last row).")
        .def_property_readonly(
            "first_token",
            [](const PySession& s) { return argmax(std::span<const float>(s.last.last_logits)); },
            "The greedy first token: argmax of last_logits (lowest id on ties).")
        .def(
            "top",
            [](const PySession& s, int k) {
                PLAB_CHECK(k >= 1, "top k " << k << " must be at least 1");
                pyb::list out;
                for (const TokenProb& p : top_probs(s.last.last_logits, k))
                    out.append(pyb::make_tuple(
                        p.token, s.engine->model->model.tokenizer->token_text(p.token), p.prob));
                return out;
            },
            "k"_a = 5,
            "The k most likely first tokens as (id, text, probability), as `plab prefill`\n"
            "prints its Top-k.");
}

// The attention maps the last prefill probed, as the viewer draws them.
void bind_session_attention(SessionClass& c) {
    c.def_property_readonly(
         "probes",
         [](const PySession& s) {
             std::vector<std::pair<int, int>> out;
             for (const AttentionProbe& p : s.probes) out.emplace_back(p.layer, p.head);
             return out;
         },
         "The (layer, head) pairs the last prefill probed, in the order of\n"
         "attention_probs.")
        .def_property_readonly(
            "query_pos0", [](const PySession& s) { return s.last_pos0; },
            "Position of the last prefill's first query: row i of an attention map is\n"
            "position query_pos0 + i; column j is key position j.")
        .def(
            "attention",
            [](const PySession& s, int layer, int head) {
                return attention_map(s, layer, head, false);
            },
            "layer"_a, "head"_a,
            "(Tq, Tk) attention probabilities of one head in the last prefill, masked\n"
            "cells 0. Computed by the backend that ran it.")
        .def(
            "scores",
            [](const PySession& s, int layer, int head) {
                return attention_map(s, layer, head, true);
            },
            "layer"_a, "head"_a,
            "(Tq, Tk) scaled scores q·k/sqrt(Dh) of one head (with the mask's modifiers),\n"
            "masked cells -inf. Needs scores=True in the prefill.")
        .def_property_readonly(
            "attention_probs", [](const PySession& s) { return attention_stack(s, false); },
            "(P, Tq, Tk): every probed head's probabilities, in the order of probes.\n"
            "With attention='all', reshape to (L, H, Tq, Tk).")
        .def_property_readonly(
            "attention_scores", [](const PySession& s) { return attention_stack(s, true); },
            "(P, Tq, Tk): every probed head's scores (scores=True), in the order of probes.");
}

// The KV cache as it is: keys and values by position, the pools, the block table.
void bind_session_kv(SessionClass& c) {
    c.def(
         "k", [](const PySession& s, int layer) { return kv_of(s, layer, KvPart::K); }, "layer"_a,
         "(T, Hkv, Dh) keys of every cached position of one layer, in position order\n"
         "(read through the block table). Freed positions (a sliding window's old\n"
         "blocks) read as 0.")
        .def(
            "v", [](const PySession& s, int layer) { return kv_of(s, layer, KvPart::V); },
            "layer"_a, "(T, Hkv, Dh) values of every cached position of one layer.")
        .def("pool", &pool_of, "layer"_a, "part"_a = "k",
             "(num_blocks, B, Hkv, Dh): the physical K ('k') or V ('v') block pool of one\n"
             "layer. Position p lives in block block_table[p // B], row p % B.")
        .def_property_readonly(
            "block_table", [](const PySession& s) { return s.session->sequence().block_table; },
            "Physical block of each logical block of this sequence (-1: freed, the mask\n"
            "lets no later query see it).")
        .def_property_readonly(
            "block_size",
            [](const PySession& s) { return s.session->cache().blocks().block_size(); },
            "B: positions per KV block.")
        .def_property_readonly(
            "num_blocks",
            [](const PySession& s) { return s.session->cache().blocks().num_blocks(); },
            "Blocks in this session's pool.")
        .def_property_readonly(
            "blocks_in_use",
            [](const PySession& s) { return s.session->cache().blocks().blocks_in_use(); },
            "Blocks this sequence holds now.")
        .def_property_readonly(
            "kv_bytes", [](const PySession& s) { return s.session->cache().bytes_in_use(); },
            "Bytes of the blocks in use (whole blocks).")
        .def_property_readonly(
            "kv_bytes_per_token",
            [](const PySession& s) { return s.session->cache().storage().bytes_per_token(); },
            "Bytes of K and V one position takes across all layers.");
}

// Going on: more prompt (extend), one decode step, and the trace of both.
void bind_session_steps(SessionClass& c) {
    c.def(
         "extend",
         [](PySession& s, const pyb::object& prompt, const std::string& chunks, bool bos,
            bool all_logits, const pyb::object& attention, bool scores) {
             const std::vector<int32_t> ids = resolve_prompt(s.engine->model->model, prompt, bos);
             prefill_into(s, ids, chunks, probes_from(config_of(s), attention, scores, all_logits));
         },
         "prompt"_a, "chunks"_a = "full", "bos"_a = false, "all_logits"_a = false,
         "attention"_a = pyb::none(), "scores"_a = false,
         "Prefills more tokens after the cached ones (a prompt given in parts), chunk\n"
         "plan `chunks`; the session's last_logits, logits and attention now describe\n"
         "this prefill (its queries attend to every cached key the mask allows).")
        .def(
            "decode_step",
            [](PySession& s, int32_t token) {
                std::vector<float> logits = s.session->decode_step(token);
                s.tokens.push_back(token);
                const auto n = static_cast<pyb::ssize_t>(logits.size());
                return to_numpy(std::move(logits), {n});
            },
            "token"_a,
            "One decode step: appends `token` at the next position (its K/V go into the\n"
            "cache) and returns the (V,) logits of that position.")
        .def_property_readonly(
            "trace", [](const PySession& s) { return trace_spans(*s.trace); },
            "The trace so far as a list of dicts {name, category, start_us, dur_us, args}:\n"
            "'prefill chunk' spans, 'prefill', a 'kv append' per layer and chunk (args:\n"
            "layer, positions, blocks), 'kv free'. Times in microseconds from the\n"
            "session's start; args are strings, as in the Chrome trace.")
        .def(
            "trace_json", [](const PySession& s) { return s.trace->to_chrome_json(); },
            "The trace as Chrome Trace Event JSON (open in Perfetto).")
        .def("__repr__", [](const PySession& s) {
            return "<prefill_lab.Session " + s.engine->loaded.backend().name() + ", " +
                   std::to_string(s.session->length()) + " positions, " +
                   std::to_string(s.session->cache().blocks().blocks_in_use()) + " KV blocks>";
        });
}

void bind_session(pyb::module_& m) {
    SessionClass c(
        m, "Session",
        "One sequence on an engine: its paged KV cache, what its last prefill returned\n"
        "and its trace. Made by Engine.prefill(); continue it with extend() (more prompt)\n"
        "or decode_step() (one new token). Arrays are float32 numpy arrays, row-major.");
    bind_session_state(c);
    bind_session_logits(c);
    bind_session_attention(c);
    bind_session_kv(c);
    bind_session_steps(c);
}

}  // namespace plab::py
