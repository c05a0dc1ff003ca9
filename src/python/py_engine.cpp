// prefill_lab.Engine: a model on one backend, and what runs on it — a
// prefill (a Session), a whole request (generate), the equivalence report.
//
// What it teaches: every client gets its backend and device model from an
// Engine (runtime/engine.h); one prompt's prefill is a Session on it. The
// equivalence report is the one `plab prefill` prints: chunked prefill must
// equal full prefill, bit for bit on reference backends, within a stated
// tolerance on fast ones (lesson 4).
// Lessons: 03-chunked-prefill.md, 04-bitwise-equivalence.md, 05-ttft-is-not-prefill.md.
#include "core/error.h"
#include "python/py_session.h"
#include "runtime/equivalence.h"
#include "runtime/generate.h"

namespace plab::py {
namespace {

using namespace pybind11::literals;

// A prefill's leftovers that must not depend on the plan, as numpy arrays.
struct PySnapshot {
    PrefillSnapshot snap;
    int n_kv_heads = 0;
    int head_dim = 0;
    double prefill_us = 0;
};

// Per-layer (T, Hkv·Dh) rows stacked into one (L, T, Hkv, Dh) array.
pyb::array_t<float> stack_layers(const std::vector<std::vector<float>>& layers, int hkv, int dh) {
    std::vector<float> all;
    for (const auto& l : layers) all.insert(all.end(), l.begin(), l.end());
    const auto n_layers = static_cast<pyb::ssize_t>(layers.size());
    const pyb::ssize_t t = layers.empty() ? 0 : layers.front().size() / (std::size_t(hkv) * dh);
    return to_numpy(std::move(all), {n_layers, t, hkv, dh});
}

pyb::dict difference_dict(const Difference& d) {
    pyb::dict out;
    out["logits_max_abs_diff"] = d.logits_max_abs;
    out["kv_max_abs_diff"] = d.kv_max_abs;
    out["logits_bitwise"] = d.logits_bitwise;
    out["kv_bitwise"] = d.kv_bitwise;
    out["same_first_token"] = d.same_argmax;
    out["bitwise"] = d.bitwise();
    return out;
}

// The session options of one prompt: block size, pool size and the mask bound to it.
SessionOptions session_options(const Model& model, const std::vector<int32_t>& tokens,
                               const std::string& mask, int block_size, int num_blocks) {
    SessionOptions so;
    so.block_size = block_size;
    so.num_blocks = num_blocks;
    so.mask = bind_mask_for(mask, tokens, model);
    return so;
}

std::shared_ptr<PySession> prefill(const std::shared_ptr<PyEngine>& e, const pyb::object& prompt,
                                   const std::string& chunks, const std::string& mask,
                                   int block_size, int num_blocks, bool bos, bool all_logits,
                                   const pyb::object& attention, bool scores) {
    const Model& model = e->model->model;
    const std::vector<int32_t> tokens = resolve_prompt(model, prompt, bos);
    // The CLI's order of checks, so a bad plan gets the CLI's message first.
    parse_chunk_plan(chunks, static_cast<int>(tokens.size()));
    const SessionOptions so = session_options(model, tokens, mask, block_size, num_blocks);
    const ForwardProbes probes = probes_from(model.weights.config, attention, scores, all_logits);
    auto s = std::make_shared<PySession>();
    s->engine = e;
    s->trace = std::make_unique<Trace>();
    s->session = std::make_unique<Session>(e->loaded.device(), so, s->trace.get());
    prefill_into(*s, tokens, chunks, probes);
    return s;
}

std::shared_ptr<PySnapshot> snapshot(const PyEngine& e, const pyb::object& prompt,
                                     const std::string& chunks, const std::string& mask,
                                     int block_size, bool bos) {
    const Model& model = e.model->model;
    const std::vector<int32_t> tokens = resolve_prompt(model, prompt, bos);
    const ChunkPlan plan = parse_chunk_plan(chunks, static_cast<int>(tokens.size()));
    const SessionOptions so = session_options(model, tokens, mask, block_size, 0);
    auto s = std::make_shared<PySnapshot>();
    s->snap = run_prefill_snapshot(e.loaded.device(), tokens, plan, so, &s->prefill_us);
    s->n_kv_heads = model.weights.config.n_kv_heads;
    s->head_dim = model.weights.config.head_dim;
    return s;
}

// `plab prefill`'s report: this plan against the whole prompt at once, or,
// when the plan is the whole prompt, against one token at a time (as far as
// the mask allows).
pyb::dict equivalence(const PyEngine& e, const pyb::object& prompt, const std::string& chunks,
                      const pyb::object& against, const std::string& mask, int block_size,
                      bool bos) {
    const Model& model = e.model->model;
    const std::vector<int32_t> tokens = resolve_prompt(model, prompt, bos);
    const int t = static_cast<int>(tokens.size());
    const ChunkPlan plan = parse_chunk_plan(chunks, t);
    const SessionOptions so = session_options(model, tokens, mask, block_size, 0);
    check_plan_for_mask(so.mask.view(), plan);
    ChunkPlan other;
    if (!against.is_none()) {
        other = parse_chunk_plan(against.cast<std::string>(), t);
        check_plan_for_mask(so.mask.view(), other);
    } else {
        other = plan.lengths.size() == 1
                    ? nearest_valid_plan(so.mask.view(), fixed_chunk_plan(t, 1))
                    : ChunkPlan{{t}};
    }
    const DeviceModel& dm = e.loaded.device();
    const Difference d = compare_snapshots(run_prefill_snapshot(dm, tokens, plan, so),
                                           run_prefill_snapshot(dm, tokens, other, so));
    pyb::dict out = difference_dict(d);
    out["backend"] = e.loaded.backend().name();
    out["plan"] = plan.to_string();
    out["compared_plan"] = other.to_string();
    return out;
}

pyb::dict generate_request(const PyEngine& e, const pyb::object& prompt, int max_new_tokens,
                           const std::string& chunks, const std::string& mask, int block_size,
                           float temperature, int top_k, float top_p, std::uint64_t seed,
                           bool stop_at_eos, bool bos) {
    const Model& model = e.model->model;
    const std::vector<int32_t> tokens = resolve_prompt(model, prompt, bos);
    GenerateOptions o;
    o.chunks = chunks;
    o.max_new_tokens = max_new_tokens;
    o.stop_at_eos = stop_at_eos;
    o.sampler = SamplerOptions{temperature, top_k, top_p, seed};
    o.session = session_options(model, tokens, mask, block_size, 0);
    Trace trace;
    const GenerateResult r = generate(e.loaded.device(), *model.tokenizer, "", tokens, o, trace);
    pyb::dict out;
    out["prompt_tokens"] = r.prompt_tokens;
    out["new_tokens"] = r.new_tokens;
    out["text"] = r.text;
    out["ttft_ms"] = r.ttft_us / 1000;
    out["prefill_ms"] = r.prefill_us / 1000;
    std::vector<double> decode_ms;
    for (double us : r.decode_step_us) decode_ms.push_back(us / 1000);
    out["decode_step_ms"] = decode_ms;
    out["trace"] = trace_spans(trace);
    return out;
}

}  // namespace

void bind_engine(pyb::module_& m) {
    pyb::class_<PySnapshot, std::shared_ptr<PySnapshot>>(
        m, "Snapshot",
        "What a prefill leaves behind that must not depend on the chunk plan or the\n"
        "backend: the last position's logits and every cached K and V. Made by\n"
        "Engine.snapshot(); compare two with compare().")
        .def_property_readonly(
            "backend", [](const PySnapshot& s) { return s.snap.backend; }, "The backend's name.")
        .def_property_readonly(
            "plan", [](const PySnapshot& s) { return s.snap.plan.lengths; }, "The chunk lengths.")
        .def_property_readonly(
            "prefill_ms", [](const PySnapshot& s) { return s.prefill_us / 1000; },
            "Wall time of the prefill (one cold run), milliseconds.")
        .def_property_readonly(
            "last_logits",
            [](const PySnapshot& s) {
                const auto n = static_cast<pyb::ssize_t>(s.snap.last_logits.size());
                return to_numpy(std::vector(s.snap.last_logits), {n});
            },
            "(V,) logits of the last position.")
        .def_property_readonly(
            "k",
            [](const PySnapshot& s) { return stack_layers(s.snap.k, s.n_kv_heads, s.head_dim); },
            "(L, T, Hkv, Dh) every cached key, in position order.")
        .def_property_readonly(
            "v",
            [](const PySnapshot& s) { return stack_layers(s.snap.v, s.n_kv_heads, s.head_dim); },
            "(L, T, Hkv, Dh) every cached value, in position order.");

    m.def(
        "compare",
        [](const PySnapshot& a, const PySnapshot& b) {
            return difference_dict(compare_snapshots(a.snap, b.snap));
        },
        "a"_a, "b"_a,
        "The equivalence report of two snapshots (runtime/equivalence.h): max |diff| of\n"
        "the last logits and of every K and V, whether each is bitwise equal, whether\n"
        "the greedy first token is the same. Keys: logits_max_abs_diff, kv_max_abs_diff,\n"
        "logits_bitwise, kv_bitwise, same_first_token, bitwise.");

    pyb::class_<PyEngine, std::shared_ptr<PyEngine>>(
        m, "Engine",
        "A model on one backend: the backend and the weights uploaded to it\n"
        "(runtime/engine.h). backend: 'cpu-ref' (the reference: every sum in one fixed\n"
        "order), 'cpu' (Eigen), 'gpu-ref' and 'gpu' (CUDA kernels, natively on a GPU,\n"
        "emulated on the CPU otherwise; see gpu_form()).")
        .def(pyb::init<std::shared_ptr<PyModel>, const std::string&>(), "model"_a,
             "backend"_a = "cpu-ref")
        .def_property_readonly(
            "backend", [](const PyEngine& e) { return e.loaded.backend().name(); },
            "The backend's name as printed to users, e.g. 'gpu-ref (emulated)'.")
        .def_property_readonly(
            "is_reference", [](const PyEngine& e) { return e.loaded.backend().is_reference(); },
            "True for cpu-ref and gpu-ref: results bitwise equal to cpu-ref by construction.")
        .def_property_readonly(
            "model", [](const PyEngine& e) { return e.model; }, "The Model it runs.")
        .def("prefill", &prefill, "prompt"_a = pyb::none(), "chunks"_a = "full",
             "mask"_a = "causal", "block_size"_a = 16, "num_blocks"_a = 0, "bos"_a = true,
             "all_logits"_a = false, "attention"_a = pyb::none(), "scores"_a = false,
             "Prefills a prompt on a fresh paged KV cache and returns the Session.\n"
             "prompt: text (tokenized, BOS first unless bos=False), a sequence of token\n"
             "  ids, or None for the CLI's built-in story opening.\n"
             "chunks: the chunk plan as `plab prefill --chunks` takes it: 'full', a size\n"
             "  '4' (last chunk shorter), or lengths '3,1,4' summing to the prompt.\n"
             "mask: a mask spec (`plab mask --help`), bound to this prompt.\n"
             "block_size: B, positions per KV block; num_blocks: pool size (0: enough for\n"
             "  max_seq_len).\n"
             "all_logits: keep the logits of every position (Session.logits).\n"
             "attention: None, 'all', or a list of (layer, head) to probe.\n"
             "scores: also keep the scaled scores of the probed heads.\n"
             "A bad plan, mask or prompt raises prefill_lab.Error with the CLI's message.")
        .def("snapshot", &snapshot, "prompt"_a = pyb::none(), "chunks"_a = "full",
             "mask"_a = "causal", "block_size"_a = 16, "bos"_a = true,
             "Prefills on a fresh cache and returns its Snapshot (last logits, every K/V).")
        .def("equivalence", &equivalence, "prompt"_a = pyb::none(), "chunks"_a = "full",
             "against"_a = pyb::none(), "mask"_a = "causal", "block_size"_a = 16, "bos"_a = true,
             "The equivalence report of `plab prefill`: plan `chunks` against plan\n"
             "`against` (default: the whole prompt at once, or token by token when\n"
             "`chunks` is one chunk). A dict: backend, plan, compared_plan and compare()'s\n"
             "keys. On a reference backend, bitwise is True for every plan.")
        .def("generate", &generate_request, "prompt"_a = pyb::none(), "max_new_tokens"_a = 32,
             "chunks"_a = "full", "mask"_a = "causal", "block_size"_a = 16, "temperature"_a = 0.0f,
             "top_k"_a = 0, "top_p"_a = 1.0f, "seed"_a = 1, "stop_at_eos"_a = true, "bos"_a = true,
             "One whole request, as `plab generate` runs it: prefill, the first token, then\n"
             "one decode step per new token. Returns a dict: prompt_tokens, new_tokens,\n"
             "text, ttft_ms (request start to first token delivered), prefill_ms (the\n"
             "prefill chunks only), decode_step_ms (one per token after the first), trace\n"
             "(spans: queue, tokenize, allocate KV cache, prefill chunk, prefill, sample,\n"
             "deliver, time to first token, decode step, request). temperature 0 is greedy.")
        .def("__repr__", [](const PyEngine& e) {
            return "<prefill_lab.Engine " + e.loaded.backend().name() + ": " +
                   e.model->model.weights.config.summary() + ">";
        });
}

}  // namespace plab::py
