// gpu's decode kernels (issue 47, part 3): the one-row product
// (kernels/matmul_rows.cu) and the fused steps around it — SwiGLU as the
// gate/up product's epilogue, the residual add with the next RMSNorm, RoPE of
// Q and K with the K/V append — each one launch where there were two or three.
//
// What it shows: fusing changes how many launches a step costs, never a bit.
// Each fused op is compared bitwise with the ops it replaces on the same
// backend (Backend's default, which calls them one by one), and a decode
// row's product with the same row inside a prefill-sized product (which takes
// matmul_tiled or matmul_blocked): the same k-order chain, so the same bits,
// emulated and natively. Inputs are random from fixed seeds; the pools start
// random too, so a write to a wrong slot shows.
#include <catch2/catch.hpp>
#include <numeric>
#include <random>

#include "gpu_test_util.h"
#include "kernels.h"
#include "runtime/equivalence.h"
#include "runtime/registry.h"
#include "test_util.h"

namespace plab::test {

TEST_CASE("gpu decode kernels: a row's product has the bits it has inside a prefill's product",
          "[gpu][kernels][decode]") {
    // 1 to 8 rows take matmul_rows; the same rows as the first of 70 (or 200)
    // take matmul_tiled (or matmul_blocked). k spans one slice of 256, several
    // and a ragged last one; n divides no block of 16 outputs.
    struct Shape {
        int m, n, k, big_m;
    };
    for (const Shape s : {Shape{1, 37, 300, 70}, Shape{3, 16, 256, 70}, Shape{8, 130, 513, 70},
                          Shape{1, 300, 1000, 200}, Shape{5, 33, 7, 70}}) {
        REQUIRE(gpu_emulated::matmul_rows_pays(s.m));
        REQUIRE_FALSE(gpu_emulated::matmul_rows_pays(s.big_m));
        const auto x = random_floats(std::size_t(s.big_m) * s.k, 5000 + s.k);
        const auto w = random_floats(std::size_t(s.n) * s.k, 5100 + s.n);
        for (auto& gpu : gpu_backend_forms(GpuVariant::fast)) {
            INFO(gpu->name() << ": " << s.m << " x " << s.n << " x " << s.k);
            const DeviceArray dx = upload(*gpu, x), dw = upload(*gpu, w);
            DeviceArray rows(*gpu, std::size_t(s.m) * s.n), all(*gpu, std::size_t(s.big_m) * s.n);
            gpu->fill(rows.buf(), NAN);
            gpu->matmul(rows.buf(), dx.buf(), dw.buf(), s.m, s.n, s.k);
            gpu->matmul(all.buf(), dx.buf(), dw.buf(), s.big_m, s.n, s.k);
            std::vector<float> first = download(*gpu, all);
            first.resize(std::size_t(s.m) * s.n);
            require_not_all_zero(first, "the prefill-sized product");
            require_bitwise_equal(download(*gpu, rows), first, "decode rows vs the same rows");
        }
    }
}

TEST_CASE("gpu decode kernels: gate and up with SwiGLU is one launch, with the bits of three",
          "[gpu][kernels][decode]") {
    struct Shape {
        int m, f, k;
    };
    for (const Shape s : {Shape{1, 80, 288}, Shape{3, 37, 513}, Shape{8, 16, 20}}) {
        const auto x = random_floats(std::size_t(s.m) * s.k, 5200 + s.k);
        const auto wg = random_floats(std::size_t(s.f) * s.k, 5300 + s.f);
        const auto wu = random_floats(std::size_t(s.f) * s.k, 5400 + s.f);
        for (auto& gpu : gpu_backend_forms(GpuVariant::fast)) {
            INFO(gpu->name() << ": " << s.m << " x " << s.f << " x " << s.k);
            const DeviceArray dx = upload(*gpu, x), dg = upload(*gpu, wg), du = upload(*gpu, wu);
            const std::size_t size = std::size_t(s.m) * s.f;
            DeviceArray fused(*gpu, size), apart(*gpu, size), up(*gpu, size);
            gpu->fill(fused.buf(), NAN);
            const auto ops = ops_while(*gpu, [&] {
                gpu->matmul_swiglu(fused.buf(), up.buf(), dx.buf(), dg.buf(), du.buf(), s.m, s.f,
                                   s.k);
            });
            CHECK(ops == std::map<std::string, int>{{"matmul_swiglu", 1}});
            // Backend's default: gate|up (one matmul_rows launch), then swiglu_kernel.
            const auto apart_ops = ops_while(*gpu, [&] {
                gpu->Backend::matmul_swiglu(apart.buf(), up.buf(), dx.buf(), dg.buf(), du.buf(),
                                            s.m, s.f, s.k);
            });
            CHECK(apart_ops == std::map<std::string, int>{{"matmul", 1}, {"swiglu", 1}});
            const std::vector<float> got = download(*gpu, fused);
            require_not_all_zero(got, "matmul_swiglu");
            require_bitwise_equal(got, download(*gpu, apart), "fused SwiGLU vs matmul + swiglu");
        }
    }
}

TEST_CASE("gpu decode kernels: the residual add and the next norm in one launch, same bits",
          "[gpu][kernels][decode]") {
    for (const int rows : {1, 5}) {
        for (const int dim : {1, 37, 288, 700}) {
            const std::size_t n = std::size_t(rows) * dim;
            const auto x = random_floats(n, 5500 + dim + rows);
            const auto y = random_floats(n, 5600 + dim + rows);
            const auto weight = random_floats(std::size_t(dim), 5700 + dim, 0.5f, 1.5f);
            for (auto& gpu : gpu_backend_forms(GpuVariant::fast)) {
                INFO(gpu->name() << ": " << rows << " rows of " << dim);
                const DeviceArray dy = upload(*gpu, y), dw = upload(*gpu, weight);
                DeviceArray x1 = upload(*gpu, x), x2 = upload(*gpu, x);
                DeviceArray o1(*gpu, n), o2(*gpu, n);
                gpu->fill(o1.buf(), NAN);
                const auto ops = ops_while(*gpu, [&] {
                    gpu->add_rmsnorm(x1.buf(), dy.buf(), o1.buf(), dw.buf(), rows, dim, 1e-5f);
                });
                CHECK(ops == std::map<std::string, int>{{"add_rmsnorm", 1}});
                gpu->Backend::add_rmsnorm(x2.buf(), dy.buf(), o2.buf(), dw.buf(), rows, dim, 1e-5f);
                require_not_all_zero(download(*gpu, o1), "add_rmsnorm");
                require_bitwise_equal(download(*gpu, x1), download(*gpu, x2), "the residual");
                require_bitwise_equal(download(*gpu, o1), download(*gpu, o2), "the norm");
            }
        }
    }
}

TEST_CASE("gpu decode kernels: RoPE of Q and K with the K/V append is one launch, same bits",
          "[gpu][kernels][decode]") {
    struct Shape {
        int n_heads, n_kv_heads, head_dim, rows;
        bool scattered;  // rows of a batched step, each at its own position
    };
    const int max_pos = 40, pool_slots = 64;
    for (const Shape s :
         {Shape{4, 2, 3, 1, false}, Shape{2, 2, 1, 3, true}, Shape{6, 2, 8, 7, false},
          Shape{3, 1, 5, 4, true}, Shape{4, 4, 16, 2, true}}) {
        const int half = s.head_dim / 2, kvd = s.n_kv_heads * s.head_dim;
        std::vector<float> cos_t(std::size_t(max_pos) * std::max(half, 1)), sin_t(cos_t.size());
        for (std::size_t i = 0; i < cos_t.size(); ++i) {
            cos_t[i] = static_cast<float>(std::cos(0.37 * double(i)));
            sin_t[i] = static_cast<float>(std::sin(0.37 * double(i)));
        }
        const auto q = random_floats(std::size_t(s.rows) * s.n_heads * s.head_dim, 5800);
        const auto k = random_floats(std::size_t(s.rows) * kvd, 5801);
        const auto v = random_floats(std::size_t(s.rows) * kvd, 5802);
        const auto pool = random_floats(std::size_t(pool_slots) * kvd, 5803);
        std::mt19937 rng(5804 + s.head_dim);
        std::vector<int32_t> positions;
        for (int r = 0; r < s.rows; ++r)
            positions.push_back(s.scattered ? int(rng() % max_pos) : 11 + r);
        if (s.scattered && s.rows > 1) positions[1] = positions[0];  // two rows at one position
        // Distinct slots anywhere in the pool, in no order.
        std::vector<int32_t> slots(std::size_t{pool_slots});
        std::iota(slots.begin(), slots.end(), 0);
        std::shuffle(slots.begin(), slots.end(), rng);
        slots.resize(std::size_t(s.rows));

        for (auto& gpu : gpu_backend_forms(GpuVariant::fast)) {
            INFO(gpu->name() << ": H " << s.n_heads << ", Hkv " << s.n_kv_heads << ", Dh "
                             << s.head_dim << ", " << s.rows << " rows");
            const DeviceArray dcos = upload(*gpu, cos_t), dsin = upload(*gpu, sin_t);
            struct Run {
                DeviceArray q, k, v, k_pool, v_pool;
            };
            auto fresh = [&] {
                return Run{upload(*gpu, q), upload(*gpu, k), upload(*gpu, v), upload(*gpu, pool),
                           upload(*gpu, pool)};
            };
            auto args = [&](const Run& r) {
                return RopeKvAppend{r.q.buf(),  r.k.buf(),    r.v.buf(),      s.rows,
                                    s.n_heads,  s.n_kv_heads, s.head_dim,     positions,
                                    dcos.buf(), dsin.buf(),   r.k_pool.buf(), r.v_pool.buf(),
                                    slots};
            };
            const Run fused = fresh(), apart = fresh();
            const auto ops = ops_while(*gpu, [&] { gpu->rope_kv_append(args(fused)); });
            CHECK(ops.at("rope_kv_append") == 1);
            CHECK(ops.count("rope") + ops.count("kv_append") == 0);
            gpu->Backend::rope_kv_append(args(apart));
            require_bitwise_equal(download(*gpu, fused.q), download(*gpu, apart.q), "Q rotated");
            require_bitwise_equal(download(*gpu, fused.k), download(*gpu, apart.k), "K rotated");
            require_bitwise_equal(download(*gpu, fused.k_pool), download(*gpu, apart.k_pool),
                                  "the K pool");
            require_bitwise_equal(download(*gpu, fused.v_pool), download(*gpu, apart.v_pool),
                                  "the V pool");
            // And the rotation happened (a head_dim of 1 has no pair to rotate).
            if (half > 0) CHECK(download(*gpu, fused.k) != k);
        }
    }
}

TEST_CASE("gpu decode kernels: decode-shaped chunks give the whole prefill's bits",
          "[gpu][prefill][decode]") {
    // Chunks of 1 to 8 rows take matmul_rows and the fused ops, chunks of up to
    // 16 queries flash attention's 16-query tiles; the whole 40-token prompt
    // takes matmul_tiled/blocked and 64-query tiles. Every plan must give the
    // whole prompt's logits and K/V bit for bit (stories15M's head_dim, 48,
    // and 64; GQA 2:1).
    const int kTokens = 40;
    for (const int dh : {48, 64}) {
        const ModelConfig config = small_config(96, 2, 4, 2, dh, 160, 97, 64);
        const Weights weights = make_random_weights(config, 6100 + dh);
        const auto tokens = random_tokens(kTokens, config.vocab_size, 6101 + dh);
        for (auto& gpu : gpu_backend_forms(GpuVariant::fast)) {
            INFO(gpu->name() << " Dh=" << dh);
            const DeviceModel model(*gpu, weights);
            const PrefillSnapshot whole =
                run_prefill_snapshot(model, tokens, parse_chunk_plan("full", kTokens));
            require_not_all_zero(whole.last_logits, "whole prefill logits");
            for (const char* plan : {"39,1", "16,16,8", "8,7,1,24", "1"}) {
                INFO("plan " << plan);
                const PrefillSnapshot s =
                    run_prefill_snapshot(model, tokens, parse_chunk_plan(plan, kTokens));
                REQUIRE(compare_snapshots(s, whole).bitwise());
            }
        }
    }
}

}  // namespace plab::test
