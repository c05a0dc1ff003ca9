// `plab random-model DIR`: writes a seeded random model (config.json +
// model.safetensors). assets/model started as one; tests make their own.
#include <cstdio>
#include <memory>

#include "cli/common.h"
#include "core/error.h"
#include "perf/bench.h"

namespace plab::cli {
namespace {

struct RandomModelOptions {
    std::string dir;
    std::string shape = "small";
    std::uint64_t seed = 1;
};

// The small default: big enough to have GQA and several layers, small enough
// that the cpu-ref backend answers instantly.
ModelConfig small_shape() {
    ModelConfig c;
    c.dim = 64;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 16;
    c.hidden_dim = 176;
    c.vocab_size = 258;
    c.max_seq_len = 256;
    return c;
}

void run(const RandomModelOptions& o) {
    PLAB_CHECK(o.shape == "small" || o.shape == "stories15m",
               "--shape '" << o.shape << "' is not known; use small or stories15m");
    const ModelConfig c = o.shape == "small" ? small_shape() : stories15m_config();
    save_model(make_random_weights(c, o.seed), "byte", o.dir);
    std::printf("wrote a random %s model (%s, seed %llu) to %s\n", o.shape.c_str(),
                c.summary().c_str(), static_cast<unsigned long long>(o.seed), o.dir.c_str());
}

}  // namespace

void add_random_model_command(CLI::App& app) {
    auto o = std::make_shared<RandomModelOptions>();
    CLI::App* cmd = app.add_subcommand("random-model", "write a seeded random model directory");
    cmd->add_option("dir", o->dir, "output directory")->required();
    cmd->add_option("--shape", o->shape, "small or stories15m")->capture_default_str();
    cmd->add_option("--seed", o->seed, "random seed")->capture_default_str();
    cmd->callback([o] { run(*o); });
}

}  // namespace plab::cli
