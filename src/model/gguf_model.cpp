// Llama models in GGUF files (gguf_model.h).
#include "model/gguf_model.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.h"
#include "model/gguf.h"
#include "model/rope_permute.h"
#include "model/tokenizers/tokenizer_gguf.h"
#include "model/weights.h"

namespace plab {
namespace {

std::string blk(int i, const char* rest) {
    return "blk." + std::to_string(i) + "." + rest;
}

int positive_int(const gguf::File& f, const std::string& key, const std::string& where) {
    const std::int64_t v = f.get_int(key);
    PLAB_CHECK(v >= 1 && v <= (1 << 24), where << ": " << key << " = " << v
                                               << " is not a size plab reads (1.." << (1 << 24)
                                               << ")");
    return static_cast<int>(v);
}

ModelConfig config_from_gguf(const gguf::File& f, const std::string& where) {
    PLAB_CHECK(f.find("general.architecture") != nullptr,
               where << ": no general.architecture key; a GGUF model names its architecture");
    const std::string arch = f.get_string("general.architecture");
    PLAB_CHECK(arch == "llama", where << ": general.architecture is '" << arch
                                      << "'; plab reads \"llama\" (Llama, TinyLlama, "
                                         "llama2.c models, SmolLM and other Llama-shaped models)");
    ModelConfig c;
    c.dim = positive_int(f, "llama.embedding_length", where);
    c.n_layers = positive_int(f, "llama.block_count", where);
    c.hidden_dim = positive_int(f, "llama.feed_forward_length", where);
    c.n_heads = positive_int(f, "llama.attention.head_count", where);
    c.n_kv_heads = f.find("llama.attention.head_count_kv") != nullptr
                       ? positive_int(f, "llama.attention.head_count_kv", where)
                       : c.n_heads;
    c.max_seq_len = positive_int(f, "llama.context_length", where);
    c.head_dim = f.find("llama.attention.key_length") != nullptr
                     ? positive_int(f, "llama.attention.key_length", where)
                     : c.dim / c.n_heads;
    if (f.find("llama.attention.value_length") != nullptr) {
        const int v = positive_int(f, "llama.attention.value_length", where);
        PLAB_CHECK(v == c.head_dim, where << ": llama.attention.value_length " << v
                                          << " differs from key_length " << c.head_dim
                                          << "; plab's attention has one head size");
    }
    if (f.find("llama.rope.dimension_count") != nullptr) {
        const int r = positive_int(f, "llama.rope.dimension_count", where);
        PLAB_CHECK(r == c.head_dim, where << ": llama.rope.dimension_count " << r
                                          << " rotates part of each " << c.head_dim
                                          << "-component head; plab rotates whole heads only");
    }
    if (f.find("llama.rope.scaling.type") != nullptr) {
        const std::string s = f.get_string("llama.rope.scaling.type");
        PLAB_CHECK(s == "none", where << ": llama.rope.scaling.type is '" << s
                                      << "'; plab implements plain RoPE (no scaling) only");
    }
    if (f.find("llama.rope.freq_base") != nullptr)
        c.rope_theta = f.get_float("llama.rope.freq_base");
    if (f.find("llama.attention.layer_norm_rms_epsilon") != nullptr)
        c.norm_eps = static_cast<float>(f.get_float("llama.attention.layer_norm_rms_epsilon"));
    const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
    PLAB_CHECK(embd != nullptr && embd->ne.size() == 2,
               where << ": tensor token_embd.weight (vocabulary × D) is missing or not 2-D");
    PLAB_CHECK(embd->ne[1] <= std::uint64_t(1) << 24,
               where << ": token_embd.weight has " << embd->ne[1] << " rows; too many tokens");
    c.vocab_size = static_cast<int>(embd->ne[1]);
    if (f.find("llama.vocab_size") != nullptr) {
        const int v = positive_int(f, "llama.vocab_size", where);
        PLAB_CHECK(v == c.vocab_size, where << ": llama.vocab_size " << v << " but token_embd "
                                            << "has " << c.vocab_size << " rows");
    }
    c.tied_embeddings = f.find_tensor("output.weight") == nullptr;
    try {
        c.validate();
    } catch (const Error& e) {
        throw Error(where + ": " + e.what());
    }
    return c;
}

// Takes one tensor out of the file, checking its row-major shape.
struct TensorTaker {
    const gguf::File& f;
    std::span<const char> bytes;
    const std::string& where;
    std::map<std::string, bool> used;

    std::vector<float> take(const std::string& name, std::vector<std::int64_t> shape) {
        const gguf::TensorInfo* t = f.find_tensor(name);
        PLAB_CHECK(t != nullptr, where << ": tensor " << name << " is missing");
        check_tensor_shape(where, name, t->shape(), shape, "metadata");
        used[name] = true;
        return gguf::read_tensor(f, *t, bytes, where).data;
    }
};

}  // namespace

bool is_gguf_path(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) return false;
    std::ifstream in(path, std::ios::binary);
    char magic[4] = {};
    in.read(magic, 4);
    return in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

Model parse_gguf_model(std::span<const char> bytes, const std::string& where,
                       const LoadLimits& limits) {
    const gguf::File f = gguf::parse(bytes, where, limits);
    Model m;
    Weights& w = m.weights;
    w.config = config_from_gguf(f, where);
    const ModelConfig& c = w.config;
    const std::int64_t d = c.dim, q = std::int64_t(c.n_heads) * c.head_dim,
                       kv = std::int64_t(c.n_kv_heads) * c.head_dim, ff = c.hidden_dim,
                       v = c.vocab_size;
    TensorTaker t{f, bytes, where, {}};
    w.tok_embeddings = t.take("token_embd.weight", {v, d});
    for (int i = 0; i < c.n_layers; ++i) {
        LayerWeights l;
        l.attn_norm = t.take(blk(i, "attn_norm.weight"), {d});
        // GGUF q/k rows pair RoPE components interleaved; the engine pairs them half-split.
        l.wq = rope_rows_interleaved_to_half(t.take(blk(i, "attn_q.weight"), {q, d}), c.n_heads,
                                             c.head_dim, c.dim);
        l.wk = rope_rows_interleaved_to_half(t.take(blk(i, "attn_k.weight"), {kv, d}), c.n_kv_heads,
                                             c.head_dim, c.dim);
        l.wv = t.take(blk(i, "attn_v.weight"), {kv, d});
        l.wo = t.take(blk(i, "attn_output.weight"), {d, q});
        l.ffn_norm = t.take(blk(i, "ffn_norm.weight"), {d});
        l.w_gate = t.take(blk(i, "ffn_gate.weight"), {ff, d});
        l.w_up = t.take(blk(i, "ffn_up.weight"), {ff, d});
        l.w_down = t.take(blk(i, "ffn_down.weight"), {d, ff});
        w.layers.push_back(std::move(l));
    }
    w.final_norm = t.take("output_norm.weight", {d});
    if (!c.tied_embeddings) w.classifier = t.take("output.weight", {v, d});
    for (const gguf::TensorInfo& info : f.tensors) {
        PLAB_CHECK(t.used.count(info.name) != 0,
                   where << ": unexpected tensor " << info.name
                         << (info.name == "rope_freqs.weight"
                                 ? " (RoPE frequency scaling, as in Llama 3.1; plab implements "
                                   "plain RoPE only)"
                                 : " (more layers than llama.block_count, or not a Llama model?)"));
    }
    try {
        w.validate();
    } catch (const Error& e) {
        throw Error(where + ": " + e.what());
    }
    m.tokenizer = tokenizer_from_gguf(f, c.vocab_size, where);
    m.source = where + " (GGUF v" + std::to_string(f.version) + ")";
    return m;
}

Model load_gguf_model(const std::string& path, const LoadLimits& limits) {
    const FileBytes file(path, "a readable .gguf file");
    return parse_gguf_model(file.bytes(), path, limits);
}

std::string save_gguf_model(const Model& m, const std::string& path, GgufWeightType type) {
    const Weights& w = m.weights;
    w.validate();
    const ModelConfig& c = w.config;
    std::vector<std::pair<std::string, gguf::Value>> kv;
    kv.emplace_back("general.architecture", gguf::make_string("llama"));
    kv.emplace_back("general.type", gguf::make_string("model"));
    kv.emplace_back("general.name", gguf::make_string("plab model"));
    // llama_ftype: 0 ALL_F32, 1 MOSTLY_F16 (norms stay F32).
    kv.emplace_back("general.file_type", gguf::make_u32(type == GgufWeightType::kF32 ? 0 : 1));
    kv.emplace_back("llama.context_length", gguf::make_u32(std::uint32_t(c.max_seq_len)));
    kv.emplace_back("llama.embedding_length", gguf::make_u32(std::uint32_t(c.dim)));
    kv.emplace_back("llama.block_count", gguf::make_u32(std::uint32_t(c.n_layers)));
    kv.emplace_back("llama.feed_forward_length", gguf::make_u32(std::uint32_t(c.hidden_dim)));
    kv.emplace_back("llama.rope.dimension_count", gguf::make_u32(std::uint32_t(c.head_dim)));
    kv.emplace_back("llama.attention.head_count", gguf::make_u32(std::uint32_t(c.n_heads)));
    kv.emplace_back("llama.attention.head_count_kv", gguf::make_u32(std::uint32_t(c.n_kv_heads)));
    kv.emplace_back("llama.attention.key_length", gguf::make_u32(std::uint32_t(c.head_dim)));
    kv.emplace_back("llama.attention.value_length", gguf::make_u32(std::uint32_t(c.head_dim)));
    kv.emplace_back("llama.rope.freq_base", gguf::make_f32(static_cast<float>(c.rope_theta)));
    kv.emplace_back("llama.attention.layer_norm_rms_epsilon", gguf::make_f32(c.norm_eps));
    kv.emplace_back("llama.vocab_size", gguf::make_u32(std::uint32_t(c.vocab_size)));
    kv.emplace_back("general.quantization_version", gguf::make_u32(2));  // as convert writes it
    std::string why;
    for (auto& entry : tokenizer_to_gguf(*m.tokenizer, &why)) kv.push_back(std::move(entry));

    // The permuted q/k rows must outlive the write: keep them here.
    std::vector<std::vector<float>> permuted;
    permuted.reserve(2 * w.layers.size());
    const gguf::TensorType mat =
        type == GgufWeightType::kF32 ? gguf::TensorType::kF32 : gguf::TensorType::kF16;
    const std::int64_t d = c.dim, q = std::int64_t(c.n_heads) * c.head_dim,
                       kvd = std::int64_t(c.n_kv_heads) * c.head_dim, ff = c.hidden_dim,
                       v = c.vocab_size;
    std::vector<gguf::TensorOut> t;
    t.push_back({"token_embd.weight", {v, d}, &w.tok_embeddings, mat});
    for (int i = 0; i < c.n_layers; ++i) {
        const LayerWeights& l = w.layers[std::size_t(i)];
        permuted.push_back(rope_rows_half_to_interleaved(l.wq, c.n_heads, c.head_dim, c.dim));
        const std::vector<float>* wq = &permuted.back();
        permuted.push_back(rope_rows_half_to_interleaved(l.wk, c.n_kv_heads, c.head_dim, c.dim));
        const std::vector<float>* wk = &permuted.back();
        t.push_back({blk(i, "attn_norm.weight"), {d}, &l.attn_norm, gguf::TensorType::kF32});
        t.push_back({blk(i, "attn_q.weight"), {q, d}, wq, mat});
        t.push_back({blk(i, "attn_k.weight"), {kvd, d}, wk, mat});
        t.push_back({blk(i, "attn_v.weight"), {kvd, d}, &l.wv, mat});
        t.push_back({blk(i, "attn_output.weight"), {d, q}, &l.wo, mat});
        t.push_back({blk(i, "ffn_norm.weight"), {d}, &l.ffn_norm, gguf::TensorType::kF32});
        t.push_back({blk(i, "ffn_gate.weight"), {ff, d}, &l.w_gate, mat});
        t.push_back({blk(i, "ffn_up.weight"), {ff, d}, &l.w_up, mat});
        t.push_back({blk(i, "ffn_down.weight"), {d, ff}, &l.w_down, mat});
    }
    t.push_back({"output_norm.weight", {d}, &w.final_norm, gguf::TensorType::kF32});
    if (!c.tied_embeddings) t.push_back({"output.weight", {v, d}, &w.classifier, mat});
    gguf::write(path, kv, t);
    return why;
}

}  // namespace plab
