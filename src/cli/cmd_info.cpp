// `plab info`: what the model is, in numbers a student can check by hand.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/common.h"
#include "core/cpu_threads.h"
#include "core/machine_override.h"
#include "runtime/cost_model.h"
#include "runtime/registry.h"

namespace plab::cli {
namespace {

struct InfoOptions {
    std::string model;
    bool json = false;
};

// The first prompt length at which a layer's largest product gets a second
// thread. cpu runs Q, K, V as one product and gate, up as one (matmul_parts),
// and counts a product's work as its FLOPs or its weight's bytes
// (product_work); cpu-ref runs each weight alone, its FLOPs times its cost.
int first_threaded_prompt(const ModelConfig& c, bool reference) {
    const double d = c.dim, qd = double(c.n_heads) * c.head_dim;
    const double kvd = double(c.n_kv_heads) * c.head_dim;
    for (int t = 1; t <= c.max_seq_len; ++t) {
        const double work =
            reference ? kRefMatmulFlopCost * 2.0 * t * d * std::max({double(c.hidden_dim), qd, d})
                      : product_work(t, std::max(2.0 * c.hidden_dim, qd + 2 * kvd), d);
        if (cpu_threads_for(work) > 1) return t;
    }
    return 0;  // never (one CPU, or a model too small)
}

// Everything `plab info` shows, text or JSON: the model's shapes and costs,
// and how the cpu backends thread this model on this machine.
struct InfoResult {
    std::string source;
    ModelConfig config;
    std::string tokenizer;           // its kind: "bpe", "bytes", ...
    std::size_t kv_bytes = 0;        // per token: 2 x L x Hkv x Dh x 4
    int attention_overtakes_at = 0;  // T from which attention FLOPs exceed projections + MLP
    std::vector<std::string> backends;
    std::string gpu_form;  // native or emulated, as the registry describes it
    int cpu_threads = 0;
    bool threads_overridden = false;  // PLAB_CPU_THREADS
    CpuCaches caches;
    int threaded_from = 0;        // cpu: first prompt length on 2+ threads (0: never)
    int ref_threaded_from = 0;    // cpu-ref: the same
    double classifier_flops = 0;  // 2*D*V: decode's classifier
    int classifier_threads = 0;
};

InfoResult compute_info(const InfoOptions& o) {
    const Model m = load_model_or_default(o.model);
    InfoResult r;
    r.source = m.source;
    r.config = m.weights.config;
    r.tokenizer = m.tokenizer->kind();
    const ModelConfig& c = r.config;
    r.threaded_from = first_threaded_prompt(c, /*reference=*/false);
    r.ref_threaded_from = first_threaded_prompt(c, /*reference=*/true);
    r.classifier_flops = 2.0 * c.dim * c.vocab_size;
    r.classifier_threads = cpu_threads_for(product_work(1, c.vocab_size, c.dim));
    r.kv_bytes = c.kv_floats_per_token() * sizeof(float);
    r.attention_overtakes_at = attention_overtakes_projections_at(c);
    r.backends = backend_names();
    r.gpu_form = gpu_form_description();
    r.cpu_threads = cpu_threads();
    r.threads_overridden = cpu_threads_override() > 0;
    r.caches = cpu_caches();
    return r;
}

nlohmann::json info_json(const InfoResult& r) {
    const ModelConfig& c = r.config;
    nlohmann::json j;
    j["model"] = r.source;
    j["config"] = nlohmann::json::parse(config_to_json(c, r.tokenizer));
    j["parameters"] = c.n_params();
    j["weight_bytes"] = c.n_params() * sizeof(float);
    j["kv_bytes_per_token"] = r.kv_bytes;
    j["attention_overtakes_projections_at_tokens"] = r.attention_overtakes_at;
    j["tokenizer"] = r.tokenizer;
    j["backends"] = r.backends;
    j["gpu_form"] = r.gpu_form;
    j["cpu_threads"] = r.cpu_threads;
    j["cpu_caches"] = {{"l1_bytes", r.caches.l1},
                       {"l2_bytes", r.caches.l2},
                       {"l3_bytes", r.caches.l3},
                       {"from", r.caches.overridden ? "PLAB_CPU_CACHES" : "detected"}};
    j["cpu_min_flops_per_thread"] = kMinFlopsPerThread;
    j["cpu_threaded_prefill_from_tokens"] = r.threaded_from;
    j["cpu_decode_classifier_threads"] = r.classifier_threads;
    j["cpu_ref_flop_cost"] = {{"matmul", kRefMatmulFlopCost}, {"attention", kRefAttentionFlopCost}};
    j["cpu_ref_threaded_prefill_from_tokens"] = r.ref_threaded_from;
    return j;
}

// The model: shapes, parameters, KV bytes, where attention overtakes, backends.
void print_info_model_text(const InfoResult& r) {
    const ModelConfig& c = r.config;
    std::printf("Model: %s\n", r.source.c_str());
    std::printf("  %d layers, model dim D=%d, %d query heads and %d K/V heads of dim %d%s\n",
                c.n_layers, c.dim, c.n_heads, c.n_kv_heads, c.head_dim,
                c.n_kv_heads < c.n_heads ? " (grouped-query attention)" : "");
    std::printf("  SwiGLU hidden dim F=%d, vocabulary V=%d (%s tokenizer), max_seq_len %d\n",
                c.hidden_dim, c.vocab_size, r.tokenizer.c_str(), c.max_seq_len);
    std::printf("  RoPE theta %g (half-split pairs), RMSNorm eps %g, classifier %s\n", c.rope_theta,
                double(c.norm_eps), c.tied_embeddings ? "tied to embeddings" : "separate");
    std::printf("Parameters: %zu (%.2f MB as float32)\n", c.n_params(), c.n_params() * 4 / 1e6);
    std::printf(
        "KV cache: %zu bytes per token = 2 (K and V) x %d layers x %d K/V heads x %d dims x 4 "
        "bytes\n",
        r.kv_bytes, c.n_layers, c.n_kv_heads, c.head_dim);
    std::printf("  a full %d-token context holds %.2f MB of K/V\n", c.max_seq_len,
                double(r.kv_bytes) * c.max_seq_len / 1e6);
    std::printf(
        "Prefill FLOPs: attention (grows as T^2) exceeds projections + MLP (grow as T) from T = "
        "%d tokens\n",
        r.attention_overtakes_at);
    std::printf("Backends:");
    for (const auto& b : r.backends) std::printf(" %s", b.c_str());
    std::printf("\n");
    std::printf("  GPU backends: %s\n", r.gpu_form.c_str());
}

// The threads: the cpu backend's rule, the caches, this model on cpu and cpu-ref.
void print_info_threads_text(const InfoResult& r) {
    std::printf(
        "Threads of the cpu backend: up to %d (%s); each op "
        "gets\n  one thread per %.0f MFLOP of its work, because below that waking a thread "
        "costs more\n  than it saves (measured; see src/core/cpu_threads.h). A product "
        "of few rows\n  (decode) counts the bytes of its weight instead when they take "
        "longer to read.\n  Right after an op on every thread, the next product, norm, "
        "SwiGLU or RoPE takes them all:\n  the threads are still awake, no wake-up to pay.\n",
        r.cpu_threads,
        r.threads_overridden ? "from PLAB_CPU_THREADS" : "the CPUs this process may run on",
        kMinFlopsPerThread / 1e6);
    std::printf(
        "  Caches Eigen blocks its products for (--kernels fastest): L1 %lld KiB, L2 %lld "
        "KiB,\n  L3 %lld KiB (%s): the order of a product's adds, and so its last\n  bits, "
        "follow them and the CPU count (lesson 16).\n",
        r.caches.l1 / 1024, r.caches.l2 / 1024, r.caches.l3 / 1024,
        r.caches.overridden ? "from PLAB_CPU_CACHES" : "detected on this CPU");
    if (r.threaded_from > 0) {
        std::printf(
            "  This model: prompts shorter than %d tokens prefill on 1 thread; decode's "
            "classifier\n  (2*D*V = %.1f MFLOP) runs on %d.\n",
            r.threaded_from, r.classifier_flops / 1e6, r.classifier_threads);
    } else {
        std::printf("  This model: every op runs on 1 thread here.\n");
    }
    std::printf(
        "  cpu-ref follows the same rule, counting each of its FLOPs as %.0f (matmul) or %.0f\n"
        "  (attention) of the fast GEMM's: its in-order scalar sums run that much slower.\n",
        kRefMatmulFlopCost, kRefAttentionFlopCost);
    if (r.ref_threaded_from > 0) {
        std::printf(
            "  This model on cpu-ref: prompts shorter than %d tokens prefill on 1 thread.\n",
            r.ref_threaded_from);
    } else {
        std::printf("  This model on cpu-ref: every op runs on 1 thread here.\n");
    }
}

void run(const InfoOptions& o) {
    const InfoResult r = compute_info(o);
    if (o.json) {
        print_json(info_json(r));
        return;
    }
    print_info_model_text(r);
    print_info_threads_text(r);
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
