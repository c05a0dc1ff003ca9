#include "serving/presets.h"

#include "core/error.h"
#include "model/shapes.h"

namespace plab {

Dtype parse_dtype(const std::string& name) {
    if (name == "fp32") return Dtype::fp32;
    if (name == "fp16") return Dtype::fp16;
    if (name == "bf16") return Dtype::bf16;
    if (name == "int8") return Dtype::int8;
    PLAB_CHECK(false, "--dtype " << name << " is not a precision; valid: bf16, fp16, fp32, int8");
}

std::string dtype_name(Dtype d) {
    switch (d) {
        case Dtype::fp32:
            return "fp32";
        case Dtype::fp16:
            return "fp16";
        case Dtype::bf16:
            return "bf16";
        case Dtype::int8:
            return "int8";
    }
    return "?";
}

double weight_bytes(Dtype d) {
    return d == Dtype::fp32 ? 4 : d == Dtype::int8 ? 1 : 2;
}

double activation_bytes(Dtype d) {
    // int8 weights keep 16-bit activations and K/V (W8A8 GEMMs quantise the
    // activations on the fly; the cache stays fp16 unless asked otherwise).
    return d == Dtype::fp32 ? 4 : 2;
}

double HardwarePreset::peak_tflops(Dtype d) const {
    const double v = d == Dtype::fp32   ? fp32_tflops
                     : d == Dtype::fp16 ? fp16_tflops
                     : d == Dtype::bf16 ? bf16_tflops
                                        : int8_tops;
    PLAB_CHECK(v > 0,
               name << " has no " << dtype_name(d) << " unit ("
                    << (name == "t4" ? "Turing tensor cores do fp16 and int8, not bf16; " : "")
                    << "give --dtype " << (fp16_tflops > 0 ? "fp16" : "fp32") << ")");
    return v;
}

const std::vector<HardwarePreset>& hardware_presets() {
    // Dense figures; efficiencies and overheads are the defaults of HardwarePreset
    // (assumed: dense GEMMs near 70 % of the tensor peak at serving shapes,
    // streaming reads near 80 % of the memory's peak, 30 us of scheduling and
    // launches a step with CUDA graphs), not measured here.
    static const std::vector<HardwarePreset> presets = {
        {.name = "h100-sxm",
         .description = "NVIDIA H100 SXM5 80GB (Hopper, HBM3)",
         .fp32_tflops = 67,
         .fp16_tflops = 989.4,
         .bf16_tflops = 989.4,
         .int8_tops = 1978.9,
         .bandwidth_gb_per_s = 3350,
         .memory_gb = 80,
         .source =
             "NVIDIA H100 Tensor Core GPU datasheet (2023), SXM column; sparse figures halved"},
        {.name = "a100-80gb",
         .description = "NVIDIA A100 SXM4 80GB (Ampere, HBM2e)",
         .fp32_tflops = 19.5,
         .fp16_tflops = 312,
         .bf16_tflops = 312,
         .int8_tops = 624,
         .bandwidth_gb_per_s = 2039,
         .memory_gb = 80,
         .source = "NVIDIA A100 Tensor Core GPU datasheet (2021), A100 80GB SXM column"},
        {.name = "h200",
         .description = "NVIDIA H200 SXM 141GB (Hopper, HBM3e)",
         .fp32_tflops = 67,
         .fp16_tflops = 989.4,
         .bf16_tflops = 989.4,
         .int8_tops = 1978.9,
         .bandwidth_gb_per_s = 4800,
         .memory_gb = 141,
         .source = "NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM; sparse figures halved"},
        {.name = "l4",
         .description = "NVIDIA L4 24GB (Ada Lovelace, GDDR6)",
         .fp32_tflops = 30.3,
         .fp16_tflops = 121,
         .bf16_tflops = 121,
         .int8_tops = 242.5,
         .bandwidth_gb_per_s = 300,
         .memory_gb = 24,
         .source = "NVIDIA L4 Tensor Core GPU datasheet (2023); sparse figures halved"},
        // Mixed-precision fp16; Turing has no bf16 (bf16_tflops 0: refused).
        {.name = "t4",
         .description = "NVIDIA T4 16GB (Turing, GDDR6; Colab's free GPU)",
         .fp32_tflops = 8.1,
         .fp16_tflops = 65,
         .int8_tops = 130,
         .bandwidth_gb_per_s = 320,
         .memory_gb = 16,
         .source = "NVIDIA T4 Tensor Core GPU datasheet (2019)"},
        // Tensor fp16/bf16 with fp32 accumulate, dense.
        {.name = "rtx-4090",
         .description = "NVIDIA GeForce RTX 4090 24GB (Ada Lovelace, GDDR6X)",
         .fp32_tflops = 82.6,
         .fp16_tflops = 165.2,
         .bf16_tflops = 165.2,
         .int8_tops = 660.6,
         .bandwidth_gb_per_s = 1008,
         .memory_gb = 24,
         .source = "NVIDIA Ada Lovelace GPU Architecture whitepaper v2.1 (2023), GeForce RTX 4090 "
                   "column (FP16/BF16 tensor with FP32 accumulate, dense)"},
    };
    return presets;
}

const HardwarePreset& hardware_preset(const std::string& name) {
    std::string names;
    for (const HardwarePreset& h : hardware_presets()) {
        if (h.name == name) return h;
        names += ", " + h.name;
    }
    PLAB_CHECK(false, "--hardware " << name << " is not a preset; valid: this-machine" << names
                                    << " (plab serve --list-hardware)");
}

const std::vector<ShapePreset>& shape_presets() {
    static const std::vector<ShapePreset> presets = [] {
        auto shape = [](int dim, int layers, int heads, int kv_heads, int hidden, int vocab,
                        int ctx, bool tied) {
            ModelConfig c;
            c.dim = dim;
            c.n_layers = layers;
            c.n_heads = heads;
            c.n_kv_heads = kv_heads;
            c.head_dim = dim / heads;
            c.hidden_dim = hidden;
            c.vocab_size = vocab;
            c.max_seq_len = ctx;
            c.tied_embeddings = tied;
            return c;
        };
        return std::vector<ShapePreset>{
            {"llama3-8b", shape(4096, 32, 32, 8, 14336, 128256, 8192, false),
             "meta-llama/Meta-Llama-3-8B, config.json"},
            {"llama3.1-8b", shape(4096, 32, 32, 8, 14336, 128256, 131072, false),
             "meta-llama/Llama-3.1-8B, config.json (max_position_embeddings 131072: the 128K "
             "context; RoPE scaling changes no FLOP or byte)"},
            {"qwen2.5-7b", shape(3584, 28, 28, 4, 18944, 152064, 32768, false),
             "Qwen/Qwen2.5-7B, config.json (its q/k/v biases, 0.01 % of the weights, left out)"},
            {"mistral-7b", shape(4096, 32, 32, 8, 14336, 32000, 32768, false),
             "mistralai/Mistral-7B-v0.1, config.json (charged with full attention: its "
             "4096-token sliding window left out)"},
            {"llama2-13b", shape(5120, 40, 40, 40, 13824, 32000, 4096, false),
             "meta-llama/Llama-2-13b-hf, config.json"},
            {"stories15m", named_shape("stories15m"), "karpathy/llama2.c README, model table"},
            {"stories42m", shape(512, 8, 8, 8, 1376, 32000, 1024, true),
             "karpathy/llama2.c README, model table"},
            {"stories110m", named_shape("stories110m"), "karpathy/llama2.c README, model table"},
        };
    }();
    return presets;
}

const ShapePreset& shape_preset(const std::string& name) {
    std::string names;
    for (const ShapePreset& s : shape_presets()) {
        if (s.name == name) return s;
        names += ", " + s.name;
    }
    PLAB_CHECK(false, "--shape " << name
                                 << " is not a preset; valid: model (the loaded model's own)"
                                 << names << " (plab serve --list-shapes)");
}

double weights_bytes(const ModelConfig& c, Dtype d) {
    const double embedding = double(c.vocab_size) * c.dim;
    const double params =
        c.tied_embeddings ? double(c.n_params()) : double(c.n_params()) - embedding;
    return params * weight_bytes(d);
}

double kv_bytes_per_token(const ModelConfig& c, Dtype d) {
    return double(c.kv_floats_per_token()) * activation_bytes(d);
}

}  // namespace plab
