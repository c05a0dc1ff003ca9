// prefill_lab.Session: one sequence's paged KV cache on an engine, what its
// last prefill returned, and its trace. Made by Engine.prefill (py_engine.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "python/py_common.h"
#include "runtime/session.h"
#include "trace/trace.h"

namespace plab::py {

struct PySession {
    std::shared_ptr<PyEngine> engine;  // keeps the backend and device model alive
    std::unique_ptr<Trace> trace;      // declared before `session`: outlives it
    std::unique_ptr<Session> session;
    std::vector<int32_t> tokens;         // every position in the cache: prompt, extensions, decoded
    PrefillResult last;                  // the most recent prefill (Engine.prefill or extend)
    int last_pos0 = 0;                   // its first position
    std::vector<AttentionProbe> probes;  // what `last` probed, in order
};

// A trace's events as a list of dicts {name, category, start_us, dur_us, args}.
pyb::list trace_spans(const Trace& trace);

// What a prefill call asks to see: `attention` is None, "all", or a sequence
// of (layer, head) pairs.
ForwardProbes probes_from(const ModelConfig& config, const pyb::object& attention, bool scores,
                          bool all_logits);

// Prefills `tokens` into the session's cache after what it holds, chunk plan
// `chunks` (the CLI's text), and keeps the result in `s.last`.
void prefill_into(PySession& s, const std::vector<int32_t>& tokens, const std::string& chunks,
                  const ForwardProbes& probes);

}  // namespace plab::py
