// Fuzz harness: chunk plans ("full", "4", "3,1,4") through parse_chunk_plan
// (runtime/chunk_plan.h). The first two bytes choose the prompt length T
// (0..65535, 0 included: it must be refused), the rest is the plan's text. An
// accepted plan must cut exactly T tokens into chunks of at least 1 and print
// as a plan that parses back to itself. Seeds: corpus/chunk_plan/.
#include "fuzz_util.h"
#include "runtime/chunk_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    const int n_tokens = data[0] | data[1] << 8;
    plab::fuzz::refusal_is_fine([&] {
        const plab::ChunkPlan plan =
            plab::parse_chunk_plan(plab::fuzz::as_text(data + 2, size - 2), n_tokens);
        PLAB_FUZZ_REQUIRE(n_tokens >= 1 && plan.n_tokens() == n_tokens);
        for (int len : plan.lengths) PLAB_FUZZ_REQUIRE(len >= 1);
        const plab::ChunkPlan again = plab::parse_chunk_plan(plan.to_string(), n_tokens);
        PLAB_FUZZ_REQUIRE(again.lengths == plan.lengths);
    });
    return 0;
}
