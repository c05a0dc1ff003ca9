// prefill_lab.Model: a model's weights and tokenizer, loaded or random.
//
// What it teaches: a handful of integers (the config) fixes every tensor's
// shape; the model never sees text, only the tokenizer's ids.
// Lessons: 02-prefill-and-the-kv-cache.md (the shipped model), GLOSSARY.md.
#include <memory>

#include "model/shapes.h"
#include "model/tokenizers/tokenizer.h"
#include "python/py_common.h"

namespace plab::py {
namespace {

pyb::dict config_dict(const ModelConfig& c) {
    pyb::dict d;
    d["dim"] = c.dim;
    d["n_layers"] = c.n_layers;
    d["n_heads"] = c.n_heads;
    d["n_kv_heads"] = c.n_kv_heads;
    d["head_dim"] = c.head_dim;
    d["hidden_dim"] = c.hidden_dim;
    d["vocab_size"] = c.vocab_size;
    d["max_seq_len"] = c.max_seq_len;
    d["rope_theta"] = c.rope_theta;
    d["norm_eps"] = c.norm_eps;
    d["tied_embeddings"] = c.tied_embeddings;
    d["n_params"] = c.n_params();
    d["kv_floats_per_token"] = c.kv_floats_per_token();
    return d;
}

std::shared_ptr<PyModel> load(const std::string& path) {
    auto m = std::make_shared<PyModel>();
    m->model = load_model_or_default(path);
    return m;
}

std::shared_ptr<PyModel> random(const std::string& shape, std::uint64_t seed) {
    auto m = std::make_shared<PyModel>();
    m->model.weights = make_random_weights(named_shape(shape), seed);
    m->model.tokenizer = std::make_unique<ByteTokenizer>();
    m->model.source = "random " + shape + " model, seed " + std::to_string(seed);
    return m;
}

}  // namespace

void bind_model(pyb::module_& m) {
    using namespace pybind11::literals;
    m.def("default_model_path", &default_model_path,
          "The model directory used when none is given: $PLAB_MODEL, else the shipped\n"
          "assets/model (a tiny Llama-style model trained on stories).");
    m.def("shapes", &shape_names, "Names of the random-model shapes random_model() accepts.");

    pyb::class_<PyModel, std::shared_ptr<PyModel>>(
        m, "Model",
        "A model's weights and tokenizer in host memory. Make one with load_model() or\n"
        "random_model(); give it to Engine to run it on a backend.")
        .def_property_readonly(
            "config", [](const PyModel& p) { return config_dict(p.model.weights.config); },
            "The shape as a dict: dim (D), n_layers (L), n_heads (H), n_kv_heads (Hkv),\n"
            "head_dim (Dh), hidden_dim (F), vocab_size (V), max_seq_len, rope_theta,\n"
            "norm_eps, tied_embeddings, n_params, kv_floats_per_token (2·L·Hkv·Dh).")
        .def_property_readonly(
            "summary", [](const PyModel& p) { return p.model.weights.config.summary(); },
            "The shape on one line, as `plab info` prints it.")
        .def_property_readonly(
            "source", [](const PyModel& p) { return p.model.source; },
            "Where the model came from (a path, or the random shape and seed).")
        .def_property_readonly(
            "tokenizer_kind", [](const PyModel& p) { return p.model.tokenizer->kind(); },
            "'byte', 'bpe' or 'llama2.c'.")
        .def_property_readonly(
            "bos_id", [](const PyModel& p) { return p.model.tokenizer->bos_id(); },
            "The begin-of-sequence token id (-1 when the tokenizer has none).")
        .def_property_readonly(
            "eos_id", [](const PyModel& p) { return p.model.tokenizer->eos_id(); },
            "The end-of-sequence token id.")
        .def(
            "encode",
            [](const PyModel& p, const std::string& text, bool bos) {
                return p.model.tokenizer->encode(text, bos);
            },
            "text"_a, "bos"_a = true, "Text to token ids, BOS first when bos is true.")
        .def(
            "decode",
            [](const PyModel& p, const std::vector<int32_t>& ids) {
                return p.model.tokenizer->decode(ids);
            },
            "ids"_a, "Token ids to text (BOS and EOS dropped).")
        .def(
            "token_text",
            [](const PyModel& p, int32_t id) { return p.model.tokenizer->token_text(id); }, "id"_a,
            "How one token is shown to a person: 'the', '\\n', '<bos>'.")
        .def("__repr__", [](const PyModel& p) {
            return "<prefill_lab.Model " + p.model.source + ": " +
                   p.model.weights.config.summary() + ">";
        });

    m.def("load_model", &load, "path"_a = "",
          "Loads a model: a directory with config.json and model.safetensors (Hugging\n"
          "Face Llama names), its model.safetensors or config.json path, or a llama2.c\n"
          "checkpoint (.bin) — whatever `plab --model` reads. An empty path loads the\n"
          "default (default_model_path()). Raises prefill_lab.Error naming the file and\n"
          "what would be valid.");
    m.def("random_model", &random, "shape"_a = "small", "seed"_a = 1,
          "A seeded random model of a named shape (shapes()) with the byte tokenizer,\n"
          "as `plab random-model DIR --shape S --seed N` writes it.");
}

}  // namespace plab::py
