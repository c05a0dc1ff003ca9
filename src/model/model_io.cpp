#include "model/model_io.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "model/gguf_model.h"
#include "model/llama2c.h"
#include "model/safetensors.h"
#include "model/tokenizers/tokenizer_bpe.h"
#include "model/tokenizers/tokenizer_hf.h"
#include "model/tokenizers/tokenizer_ids.h"
#include "model/tokenizers/tokenizer_llama2c.h"

namespace plab {
namespace fs = std::filesystem;
namespace {

std::string read_text(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    PLAB_CHECK(f.good(), "cannot read " << p.string());
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::string layer_name(int i, const char* rest) {
    return "model.layers." + std::to_string(i) + "." + rest;
}

// Takes the tensor `name` out of the map, checking its shape.
std::vector<float> take(TensorMap& m, const std::string& name, std::vector<std::int64_t> shape,
                        const std::string& file) {
    auto it = m.find(name);
    PLAB_CHECK(it != m.end(), file << ": tensor " << name << " is missing");
    check_tensor_shape(file, name, it->second.shape, shape, "config");
    std::vector<float> data = std::move(it->second.data);
    m.erase(it);
    return data;
}

// "byte", "ids" (prompts are token ids), or a file beside config.json:
// *.bpe (plab-bpe, model/tokenizers/tokenizer_bpe.h), *.bin (llama2.c tokenizer.bin) or
// tokenizer.json (Hugging Face, model/tokenizers/tokenizer_hf.h).
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& name, const fs::path& dir,
                                          int vocab_size) {
    if (name == "byte") return std::make_unique<ByteTokenizer>();
    if (name == "ids") return std::make_unique<IdTokenizer>(vocab_size, -1, -1);
    if (name == "tokenizer.json") return HfTokenizer::load_dir(dir.string());
    const fs::path file = dir / name;
    const bool bpe = file.extension() == ".bpe", l2c = file.extension() == ".bin";
    PLAB_CHECK(bpe || l2c, (dir / "config.json").string()
                               << ": plab_tokenizer '" << name
                               << "' is not known; use \"byte\", \"ids\", \"tokenizer.json\", or a "
                                  "*.bpe / *.bin tokenizer file in the model directory");
    PLAB_CHECK(fs::exists(file), (dir / "config.json").string()
                                     << ": plab_tokenizer names " << file.string()
                                     << ", which does not exist");
    if (bpe) return std::make_unique<BpeTokenizer>(BpeTokenizer::load(file.string()));
    return std::make_unique<Llama2cTokenizer>(Llama2cTokenizer::load(file.string(), vocab_size));
}

}  // namespace

std::string default_model_path() {
    if (const char* env = std::getenv("PLAB_MODEL"); env != nullptr && *env != '\0') return env;
    return std::string(PLAB_ASSETS_DIR) + "/model";
}

Model load_model_or_default(const std::string& path) {
    if (!path.empty()) return load_model(path);
    Model m = load_model(default_model_path());
    const char* env = std::getenv("PLAB_MODEL");
    if (env == nullptr || *env == '\0') m.source = "assets/model";
    return m;
}

ModelConfig config_from_json(const std::string& json_text, const std::string& where) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(json_text);
    } catch (const std::exception& e) {
        PLAB_CHECK(false, where << ": not valid JSON (" << e.what() << ")");
    }
    PLAB_CHECK(j.is_object(), where << ": expected a JSON object of Llama config keys");
    auto get_int = [&](const char* key) {
        PLAB_CHECK(j.contains(key) && j[key].is_number_integer(),
                   where << ": missing integer \"" << key << "\"");
        return j[key].get<int>();
    };
    ModelConfig c;
    c.dim = get_int("hidden_size");
    c.n_layers = get_int("num_hidden_layers");
    c.n_heads = get_int("num_attention_heads");
    c.n_kv_heads = j.contains("num_key_value_heads") ? get_int("num_key_value_heads") : c.n_heads;
    c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null()
                     ? get_int("head_dim")
                     : (c.n_heads > 0 ? c.dim / c.n_heads : 0);
    c.hidden_dim = get_int("intermediate_size");
    c.vocab_size = get_int("vocab_size");
    c.max_seq_len = get_int("max_position_embeddings");
    if (j.contains("rope_theta")) {
        PLAB_CHECK(j["rope_theta"].is_number(), where << ": rope_theta must be a number");
        c.rope_theta = j["rope_theta"].get<double>();
    }
    if (j.contains("rms_norm_eps")) {
        PLAB_CHECK(j["rms_norm_eps"].is_number(), where << ": rms_norm_eps must be a number");
        c.norm_eps = j["rms_norm_eps"].get<float>();
    }
    if (j.contains("tie_word_embeddings")) {
        PLAB_CHECK(j["tie_word_embeddings"].is_boolean(),
                   where << ": tie_word_embeddings must be true or false");
        c.tied_embeddings = j["tie_word_embeddings"].get<bool>();
    }
    try {
        c.validate();
    } catch (const Error& e) {
        throw Error(where + ": " + e.what());
    }
    return c;
}

std::string config_to_json(const ModelConfig& c, const std::string& tokenizer_name) {
    nlohmann::ordered_json j;
    j["architectures"] = {"LlamaForCausalLM"};
    j["model_type"] = "llama";
    j["hidden_size"] = c.dim;
    j["num_hidden_layers"] = c.n_layers;
    j["num_attention_heads"] = c.n_heads;
    j["num_key_value_heads"] = c.n_kv_heads;
    j["head_dim"] = c.head_dim;
    j["intermediate_size"] = c.hidden_dim;
    j["vocab_size"] = c.vocab_size;
    j["max_position_embeddings"] = c.max_seq_len;
    j["rope_theta"] = c.rope_theta;
    j["rms_norm_eps"] = c.norm_eps;
    j["tie_word_embeddings"] = c.tied_embeddings;
    j["hidden_act"] = "silu";
    j["torch_dtype"] = "float32";
    j["plab_tokenizer"] = tokenizer_name;
    return j.dump(2) + "\n";
}

namespace {

// A Hugging Face style directory: config.json + model.safetensors (half-split RoPE rows).
Model load_hf_directory(const fs::path& p) {
    fs::path dir = fs::is_directory(p) ? p : p.parent_path();
    const fs::path config_path = dir / "config.json";
    const fs::path tensors_path = dir / "model.safetensors";
    PLAB_CHECK(fs::exists(config_path),
               "model directory " << dir.string() << " has no config.json");
    PLAB_CHECK(fs::exists(tensors_path),
               "model directory " << dir.string() << " has no model.safetensors");
    const std::string config_text = read_text(config_path);
    Model m;
    m.source = dir.string();
    m.weights.config = config_from_json(config_text, config_path.string());
    const ModelConfig& c = m.weights.config;

    TensorMap t = read_safetensors(tensors_path.string());
    const std::string file = tensors_path.string();
    const std::int64_t d = c.dim, q = std::int64_t(c.n_heads) * c.head_dim,
                       kv = std::int64_t(c.n_kv_heads) * c.head_dim, f = c.hidden_dim,
                       v = c.vocab_size;
    Weights& w = m.weights;
    w.tok_embeddings = take(t, "model.embed_tokens.weight", {v, d}, file);
    for (int i = 0; i < c.n_layers; ++i) {
        LayerWeights l;
        l.attn_norm = take(t, layer_name(i, "input_layernorm.weight"), {d}, file);
        l.wq = take(t, layer_name(i, "self_attn.q_proj.weight"), {q, d}, file);
        l.wk = take(t, layer_name(i, "self_attn.k_proj.weight"), {kv, d}, file);
        l.wv = take(t, layer_name(i, "self_attn.v_proj.weight"), {kv, d}, file);
        l.wo = take(t, layer_name(i, "self_attn.o_proj.weight"), {d, q}, file);
        l.ffn_norm = take(t, layer_name(i, "post_attention_layernorm.weight"), {d}, file);
        l.w_gate = take(t, layer_name(i, "mlp.gate_proj.weight"), {f, d}, file);
        l.w_up = take(t, layer_name(i, "mlp.up_proj.weight"), {f, d}, file);
        l.w_down = take(t, layer_name(i, "mlp.down_proj.weight"), {d, f}, file);
        w.layers.push_back(std::move(l));
    }
    w.final_norm = take(t, "model.norm.weight", {d}, file);
    if (!c.tied_embeddings) w.classifier = take(t, "lm_head.weight", {v, d}, file);
    t.erase("lm_head.weight");  // some tied checkpoints still carry a copy
    PLAB_CHECK(t.empty(), file << ": unexpected tensor " << t.begin()->first
                               << " (more layers than num_hidden_layers?)");
    w.validate();

    const auto j = nlohmann::json::parse(config_text);
    // A Hugging Face directory has no "plab_tokenizer": its tokenizer.json is read
    // when there is one; else prompts are token ids unless the vocabulary is the byte one.
    const std::string tok =
        j.value("plab_tokenizer", std::string(fs::exists(dir / "tokenizer.json") ? "tokenizer.json"
                                              : c.vocab_size == 258              ? "byte"
                                                                                 : "ids"));
    // A tokenizer.json that config.json does not name is refused, not ignored
    // and not preferred: the weights' rows mean the ids of the tokenizer the
    // folder was written with, so reading prompts through another one would
    // run silently on wrong ids. A student who copied the file in meant it to
    // be used, and is told the one key to change.
    PLAB_CHECK(tok == "tokenizer.json" || !fs::exists(dir / "tokenizer.json"),
               dir.string() << " has tokenizer.json but config.json says \"plab_tokenizer\": \""
                            << tok << "\"; set plab_tokenizer to \"tokenizer.json\" to use it "
                            << "(its vocabulary must fit vocab_size " << c.vocab_size
                            << "), or remove the file");
    m.tokenizer = load_tokenizer(tok, dir, c.vocab_size);
    PLAB_CHECK(m.tokenizer->vocab_size() <= c.vocab_size,
               config_path.string() << ": tokenizer has " << m.tokenizer->vocab_size()
                                    << " tokens but vocab_size is " << c.vocab_size);
    return m;
}

// A llama2.c .bin (interleaved RoPE rows, permuted on load: model/llama2c.h) plus,
// when present beside it, tokenizer.bin (or the tokenizer.bpe that `plab convert`
// writes for BPE models); without one, an IdTokenizer (prompts given as token ids).
Model load_llama2c_model(const fs::path& p) {
    const std::string path = p.string();
    Model m;
    Llama2cInfo info;
    m.weights = read_llama2c_checkpoint(path, &info);
    m.source = path + " (llama2.c v" + std::to_string(info.version) + ")";
    const fs::path dir = p.parent_path();
    if (fs::exists(dir / "tokenizer.bin")) {
        m.tokenizer = std::make_unique<Llama2cTokenizer>(
            Llama2cTokenizer::load((dir / "tokenizer.bin").string(), m.weights.config.vocab_size));
    } else if (fs::exists(dir / "tokenizer.bpe")) {  // written by `plab convert` for BPE models
        m.tokenizer =
            std::make_unique<BpeTokenizer>(BpeTokenizer::load((dir / "tokenizer.bpe").string()));
        PLAB_CHECK(m.tokenizer->vocab_size() <= m.weights.config.vocab_size,
                   (dir / "tokenizer.bpe").string()
                       << " has " << m.tokenizer->vocab_size() << " tokens but " << path
                       << " has vocab_size " << m.weights.config.vocab_size);
    } else {
        m.tokenizer = std::make_unique<IdTokenizer>(m.weights.config.vocab_size,
                                                    Llama2cTokenizer::kBos, Llama2cTokenizer::kEos);
    }
    return m;
}

// The model formats `load_model` knows, tried in order; the first that
// recognises the path loads it. A new format (GGUF, ...) is one more row here
// and one more file under model/, not another branch inside load_model.
struct ModelFormat {
    const char* name;
    bool (*recognises)(const fs::path& p);
    Model (*load)(const fs::path& p);
};

constexpr ModelFormat kFormats[] = {
    // By its magic, or by its name: an empty or damaged .gguf is then told
    // what is wrong with it as a GGUF file, not that it is no directory.
    {"GGUF file (.gguf)",
     [](const fs::path& p) {
         return is_gguf_path(p.string()) || (fs::is_regular_file(p) && p.extension() == ".gguf");
     },
     [](const fs::path& p) { return load_gguf_model(p.string()); }},
    {"llama2.c checkpoint (.bin)",
     [](const fs::path& p) { return fs::is_regular_file(p) && p.extension() == ".bin"; },
     load_llama2c_model},
    // A folder, or one of its two files: its errors ("has no config.json")
    // name what such a directory needs.
    {"safetensors directory (config.json + model.safetensors)",
     [](const fs::path& p) {
         return fs::is_directory(p) || p.filename() == "config.json" ||
                p.filename() == "model.safetensors";
     },
     load_hf_directory},
};

}  // namespace

Model load_model(const std::string& given) {
    // "assets/model", "assets/draft": the shipped models, wherever plab runs
    // from (a lesson's scratch folder, a notebook), when no such path is here.
    std::string path = given;
    if (!fs::exists(path) && path.rfind("assets/", 0) == 0 &&
        fs::exists(std::string(PLAB_ASSETS_DIR) + "/" + path.substr(7)))
        path = std::string(PLAB_ASSETS_DIR) + "/" + path.substr(7);
    const fs::path p(path);
    PLAB_CHECK(fs::exists(p), "model path " << path
                                            << " does not exist; pass --model with a folder "
                                               "(config.json + model.safetensors), a llama2.c "
                                               ".bin or a .gguf file");
    for (const ModelFormat& f : kFormats) {
        if (f.recognises(p)) return f.load(p);
    }
    std::string names;
    for (const ModelFormat& f : kFormats) names += std::string(names.empty() ? "" : ", ") + f.name;
    throw Error("model path " + path + " is in no format plab reads; give one of: " + names);
}

void save_model(const Weights& w, const std::string& tokenizer_name, const std::string& dir_text) {
    w.validate();
    const fs::path dir(dir_text);
    fs::create_directories(dir);
    const ModelConfig& c = w.config;
    const std::int64_t d = c.dim, q = std::int64_t(c.n_heads) * c.head_dim,
                       kv = std::int64_t(c.n_kv_heads) * c.head_dim, f = c.hidden_dim,
                       v = c.vocab_size;
    TensorMap t;
    t["model.embed_tokens.weight"] = {{v, d}, w.tok_embeddings};
    for (int i = 0; i < c.n_layers; ++i) {
        const LayerWeights& l = w.layers[static_cast<std::size_t>(i)];
        t[layer_name(i, "input_layernorm.weight")] = {{d}, l.attn_norm};
        t[layer_name(i, "self_attn.q_proj.weight")] = {{q, d}, l.wq};
        t[layer_name(i, "self_attn.k_proj.weight")] = {{kv, d}, l.wk};
        t[layer_name(i, "self_attn.v_proj.weight")] = {{kv, d}, l.wv};
        t[layer_name(i, "self_attn.o_proj.weight")] = {{d, q}, l.wo};
        t[layer_name(i, "post_attention_layernorm.weight")] = {{d}, l.ffn_norm};
        t[layer_name(i, "mlp.gate_proj.weight")] = {{f, d}, l.w_gate};
        t[layer_name(i, "mlp.up_proj.weight")] = {{f, d}, l.w_up};
        t[layer_name(i, "mlp.down_proj.weight")] = {{d, f}, l.w_down};
    }
    t["model.norm.weight"] = {{d}, w.final_norm};
    if (!c.tied_embeddings) t["lm_head.weight"] = {{v, d}, w.classifier};
    write_safetensors((dir / "model.safetensors").string(), t, {{"format", "pt"}});
    std::ofstream cfg(dir / "config.json");
    cfg << config_to_json(c, tokenizer_name);
    PLAB_CHECK(cfg.good(), "cannot write " << (dir / "config.json").string());
}

}  // namespace plab
