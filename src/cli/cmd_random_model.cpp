// `plab random-model DIR`: writes a seeded random model (config.json +
// model.safetensors). assets/model started as one; tests make their own.
#include <cstdio>
#include <memory>

#include "cli/common.h"
#include "core/error.h"
#include "model/shapes.h"

namespace plab::cli {
namespace {

struct RandomModelOptions {
    std::string dir;
    std::string shape = "small";
    std::uint64_t seed = 1;
};

void run(const RandomModelOptions& o) {
    const ModelConfig c = named_shape(o.shape);
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
