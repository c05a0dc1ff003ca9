// Masks on the GPU reference backend: gpu-ref == cpu-ref bit for bit, for every
// mask kind, composition and modifier.
//
// What it shows: the mask (core/mask.h) and its data words (documents, custom
// bits, ALiBi slopes) reach the kernels by value plus one uploaded array, and
// the shared spec (core/attention_math.h) makes the two reference backends agree
// on every output, probability and probe score — on the attention op alone and
// on whole chunked prefills of random GQA models with odd head_dim. Runs
// emulated everywhere, natively too where a CUDA device is present.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "core/attention_shape.h"
#include "gpu_test_util.h"
#include "mask_cases.h"
#include "model/weights.h"
#include "runtime/equivalence.h"
#include "runtime/registry.h"
#include "runtime/session.h"
#include "test_util.h"

namespace plab::test {
namespace {

namespace fs = std::filesystem;

// A folder for this process's mask files, removed when the process exits.
fs::path temp_dir() {
    return test::process_temp_dir("plab_gpu_mask_test");
}

// Everything the attention op and its probe return, for one backend.
std::vector<std::vector<float>> attention_everything(Backend& b, const AttentionShape& s,
                                                     const std::vector<int32_t>& table,
                                                     const std::vector<float>& q,
                                                     const std::vector<float>& k_pool,
                                                     const std::vector<float>& v_pool) {
    auto up = [&](const std::vector<float>& v) {
        DeviceArray a(b, v.size());
        b.upload(a.buf(), v.data(), v.size());
        return a;
    };
    DeviceArray dq = up(q), dk = up(k_pool), dv = up(v_pool), out(b, q.size());
    b.fill(out.buf(), NAN);
    b.attention(out.buf(), dq.buf(), dk.buf(), dv.buf(), table, s);
    std::vector<std::vector<float>> all(1, std::vector<float>(q.size()));
    b.download(all[0].data(), out.buf(), q.size());
    const std::size_t cells = std::size_t(s.n_queries) * s.n_keys();
    for (int h = 0; h < s.n_heads; ++h) {
        DeviceArray p(b, cells), sc(b, cells);
        b.fill(p.buf(), NAN);
        b.fill(sc.buf(), NAN);
        b.attention_probs(p.buf(), sc.buf(), dq.buf(), dk.buf(), table, s, h);
        all.emplace_back(cells);
        b.download(all.back().data(), p.buf(), cells);
        all.emplace_back(cells);
        b.download(all.back().data(), sc.buf(), cells);
    }
    return all;
}

}  // namespace

TEST_CASE("gpu-ref masked attention op: outputs / probabilities and scores equal cpu-ref bitwise",
          "[gpu][mask]") {
    const fs::path dir = temp_dir();
    auto cpu = make_backend("cpu-ref");
    const auto forms = gpu_backend_forms(GpuVariant::reference);
    struct Shape {
        int t, c, h, hkv, dh, block;
    };
    for (const Shape sh : {Shape{12, 5, 4, 2, 7, 4}, Shape{21, 21, 3, 1, 5, 3}}) {
        const std::vector<int32_t> tokens = mask_case_tokens(sh.t, 50, 3 + sh.t);
        for (const MaskCase& mc : mask_cases(sh.t, dir)) {
            INFO("mask " << mc.spec << " T=" << sh.t << " C=" << sh.c << " H=" << sh.h
                         << " Hkv=" << sh.hkv << " Dh=" << sh.dh);
            const BoundMask bound = make_mask(mc.spec, mask_context(tokens, sh.h));
            // The mask's host words: the GPU backend uploads its own copy.
            const AttentionShape s =
                attention_shape(sh.c, sh.t - sh.c, sh.h, sh.hkv, sh.dh, sh.block, bound.view());
            const int blocks = (sh.t + sh.block - 1) / sh.block;
            std::vector<int32_t> table;
            for (int i = 0; i < blocks; ++i) table.push_back((i * 5 + 2) % blocks);
            const std::size_t pool = std::size_t(blocks) * sh.block * sh.hkv * sh.dh;
            const auto k_pool = random_floats(pool, 200 + sh.t, -1.5f, 1.5f);
            const auto v_pool = random_floats(pool, 201 + sh.t);
            const auto q = random_floats(std::size_t(sh.c) * sh.h * sh.dh, 202 + sh.t, -1.5f, 1.5f);
            const auto want = attention_everything(*cpu, s, table, q, k_pool, v_pool);
            require_not_all_zero(want[0], "cpu-ref attention output");
            for (const auto& gpu : forms) {
                INFO(gpu->name());
                const auto got = attention_everything(*gpu, s, table, q, k_pool, v_pool);
                REQUIRE(got.size() == want.size());
                for (std::size_t i = 0; i < got.size(); ++i)
                    require_bitwise_equal(got[i], want[i],
                                          i == 0 ? "output" : (i % 2 ? "probabilities" : "scores"));
            }
        }
    }
}

TEST_CASE("gpu-ref masked prefill: logits and every K/V equal cpu-ref bitwise / chunked or not",
          "[gpu][mask][prefill]") {
    const fs::path dir = temp_dir();
    auto cpu = make_backend("cpu-ref");
    const auto forms = gpu_backend_forms(GpuVariant::reference);
    // D, L, H, Hkv, Dh, F, V, max_seq_len: GQA with odd head_dim, and MHA with odd head count.
    for (const ModelConfig& c :
         {small_config(30, 2, 6, 2, 5, 40, 50, 48), small_config(27, 2, 3, 3, 9, 33, 50, 48)}) {
        const Weights w = make_random_weights(c, 300 + c.head_dim);
        const DeviceModel ref_model(*cpu, w);
        const int t = 13;
        const std::vector<int32_t> tokens = mask_case_tokens(t, c.vocab_size, 301);
        for (const MaskCase& mc : mask_cases(t, dir)) {
            SessionOptions so;
            so.block_size = 4;
            so.mask = make_mask(mc.spec, mask_context(tokens, c.n_heads));
            // A plan that cuts early and late, made valid for the mask (prefix whole).
            const ChunkPlan plan = nearest_valid_plan(so.mask.view(), parse_chunk_plan("2,5,6", t));
            const PrefillSnapshot want =
                run_prefill_snapshot(ref_model, tokens, ChunkPlan{{t}}, so);
            for (const auto& gpu : forms) {
                const DeviceModel dm(*gpu, w);
                for (const ChunkPlan& p : {ChunkPlan{{t}}, plan}) {
                    INFO("mask " << mc.spec << " on " << gpu->name() << " plan " << p.to_string()
                                 << " H=" << c.n_heads << " Dh=" << c.head_dim);
                    const Difference d =
                        compare_snapshots(run_prefill_snapshot(dm, tokens, p, so), want);
                    REQUIRE(d.bitwise());
                }
            }
        }
    }
}

TEST_CASE(
    "masks on the gpu fast backend: within 1e-5 of cpu-ref / same greedy token / chunked == "
    "whole bitwise / and the flash kernel skips exactly the tiles the mask calls empty",
    "[gpu][mask][prefill][fast]") {
    const fs::path dir = temp_dir();
    auto cpu = make_backend("cpu-ref");
    const auto forms = gpu_backend_forms(GpuVariant::fast);
    // GQA; Dh 8, a head_dim the flash kernel is compiled for (gpu-ref above keeps odd ones).
    ModelConfig c = small_config(30, 2, 6, 2, 8, 40, 50, 160);
    const Weights w = make_random_weights(c, 400);
    const DeviceModel ref_model(*cpu, w);
    const int t = 150;  // three 64-key tiles
    const std::vector<int32_t> tokens = mask_case_tokens(t, c.vocab_size, 401);
    for (const MaskCase& mc : mask_cases(t, dir)) {
        SessionOptions so;
        so.mask = make_mask(mc.spec, mask_context(tokens, c.n_heads));
        const PrefillSnapshot want = run_prefill_snapshot(ref_model, tokens, ChunkPlan{{t}}, so);
        double scale = 0;
        for (float x : want.last_logits) scale = std::max(scale, double(std::fabs(x)));
        const ChunkPlan plan = nearest_valid_plan(so.mask.view(), parse_chunk_plan("80,70", t));
        for (const auto& gpu : forms) {
            const DeviceModel dm(*gpu, w);
            INFO("mask " << mc.spec << " on " << gpu->name() << " plan " << plan.to_string());
            const PrefillSnapshot got = prefill_checking_tiles(*gpu, dm, tokens, plan, so);
            const Difference d = compare_snapshots(got, want);
            // 1e-5 of max |logit|: tiled GEMMs, online softmax and the library expf.
            REQUIRE(d.logits_max_abs <= 1e-5 * scale);
            REQUIRE(d.same_argmax);
            // Chunk-invariant: key tiles aligned to position 0 and a tile with no
            // visible key leaving a row's running sums untouched give the whole
            // prefill's bits (logits and every K/V).
            const PrefillSnapshot whole =
                prefill_checking_tiles(*gpu, dm, tokens, ChunkPlan{{t}}, so);
            REQUIRE(compare_snapshots(got, whole).bitwise());
        }
    }
}

}  // namespace plab::test
