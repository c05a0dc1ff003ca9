// --kernels invariant|fastest (issue 48, lesson 16): the cpu backend's two
// kernel sets. `invariant` (the default) gives a request the same bits
// whatever shares its step; `fastest` hands each product to the library
// (Eigen: a GEMV for one row, a GEMM for more), whose order of the adds
// follows the product's shape — so a request's bits change with its
// batch-mates and its chunks, while staying near cpu-ref's.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/cpu_threads.h"
#include "core/kernel_choice.h"
#include "runtime/engine.h"
#include "runtime/registry.h"
#include "test_util.h"

namespace plab::test {
namespace {

// k = 64 and 160: long enough sums that a GEMV's lane-split order and a
// GEMM's one chain per output round differently.
ModelConfig kernels_config() {
    return small_config(64, 2, 4, 2, 16, 160, 97, 128);
}

struct KernelsRun {
    std::vector<std::vector<float>> logits;  // request 0's sampled rows
    std::vector<int32_t> tokens;             // its new tokens
};

// Request 0 (a 21-token prompt, 6 new tokens, greedy) alone or beside three
// batch-mates in steps of at most 5 tokens (so its prompt is chunked and its
// decode steps hold four sequences).
KernelsRun run_request(const Weights& w, const std::string& backend, Kernels kernels, bool busy) {
    EngineOptions eo;
    eo.backend = backend;
    eo.kernels = kernels;
    if (busy) eo.max_step_tokens = 5;
    Engine e(w, eo);
    RequestOptions ro;
    ro.max_new_tokens = 6;
    ro.keep_logits = true;
    ro.eos_id = -1;
    e.add_request(random_tokens(21, 97, 480), ro);
    if (busy) {
        for (std::uint64_t s = 1; s <= 3; ++s) e.add_request(random_tokens(9 + int(s), 97, s), ro);
    }
    e.run();
    const auto t = e.request(0).new_tokens();
    return {e.request(0).logits, std::vector<int32_t>(t.begin(), t.end())};
}

}  // namespace

TEST_CASE("fastest kernels: a product's bits follow its row count, each row near cpu-ref's",
          "[engine][kernels]") {
    const int n = 96, k = 160;
    const std::vector<float> w = random_floats(std::size_t(n) * k, 11);
    const std::vector<float> x = random_floats(std::size_t(7) * k, 12);
    // Row 0 of x times wᵀ, computed as a 1-row product and as row 0 of a 7-row one.
    auto product = [&](Backend& be, int m) {
        Buffer bw = be.alloc(w.size()), bx = be.alloc(std::size_t(m) * k),
               out = be.alloc(std::size_t(m) * n);
        be.upload(bw, w.data(), w.size());
        be.prepare_weight(bw, n, k);
        be.upload(bx, x.data(), std::size_t(m) * k);
        be.matmul(out, bx, bw, m, n, k);
        std::vector<float> all(std::size_t(m) * n);
        be.download(all.data(), out, all.size());
        for (Buffer b : {bw, bx, out}) be.release(b);
        return std::vector<float>(all.begin(), all.begin() + n);
    };
    auto ref = make_backend("cpu-ref");
    const std::vector<float> want = product(*ref, 1);
    auto fastest = make_backend("cpu", Kernels::fastest);
    auto invariant = make_backend("cpu");
    REQUIRE(fastest->name() == "cpu-fastest");
    REQUIRE(invariant->name() == "cpu");
    const std::vector<float> alone = product(*fastest, 1), beside = product(*fastest, 7);
    // Eigen's GEMV splits a dot product over vector lanes and adds the lanes
    // at the end; its GEMM keeps one chain per output: other roundings.
    CHECK_FALSE(same_bits(alone, beside));
    // Sums of 160 products of values in [-1, 1): a few float32 roundings of
    // ~10 apart, far below 1e-4 absolute.
    require_allclose(alone, want, 1e-4, 1e-5, "fastest, 1 row, vs cpu-ref");
    require_allclose(beside, want, 1e-4, 1e-5, "fastest, 7 rows, vs cpu-ref");
    require_bitwise_equal(product(*invariant, 1), product(*invariant, 7),
                          "invariant: one FMA chain per output whatever the rows");
}

TEST_CASE(
    "fastest kernels change a request's logits with its batch-mates and chunks, "
    "invariant ones do not",
    "[engine][kernels]") {
    const Weights w = make_random_weights(kernels_config(), 48);
    const KernelsRun fast_alone = run_request(w, "cpu", Kernels::fastest, false);
    const KernelsRun fast_busy = run_request(w, "cpu", Kernels::fastest, true);
    const KernelsRun inv_alone = run_request(w, "cpu", Kernels::invariant, false);
    const KernelsRun inv_busy = run_request(w, "cpu", Kernels::invariant, true);
    const KernelsRun ref = run_request(w, "cpu-ref", Kernels::invariant, false);
    REQUIRE(fast_alone.logits.size() == 6);
    REQUIRE(fast_busy.logits.size() == 6);
    int differing_decode_rows = 0;
    for (std::size_t t = 0; t < 6; ++t) {
        INFO("row " << t);
        if (t > 0)
            differing_decode_rows += same_bits(fast_alone.logits[t], fast_busy.logits[t]) ? 0 : 1;
        require_bitwise_equal(inv_busy.logits[t], inv_alone.logits[t],
                              "invariant kernels, busy vs alone");
        // The fast backends' tolerance on logits (cpu_fast.h: rel 1e-5),
        // with room for six steps of another order.
        require_allclose(fast_alone.logits[t], ref.logits[t], 1e-4, 1e-4, "fastest vs cpu-ref");
        require_allclose(fast_busy.logits[t], ref.logits[t], 1e-4, 1e-4, "fastest vs cpu-ref");
    }
    // Each decode step is one row alone (the library's GEMV) and several beside its
    // batch-mates (its GEMM): another order of the adds on every CPU. Row 0, the prompt's
    // last chunk, is a GEMM either way, in blocks that follow this CPU's caches and vector
    // width: whether its bits differ depends on the machine, so it is not counted.
    CHECK(differing_decode_rows == 5);
}

// The library's slices are one per CPU of the process, not one per thread
// given to the op: its bits follow the product's shape, never how many
// threads were awake (with slices per thread, lesson 16's same command
// turned 7 texts in one run and 8 in the next).
TEST_CASE("fastest kernels: the same product gives the same bits on one thread or on all",
          "[engine][kernels]") {
    // The shipped model's and stories15M's product shapes (n x k), and an
    // uneven one, large enough for every thread.
    const std::vector<std::pair<int, int>> shapes{{288, 288}, {768, 288},   {288, 768},
                                                  {512, 288}, {32000, 288}, {520, 512}};
    auto be = make_backend("cpu", Kernels::fastest);
    for (const auto& [n, k] : shapes) {
        const std::vector<float> w = random_floats(std::size_t(n) * k, 21);
        const std::vector<float> x = random_floats(std::size_t(64) * k, 22);
        Buffer bw = be->alloc(w.size()), bx = be->alloc(x.size()),
               out = be->alloc(std::size_t(64) * n);
        be->upload(bw, w.data(), w.size());
        be->prepare_weight(bw, n, k);
        be->upload(bx, x.data(), x.size());
        auto product = [&](int m) {
            be->matmul(out, bx, bw, m, n, k);
            std::vector<float> o(std::size_t(m) * n);
            be->download(o.data(), out, o.size());
            return o;
        };
        for (int m : {1, 4, 64}) {
            INFO(m << " rows of " << n << " x " << k);
            const std::vector<float> all = product(m);
            set_cpu_thread_cap(1);
            const std::vector<float> one = product(m);
            set_cpu_thread_cap(0);
            require_bitwise_equal(one, all, "fastest, 1 thread vs every thread");
        }
        for (Buffer b : {bw, bx, out}) be->release(b);
    }
}

TEST_CASE("the CLI's commands take --kernels, name it, and refuse it where it has no choice",
          "[engine][kernels][cli]") {
    const auto j =
        nlohmann::json::parse(run_cli({"prefill", "Once upon a time", "--backend", "cpu",
                                       "--kernels", "fastest", "--chunks", "3", "--json"})
                                  .out);
    CHECK(j["backend"] == "cpu-fastest");
    const auto text = run_cli({"prefill", "Once upon a time, Emma and Ivy went to the library.",
                               "--backend", "cpu", "--kernels", "fastest", "--chunks", "5"});
    REQUIRE(text.exit_code == 0);
    CHECK(text.out.find("Equivalence: plan 5,5,5,3 vs plan 18 on cpu-fastest") !=
          std::string::npos);
    CHECK(text.out.find("bitwise equal: no") != std::string::npos);
    CHECK(text.out.find("lesson 16") != std::string::npos);
    require_one_line_cli_error(
        run_cli({"generate", "hi", "--backend", "cpu-ref", "--kernels", "fastest"}),
        "--kernels fastest is a choice of the cpu backend; cpu-ref has one order");
    require_one_line_cli_error(
        run_cli({"generate", "hi", "--backend", "gpu", "--kernels", "fastest"}),
        "gpu has invariant kernels only");
    require_one_line_cli_error(run_cli({"serve", "--kernels", "fast"}),
                               "--kernels 'fast' is not a kernel set; valid: invariant");
    require_one_line_cli_error(
        run_cli({"bench", "--shape", "small", "--lengths", "16", "--backends", "cpu-ref",
                 "--kernels", "fastest"}),
        "--kernels fastest is a choice of the cpu backend: add cpu to --backends");
}

}  // namespace plab::test
