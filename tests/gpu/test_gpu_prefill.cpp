// Whole prefills on the GPU backends: gpu-ref is cpu-ref, bit for bit; gpu is close.
//
// What it shows: the central invariant of the course, on the GPU path. For
// seeded random models (grouped-query and plain multi-head attention) and
// chunk plans that do not divide the prompt, gpu-ref's last-position logits
// and every cached K and V equal cpu-ref's full prefill bit for bit — chunked
// or not, with small or large KV blocks. gpu's fast kernels (tiled GEMM,
// online-softmax attention) stay within relative 1e-5 of cpu-ref's logits and
// pick the same greedy token. The emulated form runs everywhere; the native
// form too where a CUDA device is present (tests/gpu/gpu_test_util.h).
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "equivalence_checks.h"
#include "gpu_test_util.h"
#include "runtime/equivalence.h"
#include "runtime/registry.h"
#include "test_util.h"

namespace plab::test {
namespace {

struct Setup {
    const char* name;
    ModelConfig config;
};

std::vector<Setup> setups() {
    return {
        // D, L, H, Hkv, Dh, F, V, max_seq_len
        {"GQA H=4 Hkv=2", small_config(48, 2, 4, 2, 12, 80, 67, 64)},
        {"MHA H=3 tied",
         [] {
             ModelConfig c = small_config(48, 2, 3, 3, 16, 72, 61, 64);
             c.tied_embeddings = true;
             return c;
         }()},
    };
}

const int kPromptLength = 13;
const char* const kPlans[] = {"full", "1", "5", "3,1,4,5", "7,6"};

double max_abs(const std::vector<float>& v) {
    double m = 0;
    for (float x : v) m = std::max(m, double(std::fabs(x)));
    return m;
}

double max_abs_kv(const PrefillSnapshot& s) {
    double m = 0;
    for (const auto& l : s.k) m = std::max(m, max_abs(l));
    for (const auto& l : s.v) m = std::max(m, max_abs(l));
    return m;
}

}  // namespace

TEST_CASE("gpu-ref prefill: chunked == full == cpu-ref, bit for bit, on logits and K/V",
          "[gpu][prefill]") {
    for (const Setup& setup : setups()) {
        const Weights weights = make_random_weights(setup.config, 7);
        const auto tokens = random_tokens(kPromptLength, setup.config.vocab_size, 8);
        auto cpu_ref = make_backend("cpu-ref");
        const DeviceModel ref_model(*cpu_ref, weights);
        const PrefillSnapshot ref =
            run_prefill_snapshot(ref_model, tokens, parse_chunk_plan("full", kPromptLength));
        require_not_all_zero(ref.last_logits, "cpu-ref logits");
        for (auto& gpu : gpu_backend_forms(GpuVariant::reference)) {
            const DeviceModel model(*gpu, weights);
            for (int block_size : {4, 16}) {
                SessionOptions options;
                options.block_size = block_size;
                const PrefillSnapshot full = run_prefill_snapshot(
                    model, tokens, parse_chunk_plan("full", kPromptLength), options);
                for (const char* plan_text : kPlans) {
                    const ChunkPlan plan = parse_chunk_plan(plan_text, kPromptLength);
                    const PrefillSnapshot s = run_prefill_snapshot(model, tokens, plan, options);
                    INFO(setup.name << ", " << gpu->name() << ", plan " << plan.to_string()
                                    << ", block size " << block_size);
                    const Difference vs_ref = compare_snapshots(s, ref);
                    INFO("vs cpu-ref: logits max abs " << vs_ref.logits_max_abs << ", K/V max abs "
                                                       << vs_ref.kv_max_abs);
                    CHECK(vs_ref.logits_bitwise);
                    CHECK(vs_ref.kv_bitwise);
                    // Chunked == full on the same backend; the full plan against
                    // itself would only show determinism, so it is compared with
                    // cpu-ref alone (above).
                    if (plan.lengths != full.plan.lengths) {
                        CHECK(compare_snapshots(s, full).bitwise());
                    }
                }
            }
        }
    }
}

TEST_CASE("gpu prefill: within relative 1e-5 of cpu-ref, same greedy token", "[gpu][prefill]") {
    for (Setup setup : setups()) {
        // gpu's flash attention is compiled for a set of Dh (12 -> 16 here).
        setup.config.head_dim = flash_head_dim_at_least(setup.config.head_dim);
        const Weights weights = make_random_weights(setup.config, 17);
        const auto tokens = random_tokens(kPromptLength, setup.config.vocab_size, 18);
        auto cpu_ref = make_backend("cpu-ref");
        const DeviceModel ref_model(*cpu_ref, weights);
        const PrefillSnapshot ref =
            run_prefill_snapshot(ref_model, tokens, parse_chunk_plan("full", kPromptLength));
        // Tolerance relative to the tensor's scale: logits near 0 carry the
        // absolute rounding error of the larger terms they were summed from.
        const double logits_tol = 1e-5 * max_abs(ref.last_logits);
        const double kv_tol = 1e-5 * max_abs_kv(ref);
        for (auto& gpu : gpu_backend_forms(GpuVariant::fast)) {
            const DeviceModel model(*gpu, weights);
            for (const char* plan_text : kPlans) {
                SessionOptions options;
                options.block_size = 4;
                const ChunkPlan plan = parse_chunk_plan(plan_text, kPromptLength);
                const PrefillSnapshot s = run_prefill_snapshot(model, tokens, plan, options);
                INFO(setup.name << ", " << gpu->name() << ", plan " << plan.to_string());
                // atol only (rtol 0): "relative 1e-5" means 1e-5 of the largest
                // |logit|, the promise the test name states; an extra 1e-5·|logit|
                // per element would double it on the largest logits.
                require_allclose(s.last_logits, ref.last_logits, logits_tol, 0,
                                 "tiled GEMM and online softmax reorder sums (and native builds "
                                 "fuse multiply-adds): 1e-5 of the largest |logit|");
                const Difference d = compare_snapshots(s, ref);
                WARN(setup.name << ", " << gpu->name() << ", plan " << plan.to_string()
                                << ": logits max |diff| " << d.logits_max_abs << " (allowed "
                                << logits_tol << "), K/V max |diff| " << d.kv_max_abs
                                << " (allowed " << kv_tol << ")");
                CHECK(d.kv_max_abs <= kv_tol);
                // Same greedy token, unless cpu-ref's top two logits are so close that
                // two errors within the tolerance could swap them (as check_fast_backend).
                if (test::top_two_gap(ref.last_logits) > 2 * logits_tol)
                    CHECK(d.same_argmax);
                else
                    WARN("near tie: cpu-ref's top-2 gap is within twice the tolerance");
            }
        }
    }
}

TEST_CASE("gpu backends: the registry says which form runs", "[gpu][registry]") {
    const auto names = backend_names();
    REQUIRE(std::find(names.begin(), names.end(), "gpu-ref") != names.end());
    REQUIRE(std::find(names.begin(), names.end(), "gpu") != names.end());
#if PLAB_HAVE_CUDA
    const bool native = gpu_native::device_count() > 0;
#else
    const bool native = false;
#endif
    const std::string form = native ? " (native)" : " (emulated)";
    auto ref = make_backend("gpu-ref");
    auto fast = make_backend("gpu");
    CHECK(ref->name() == "gpu-ref" + form);
    CHECK(fast->name() == "gpu" + form);
    CHECK(ref->is_reference());
    CHECK_FALSE(fast->is_reference());
}

TEST_CASE("plab toy --backend gpu-ref gives 2, 3, 14/3, 6 through the GPU attention kernel",
          "[gpu][cli]") {
    const CliResult r = run_cli({"toy", "--backend", "gpu-ref", "--json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["backend"].get<std::string>().rfind("gpu-ref (", 0) == 0);
    const auto full = j["full"].get<std::vector<float>>();
    REQUIRE(full.size() == 4);
    CHECK(full[0] == 2.0f);
    CHECK(full[1] == 3.0f);
    CHECK(full[2] == 14.0f / 3.0f);  // 14/3 rounded once: the division comes last
    CHECK(full[3] == 6.0f);
    CHECK(j["exact"][2].get<std::string>().find("14/3") != std::string::npos);
    CHECK(j["all_bitwise_equal"].get<bool>());
}

}  // namespace plab::test

namespace plab::test {

TEST_CASE("plab compare: a matrix of backends x plans vs cpu-ref, reference rows bitwise",
          "[gpu][cli]") {
    // Token ids, not text: the plan must not depend on how the shipped tokenizer cuts a prompt.
    const CliResult r = run_cli({"compare", "--backends", "cpu-ref,gpu-ref,gpu", "--tokens",
                                 "256,5,9,13,2,40,7,7,80,3,11,6,99,4,17,21,8,30,1,2", "--plans",
                                 "full;3;2,9,9", "--json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["reference_backends_bitwise"].get<bool>());
    REQUIRE(j["rows"].size() == 9);
    for (const auto& row : j["rows"]) {
        const std::string backend = row["backend"];
        INFO(backend << " plan " << row["plan"]);
        if (backend.rfind("gpu", 0) == 0) {
            CHECK((backend.find("(emulated)") != std::string::npos ||
                   backend.find("(native)") != std::string::npos));
        }
        if (row["reference"].get<bool>()) {
            CHECK(row["logits_bitwise"].get<bool>());
            CHECK(row["kv_bitwise"].get<bool>());
        } else {
            CHECK(row["logits_max_diff_relative"].get<double>() <= 1e-5);
            CHECK(row["same_first_token"].get<bool>());
        }
    }
    // A bad plan is one clear line and a non-zero exit.
    const CliResult bad = run_cli({"compare", "--backends", "gpu-ref", "--plans", "full;5,5"});
    CHECK(bad.exit_code == 1);
    CHECK(bad.err.find("plab: error:") != std::string::npos);
}

}  // namespace plab::test
