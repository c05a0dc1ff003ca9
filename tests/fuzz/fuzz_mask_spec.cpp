// Fuzz harness: mask specs (runtime/mask_grammar.h) and custom mask files.
//
// Input: byte 0 chooses the prompt length T (1..64), byte 1 the number of heads
// (1..16); then the spec's text, and after the first newline the text of a
// mask file (parse_custom_mask). An accepted spec without file: items is bound
// to a prompt of T tokens (every 5th one BOS, for docs:bos), and the chunk-plan
// check must accept the plan nearest_valid_plan proposes for chunks of every
// size 1..T. Seeds: corpus/mask_spec/, the specs the lessons and tests use.
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "runtime/mask_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    const int t = 1 + data[0] % 64;
    const int heads = 1 + data[1] % 16;
    const std::string_view rest = plab::fuzz::as_text(data + 2, size - 2);
    const std::size_t newline = rest.find('\n');
    const std::string_view spec_text = rest.substr(0, newline);

    if (newline != std::string_view::npos) {
        plab::fuzz::refusal_is_fine([&] {
            const auto rows = plab::parse_custom_mask(rest.substr(newline + 1), t, "fuzz");
            PLAB_FUZZ_REQUIRE(static_cast<int>(rows.size()) == t);
            for (const auto& row : rows) PLAB_FUZZ_REQUIRE(static_cast<int>(row.size()) == t);
        });
    }
    plab::fuzz::refusal_is_fine([&] {
        const plab::MaskSpec spec = plab::parse_mask_spec(spec_text);
        for (const plab::MaskItem& item : spec.items) {
            if (item.kind == plab::MaskKind::custom) return;  // names a file: not read here
        }
        std::vector<int32_t> tokens(static_cast<std::size_t>(t));
        for (int p = 0; p < t; ++p) tokens[static_cast<std::size_t>(p)] = p % 5 == 0 ? 1 : 7 + p;
        plab::MaskContext ctx;
        ctx.tokens = tokens;
        ctx.bos_id = 1;
        ctx.n_heads = heads;
        const plab::BoundMask bound = plab::bind_mask(spec, ctx);
        const plab::Mask mask = bound.view();
        const long long pairs = plab::count_visible_pairs(mask, t);
        PLAB_FUZZ_REQUIRE(pairs >= t && pairs <= static_cast<long long>(t) * t);
        for (int tile : {1, 3, 16}) {
            const auto map = plab::tile_map(mask, t, tile);
            const int tiles = (t + tile - 1) / tile;
            PLAB_FUZZ_REQUIRE(static_cast<int>(map.size()) == tiles * tiles);
        }
        for (int chunk = 1; chunk <= t; ++chunk) {
            const plab::ChunkPlan good =
                plab::nearest_valid_plan(mask, plab::fixed_chunk_plan(t, chunk));
            PLAB_FUZZ_REQUIRE(good.n_tokens() == t);
            try {
                plab::check_plan_for_mask(mask, good);
            } catch (const plab::Error& e) {  // refusing the plan it proposed is a bug
                std::fprintf(stderr, "nearest_valid_plan %s refused: %s\n",
                             good.to_string().c_str(), e.what());
                std::abort();
            }
        }
    });
    return 0;
}
