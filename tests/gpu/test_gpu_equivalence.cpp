// The foundation's equivalence checks (tests/equivalence_checks.cpp) on the
// GPU backends, in every form this machine can run (emulated; native too
// where a CUDA device is present).
//
// What it shows: gpu-ref keeps every promise cpu-ref keeps — all 512 chunk
// plans of a 10-token prompt, random configs (grouped-query attention, odd
// head_dim with an unrotated last component, D != H·Dh), any KV block size —
// and equals cpu-ref itself bit for bit. gpu keeps the fast backends' promise
// on the same random shapes and on a larger model: within 1e-5 of the largest
// |logit|, and the same greedy token wherever cpu-ref's top two logits are
// further apart than that tolerance allows to swap, for every plan.
#include <catch2/catch.hpp>

#include "equivalence_checks.h"
#include "gpu_test_util.h"

namespace plab::test {
namespace {

std::vector<Backend*> pointers(const std::vector<std::unique_ptr<Backend>>& v) {
    std::vector<Backend*> p;
    for (const auto& b : v) p.push_back(b.get());
    return p;
}

}  // namespace

// Names the forms this machine runs (printed: WARN), so a run shows whether
// the native kernels were tested at all. Under PLAB_REQUIRE_NATIVE=1 without a
// device it fails with the reason: the ctest gpu_require_native_fails_without_device
// (tests/gpu/CMakeLists.txt) runs it so and checks both outcomes.
TEST_CASE("gpu_backend_forms: the forms of gpu-ref this machine runs", "[gpu][forms]") {
    const auto forms = gpu_backend_forms(GpuVariant::reference);
    REQUIRE(!forms.empty());
    for (const auto& b : forms) WARN("gpu_backend_forms: " << b->name());
    CHECK(forms.front()->name() == "gpu-ref (emulated)");
}

TEST_CASE("gpu-ref: all 512 chunk plans of a 10-token prompt equal cpu-ref's full prefill",
          "[gpu][prefill][equivalence]") {
    const auto forms = gpu_backend_forms(GpuVariant::reference);
    check_all_plans_of_ten_tokens(pointers(forms));
}

TEST_CASE("gpu-ref: random configs (GQA, odd head_dim) and prompts equal cpu-ref",
          "[gpu][prefill][equivalence]") {
    const auto forms = gpu_backend_forms(GpuVariant::reference);
    check_random_configs(pointers(forms), 2);  // 2 prompts per config: the emulator is slow
}

TEST_CASE("gpu-ref: the KV block size does not change a bit", "[gpu][prefill][equivalence]") {
    const auto forms = gpu_backend_forms(GpuVariant::reference);
    check_block_size_invariance(pointers(forms));
}

TEST_CASE("gpu: all 512 chunk plans of a 10-token prompt are bitwise equal to its own full prefill",
          "[gpu][prefill][equivalence]") {
    for (auto& gpu : gpu_backend_forms(GpuVariant::fast))
        check_all_plans_of_ten_tokens_fast(*gpu, flash_head_dim_at_least);
}

TEST_CASE("gpu vs cpu-ref: within rel 1e-5 on logits, same greedy token, every plan bitwise equal",
          "[gpu][prefill][equivalence]") {
    for (auto& gpu : gpu_backend_forms(GpuVariant::fast)) {
        // Each random shape's Dh rounded up to a compiled one (7 -> 8, 9 -> 16, ...).
        const FastReport r = check_fast_backend(*gpu, flash_head_dim_at_least);
        WARN(gpu->name() << " vs cpu-ref over " << r.comparisons << " runs: max logit diff "
                         << r.worst << " of max |logit|; bitwise equal to its own whole prefill: "
                         << r.bitwise_to_own_full << "; greedy token checked in "
                         << r.argmax_checked << ", near ties " << r.near_ties);
        REQUIRE(r.worst > 0);  // the tiled kernels really are a different computation
    }
}

}  // namespace plab::test
