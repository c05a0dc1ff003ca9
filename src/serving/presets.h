// Hardware and model-shape presets for the serving lab's clock.
//
// What it teaches: a serving experiment's times depend on the card and the
// model, not only on the scheduler. The lab runs a small model's tokens (so
// outputs stay real), but its virtual clock can charge each step as a real
// model shape in a real precision on a real card (serving/roofline.h): the
// figures a student will meet with vLLM on an H100 or a Colab T4.
//
// Every figure below is the vendor's *dense* figure (datasheets often print
// 2:4-sparsity numbers, twice these), with its source next to it. Efficiencies
// are assumptions, said as such: what fraction of those peaks a well-tuned
// serving stack reaches.
#pragma once

#include <string>
#include <vector>

#include "model/config.h"

namespace plab {

// The precision weights are stored in (and, for int8, multiplied in: W8A8).
enum class Dtype { fp32, fp16, bf16, int8 };
Dtype parse_dtype(const std::string& name);  // throws plab::Error naming the valid ones
std::string dtype_name(Dtype d);
double weight_bytes(Dtype d);      // bytes per parameter
double activation_bytes(Dtype d);  // activations and K/V: 16-bit unless fp32

// An engine idle this long or longer runs its next step cold (cold_step_us).
constexpr double kColdAfterIdleUs = 1000;

struct HardwarePreset {
    std::string name;
    std::string description;
    // Dense peak, in TFLOP/s (TOP/s for int8), per precision; 0 where the
    // card has no such unit (a T4 has no bf16).
    double fp32_tflops = 0, fp16_tflops = 0, bf16_tflops = 0, int8_tops = 0;
    double bandwidth_gb_per_s = 0;  // memory (HBM/GDDR/DRAM) read bandwidth
    double memory_gb = 0;           // device memory, 1e9 bytes
    // Fractions of the peaks a step reaches (assumed for cards, measured for
    // this machine), and the fixed costs of a step and of each sequence in it.
    double compute_efficiency = 0.7;
    double bandwidth_efficiency = 0.8;
    double step_overhead_us = 30;
    double per_sequence_us = 0;
    // Extra time of a step that starts after the engine idled kColdAfterIdleUs
    // or longer: clocks and caches wind down while nothing runs. Measured for
    // this machine; 0 for the cards (their datasheets say nothing of it).
    double cold_step_us = 0;
    std::string source;  // where the figures come from

    // TFLOP/s at `d`; throws plab::Error when the card has no unit for it.
    double peak_tflops(Dtype d) const;
};

// The cards: h100-sxm, a100-80gb, h200, l4, t4, rtx-4090 (not this machine,
// which is measured: perf/machine.h, and built by the CLI).
const std::vector<HardwarePreset>& hardware_presets();
// Throws plab::Error listing the names for an unknown one.
const HardwarePreset& hardware_preset(const std::string& name);

struct ShapePreset {
    std::string name;
    ModelConfig config;
    std::string source;
};
// Real model shapes (llama3-8b, qwen2.5-7b, mistral-7b, llama2-13b) and the
// llama2.c ones (stories15m, stories42m, stories110m), with their sources.
const std::vector<ShapePreset>& shape_presets();
// Throws plab::Error listing the names (and "model": the loaded model's own).
const ShapePreset& shape_preset(const std::string& name);

// Bytes of weights a step reads: every parameter once, at the precision's
// bytes (an untied embedding table is looked up, not read: one row a token).
double weights_bytes(const ModelConfig& c, Dtype d);
// Bytes of K and V one token keeps in the cache, all layers.
double kv_bytes_per_token(const ModelConfig& c, Dtype d);

}  // namespace plab
