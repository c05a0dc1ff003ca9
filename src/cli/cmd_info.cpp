// `plab info`: what the model is, in numbers a student can check by hand.
#include <cstdio>
#include <memory>

#include "backends/registry.h"
#include "cli/common.h"

namespace plab::cli {
namespace {

struct InfoOptions {
    std::string model;
    bool json = false;
};

void run(const InfoOptions& o) {
    const Model m = load_model_arg(o.model);
    const ModelConfig& c = m.weights.config;
    const std::size_t kv_bytes = c.kv_floats_per_token() * sizeof(float);
    if (o.json) {
        nlohmann::json j;
        j["model"] = m.source;
        j["config"] = nlohmann::json::parse(config_to_json(c, m.tokenizer->kind()));
        j["parameters"] = c.n_params();
        j["weight_bytes"] = c.n_params() * sizeof(float);
        j["kv_bytes_per_token"] = kv_bytes;
        j["tokenizer"] = m.tokenizer->kind();
        j["backends"] = backend_names();
        j["gpu_form"] = gpu_form_description();
        print_json(j);
        return;
    }
    std::printf("Model: %s\n", m.source.c_str());
    std::printf("  %d layers, model dim D=%d, %d query heads and %d K/V heads of dim %d%s\n",
                c.n_layers, c.dim, c.n_heads, c.n_kv_heads, c.head_dim,
                c.n_kv_heads < c.n_heads ? " (grouped-query attention)" : "");
    std::printf("  SwiGLU hidden dim F=%d, vocabulary V=%d (%s tokenizer), max_seq_len %d\n",
                c.hidden_dim, c.vocab_size, m.tokenizer->kind().c_str(), c.max_seq_len);
    std::printf("  RoPE theta %g (half-split pairs), RMSNorm eps %g, classifier %s\n", c.rope_theta,
                double(c.norm_eps), c.tied_embeddings ? "tied to embeddings" : "separate");
    std::printf("Parameters: %zu (%.2f MB as float32)\n", c.n_params(), c.n_params() * 4 / 1e6);
    std::printf(
        "KV cache: %zu bytes per token = 2 (K and V) x %d layers x %d K/V heads x %d dims x 4 "
        "bytes\n",
        kv_bytes, c.n_layers, c.n_kv_heads, c.head_dim);
    std::printf("  a full %d-token context holds %.2f MB of K/V\n", c.max_seq_len,
                double(kv_bytes) * c.max_seq_len / 1e6);
    std::printf("Backends:");
    for (const auto& b : backend_names()) std::printf(" %s", b.c_str());
    std::printf("\n");
    std::printf("  GPU backends: %s\n", gpu_form_description().c_str());
}

}  // namespace

void add_info_command(CLI::App& app) {
    auto o = std::make_shared<InfoOptions>();
    CLI::App* cmd =
        app.add_subcommand("info", "model summary: shapes, parameters, KV bytes per token");
    add_model_option(cmd, o->model);
    cmd->add_flag("--json", o->json, "machine-readable output");
    cmd->callback([o] { run(*o); });
}

}  // namespace plab::cli
