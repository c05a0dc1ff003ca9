// A roofline clock for the serving lab: each step charged per operator as the
// preset model shape in the preset precision on the preset card.
//
// What it teaches: an operator takes as long as the slower of its arithmetic
// and its memory traffic,
//     time = max(FLOPs / (peak x efficiency), bytes / (bandwidth x efficiency)),
// and a step is its operators plus a fixed overhead. The weights are read
// once per step whatever the batch (so batching decode is nearly free until
// the arithmetic catches up: the compute-bound batch), every sequence reads
// its own K/V in attention, and a prefill chunk brings many rows per weight
// read (compute-bound). Vidur (MLSys 2024) predicts vLLM's latencies within
// 9 % by profiling each operator; this clock is the analytic version
// (LLM-Viewer's), and `plab serve --validate-cost` measures its error here.
//
// Operators of a step: "linear" (Q, K, V, O and the SwiGLU MLP of every layer,
// over all rows of the step), "attention" (per sequence: its queries over its
// cached and new K/V), "classifier" (the rows that sample).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/config.h"
#include "runtime/engine.h"
#include "runtime/scheduler.h"
#include "serving/presets.h"
#include "serving/workload.h"

namespace plab {

struct OperatorTime {
    std::string name;
    double flops = 0, bytes = 0;
    double compute_us = 0, memory_us = 0;  // each side of the roofline alone
    double us() const { return compute_us > memory_us ? compute_us : memory_us; }
};

struct RooflineStep {
    std::vector<OperatorTime> ops;
    double overhead_us = 0;
    double us = 0;      // sum of the operators' times + overhead
    std::string bound;  // "compute" or "memory": the side that took longer, over the operators
};

// One span of a step as the cost model sees it: n new tokens after pos0
// cached ones; `samples` when its last row's logits are used.
struct SpanShape {
    int n_tokens = 0;
    int pos0 = 0;
    bool samples = true;
    int sampled_rows = 1;  // rows whose logits are used when it samples (a verify step: all)
};

struct RooflineCost {
    HardwarePreset hardware;
    std::string shape_name;
    ModelConfig shape;
    Dtype dtype = Dtype::bf16;

    // `cold`: the step follows kColdAfterIdleUs or more of idling.
    RooflineStep step(const std::vector<SpanShape>& spans, bool cold = false) const;
    // The spans of an engine step (positions already reserved, as the engine's
    // clock is called).
    static std::vector<SpanShape> spans_of(const Schedule& s);
    // The engine's virtual clock; each step's bound is appended to `bounds`
    // when given (one call per step, in order).
    StepDuration clock(std::shared_ptr<std::vector<std::string>> bounds = nullptr) const;
    // "llama3-8b bf16 on h100-sxm, roofline"
    std::string describe() const;
    double peak_flops() const;       // FLOP/s at the dtype, before efficiency
    double bandwidth_bytes() const;  // bytes/s, before efficiency
};

// KV blocks on the card: its memory x utilisation, less the weights (vLLM's
// gpu_memory_utilization), in blocks of the preset shape's K/V — or what
// `workload` can ever hold, if that is fewer (the small model's pool need not
// be larger). Refuses (plab::Error) a shape whose weights do not fit.
int kv_blocks_on_card(const RooflineCost& cost, double utilization, int block_size,
                      const Workload& workload);

}  // namespace plab
