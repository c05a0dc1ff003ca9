// The `prefill_lab` Python module: Prefill Lab's engine driven from a notebook.
//
// What it teaches: the same prefill, KV cache, chunk plans, masks and traces
// as the `plab` CLI, returned as numpy arrays so a class can plot them.
// Errors: bad input raises prefill_lab.Error, a ValueError whose message is
// the one line the CLI prints after "plab: error: "; a bug in Prefill Lab
// raises prefill_lab.InternalError (a RuntimeError), as the CLI's exit 3.
// Lessons: lessons/notebooks/ (one notebook per lesson topic).
#include <pybind11/pybind11.h>

#include <cstring>

#include "core/error.h"
#include "python/py_common.h"
#include "runtime/generate.h"

namespace plab::py {

pyb::array_t<float> to_numpy(std::vector<float>&& data, std::vector<pyb::ssize_t> shape) {
    pyb::ssize_t n = 1;
    for (pyb::ssize_t s : shape) n *= s;
    PLAB_ASSERT(n == static_cast<pyb::ssize_t>(data.size()));
    auto* owned = new std::vector<float>(std::move(data));
    pyb::capsule free_when_done(owned, [](void* p) { delete static_cast<std::vector<float>*>(p); });
    return pyb::array_t<float>(std::move(shape), owned->data(), free_when_done);
}

std::vector<int32_t> resolve_prompt(const Model& model, const pyb::object& prompt, bool bos) {
    const ModelConfig& c = model.weights.config;
    std::vector<int32_t> ids;
    if (prompt.is_none()) {
        ids = model.tokenizer->encode(kDefaultPrompt, bos);
    } else if (pyb::isinstance<pyb::str>(prompt)) {
        const std::string text = prompt.cast<std::string>();
        // The CLI's rule: an empty text typed on purpose is a mistake, not a
        // request for the built-in prompt (that is prompt=None).
        PLAB_CHECK(!text.empty(),
                   "the prompt is empty; give some text, or leave the prompt out for the "
                   "built-in story opening");
        ids = model.tokenizer->encode(text, bos);
    } else {
        for (const pyb::handle item : prompt) {
            // Integers only (Python ints, numpy integers): a float id is a mistake.
            PLAB_CHECK(PyIndex_Check(item.ptr()) && !PyBool_Check(item.ptr()),
                       "prompt item " << pyb::repr(item).cast<std::string>()
                                      << " is not a token id; give text or a sequence of "
                                         "integers");
            const long long id = item.cast<long long>();
            PLAB_CHECK(id >= 0 && id < c.vocab_size, "token id " << id
                                                                 << " is out of range; valid ids "
                                                                    "are 0.."
                                                                 << c.vocab_size - 1);
            ids.push_back(static_cast<int32_t>(id));
        }
    }
    PLAB_CHECK(!ids.empty(), "empty prompt: prefill needs at least one token");
    PLAB_CHECK(static_cast<int>(ids.size()) <= c.max_seq_len,
               "prompt of " << ids.size() << " tokens is longer than the model's max_seq_len "
                            << c.max_seq_len << "; shorten it");
    return ids;
}

BoundMask bind_mask_for(const std::string& spec, const std::vector<int32_t>& tokens,
                        const Model& model) {
    return make_mask(spec,
                     MaskContext{tokens, model.tokenizer->bos_id(), model.weights.config.n_heads});
}

}  // namespace plab::py

PYBIND11_MODULE(prefill_lab, m) {
    namespace py = plab::py;
    m.doc() =
        "Prefill Lab from Python: load a model, prefill a prompt chunk by chunk on a\n"
        "backend (cpu-ref, cpu, gpu-ref, gpu), and look inside: logits of every\n"
        "position, attention probabilities and scores per layer and head, the paged\n"
        "KV cache (K, V, block table), the trace's spans; decode and generate; the\n"
        "toy example; the chunked-vs-full equivalence report; masks.\n\n"
        "Start with:\n"
        "    import prefill_lab as pl\n"
        "    model = pl.load_model()            # the shipped model (assets/model)\n"
        "    engine = pl.Engine(model, 'cpu-ref')\n"
        "    s = engine.prefill('Once upon a time', chunks='4', attention='all')\n"
        "    s.attention(0, 1)                  # (T, T) probabilities of layer 0, head 1\n\n"
        "Bad input raises prefill_lab.Error (a ValueError) with the same one-line\n"
        "message the plab CLI prints after 'plab: error: '.";

    // Bad input is a wrong *value* given by the caller (a chunk plan, a path, a
    // mask spec): ValueError, so `except ValueError` catches it. A broken
    // invariant is a bug to report, not something a caller can fix.
    pybind11::register_exception<plab::Error>(m, "Error", PyExc_ValueError);
    pybind11::register_exception<plab::InternalError>(m, "InternalError", PyExc_RuntimeError);
    m.attr("Error").attr("__doc__") =
        "Bad input (a chunk plan, a model path, a mask spec, a prompt): the message says\n"
        "what is wrong and what would be right, as the plab CLI's one-line error.";
    m.attr("InternalError").attr("__doc__") =
        "A broken internal invariant of Prefill Lab: a bug, please report it.";

    py::bind_model(m);
    py::bind_session(m);
    py::bind_engine(m);
    py::bind_lab(m);
}
