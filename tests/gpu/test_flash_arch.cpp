// The gpu backend's flash attention at any head size, on every architecture
// the native build targets (issue 47).
//
// What it shows: (1) the tiles launch_attention_flash chooses fit the
// shared memory each architecture gives a block (sm_75 64 KiB, sm_86/89
// 99 KiB, sm_80 163 KiB, sm_90 227 KiB) at every head_dim from 1 to 256, and
// on sm_80 and sm_90 the compiled sizes up to 128 keep their 64 x 64 tiles
// (so their bits); (2) a small random model of each head_dim in
// {1, 3, 24, 40, 72, 112, 160, 256} — compiled sizes and padded ones, all on
// flash attention — runs
// on gpu within the fast tolerance of cpu-ref, and every chunk plan is bit
// for bit its own whole prefill. The [arch] cases run once per emulated
// architecture (PLAB_SIMT_ARCH, tests/gpu/CMakeLists.txt), so the second
// shows both promises under each profile's tiles.
#include <catch2/catch.hpp>
#include <cmath>

#include "gpu_test_util.h"
#include "kernels.h"
#include "runtime/equivalence.h"
#include "runtime/registry.h"
#include "test_util.h"

namespace plab::test {
namespace {

namespace emu = gpu_emulated;

// The largest per-block limit tiles are compiled for, at or under `bytes`.
long long compiled_limit(std::size_t bytes) {
    long long best = 0;
    for (long long l : emu::kFlashSharedLimits)
        if (l <= static_cast<long long>(bytes)) best = std::max(best, l);
    return best;
}

double largest_abs(const std::vector<float>& v) {
    double m = 0;
    for (float x : v) m = std::max(m, double(std::fabs(x)));
    return m;
}

}  // namespace

TEST_CASE("gpu flash attention: tiles fit every architecture's shared memory at head_dim 1..256",
          "[gpu][flash][arch]") {
    // The numbers: 64 x 64 tiles ask 72,704 B at Dh 48 and 84,992 B at 64,
    // over sm_75's 64 KiB a block.
    REQUIRE(emu::flash_shared_bytes(48, 64, 64) == 72704);
    REQUIRE(emu::flash_shared_bytes(64, 64, 64) == 84992);
    REQUIRE(emu::flash_shared_bytes(128, 64, 64) == 166912);
    for (const simt::ArchProfile& p : simt::kArchProfiles) {
        const long long limit = compiled_limit(p.shared_per_block);
        REQUIRE(limit > 0);
        for (int dh = 1; dh <= emu::kFlashMaxHeadDim; ++dh) {
            INFO(p.name << " Dh=" << dh);
            const emu::FlashTiles t = emu::flash_tiles_for(emu::flash_bucket(dh), limit);
            REQUIRE(t.head_dim >= dh);
            REQUIRE(t.queries >= 16);
            REQUIRE(t.keys >= 8);
            REQUIRE(t.shared_bytes == emu::flash_shared_bytes(t.head_dim, t.queries, t.keys));
            REQUIRE(t.shared_bytes <= static_cast<long long>(p.shared_per_block));
            // A decode step's tiles: 16 queries, the same key tile (the same bits).
            const emu::FlashTiles d = emu::flash_decode_tiles(t);
            REQUIRE(d.queries == 16);
            REQUIRE(d.keys == t.keys);
            REQUIRE(d.shared_bytes <= t.shared_bytes);
            // The compiled sizes up to 128 keep v4's tiles (and bits) where they fit.
            if (limit >= 163 * 1024 && t.head_dim <= 128) {
                REQUIRE(t.queries == 64);
                REQUIRE(t.keys == 64);
            }
        }
    }
    // The emulated device in use (PLAB_SIMT_ARCH) gets exactly those tiles.
    const simt::ArchProfile& arch = simt::arch_profile();
    for (int dh = 1; dh <= emu::kFlashMaxHeadDim; ++dh) {
        INFO(arch.name << " Dh=" << dh);
        const emu::FlashTiles want =
            emu::flash_tiles_for(emu::flash_bucket(dh), compiled_limit(arch.shared_per_block));
        const emu::FlashTiles got = emu::flash_tiles(dh);
        REQUIRE(got.queries == want.queries);
        REQUIRE(got.keys == want.keys);
        REQUIRE(got.head_dim == want.head_dim);
    }
}

TEST_CASE("gpu prefill at head_dim 1, 3, 24, 40, 72, 112, 160, 256: near cpu-ref, chunked == full",
          "[gpu][prefill][flash][head_dim][arch]") {
    // 21 tokens: past a 16-query tile (sm_75's at large Dh) and several 8-key
    // tiles; plans that cut inside tiles.
    const int kTokens = 21;
    const char* const plans[] = {"5", "3,1,4,13", "16,5"};
    for (const int dh : {1, 3, 24, 40, 72, 112, 160, 256}) {
        // D, L, H, Hkv, Dh, F, V, max_seq_len: one layer, GQA 2:1, D != H·Dh.
        const ModelConfig config = small_config(24, 1, 2, 1, dh, 32, 41, 32);
        const Weights weights = make_random_weights(config, 4700 + dh);
        const auto tokens = random_tokens(kTokens, config.vocab_size, 4701 + dh);
        auto cpu_ref = make_backend("cpu-ref");
        const DeviceModel ref_model(*cpu_ref, weights);
        const PrefillSnapshot ref =
            run_prefill_snapshot(ref_model, tokens, parse_chunk_plan("full", kTokens));
        require_not_all_zero(ref.last_logits, "cpu-ref logits");
        // The fast backends' promise (check_fast_backend): 1e-5 of the largest |logit|.
        const double tol = 1e-5 * largest_abs(ref.last_logits);
        for (auto& gpu : gpu_backend_forms(GpuVariant::fast)) {
            // 160 and 256 run compiled sizes of their own (GCC 12 once miscompiled
            // them emulated: kernels/CMakeLists.txt); 3, 24, 40, 72 and 112 padded ones.
            INFO(gpu->name() << " Dh=" << dh << " (compiled size " << emu::flash_bucket(dh) << ")");
            const DeviceModel model(*gpu, weights);
            SessionOptions options;
            options.block_size = 4;
            const PrefillSnapshot full =
                run_prefill_snapshot(model, tokens, parse_chunk_plan("full", kTokens), options);
            require_allclose(full.last_logits, ref.last_logits, tol, 0,
                             "tiled GEMM and online softmax reorder sums: 1e-5 of max |logit|");
            for (const char* plan_text : plans) {
                INFO("plan " << plan_text);
                const PrefillSnapshot s = run_prefill_snapshot(
                    model, tokens, parse_chunk_plan(plan_text, kTokens), options);
                REQUIRE(compare_snapshots(s, full).bitwise());
            }
        }
    }
}

}  // namespace plab::test
