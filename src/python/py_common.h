// What the binding files of the `prefill_lab` module share: the objects Python
// holds (a model, an engine) and the conversions to numpy and back.
//
// What it teaches: a client of the engine, like the CLI (src/cli/) and the
// viewer. Nothing here computes model math: every number a notebook sees was
// computed by the runtime and copied out. Arrays are float32 numpy arrays in
// the runtime's row-major layout, with the shape letters of lessons/GLOSSARY.md.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/model_io.h"
#include "runtime/engine.h"
#include "runtime/loaded_model.h"
#include "runtime/mask_grammar.h"

namespace plab::py {

namespace pyb = pybind11;

// A loaded (or random) model: weights and tokenizer, shared by every engine made from it.
struct PyModel {
    Model model;
};

// Python's Engine: the model loaded on one backend (runtime/loaded_model.h),
// the one sessions run on. Holds its model, so a session outliving the Python
// names still has them.
struct PyEngine {
    PyEngine(std::shared_ptr<PyModel> m, const std::string& backend)
        : model(std::move(m)), loaded(model->model.weights, backend) {}
    std::shared_ptr<PyModel> model;
    LoadedModel loaded;
};

// `n` floats moved into a numpy array of `shape` (C order), without a copy:
// the array owns the vector.
pyb::array_t<float> to_numpy(std::vector<float>&& data, std::vector<pyb::ssize_t> shape);

// The prompt a Python call gave: text (tokenized, BOS first when `bos`), a
// sequence of ids, or None for the CLI's built-in prompt. Checked as the CLI
// checks it (an empty text is refused, every id in range, at most max_seq_len).
std::vector<int32_t> resolve_prompt(const Model& model, const pyb::object& prompt, bool bos);

// A mask spec bound to a prompt and model, as the CLI binds --mask
// (the tokenizer's BOS for docs:bos, the model's heads for ALiBi).
BoundMask bind_mask_for(const std::string& spec, const std::vector<int32_t>& tokens,
                        const Model& model);

// The registration functions of each binding file.
void bind_model(pyb::module_& m);    // py_model.cpp: Model, load_model, random_model
void bind_session(pyb::module_& m);  // py_session.cpp: Session (one sequence's cache)
void bind_engine(pyb::module_& m);   // py_engine.cpp: Engine, Snapshot, compare
void bind_lab(pyb::module_& m);      // py_lab.cpp: toy, masks, chunk plans, backends

}  // namespace plab::py
