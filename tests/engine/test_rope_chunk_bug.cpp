// The classic chunking bug, made on purpose (lesson 3): RoPE must rotate a
// chunk's tokens by their *absolute* positions p, p+1, ... in the prompt, not
// by 0, 1, ... inside the chunk (RoFormer, Su et al. 2021: the score q·k
// depends on the difference of the two absolute positions).
//
// A chunk's keys are cached and read again by every later chunk, so a chunk
// that restarts its positions at 0 writes keys rotated as if they sat at the
// start of the prompt: every later query sees them at the wrong distance.
// Nothing crashes and the logits still look like logits; only a comparison
// with the full prefill shows it. This test makes the bug through a backend
// wrapper (RestartPositionsPerChunk) that passes every op through to cpu-ref
// but calls rope with pos0 = 0: the forward pass (src/runtime/forward.cpp)
// is untouched and gives rope the chunk's real offset, which the wrapper drops.
//   * the correct run (plain cpu-ref) is bitwise equal to the full prefill;
//   * the buggy run is not — in K of every layer from the second chunk on,
//     and in the last position's logits.
// The full prefill itself has one chunk at offset 0, where both agree: the
// bug is invisible unless the prompt is chunked.
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/weights.h"
#include "runtime/device_model.h"
#include "runtime/equivalence.h"
#include "runtime/registry.h"
#include "test_util.h"

using namespace plab;

namespace {

// cpu-ref with one deliberate mistake: RoPE positions restart at every chunk.
class RestartPositionsPerChunk final : public Backend {
public:
    explicit RestartPositionsPerChunk(Backend& inner) : inner_(inner) {}
    std::string name() const override { return inner_.name() + " (rope restarts per chunk)"; }
    bool is_reference() const override { return inner_.is_reference(); }
    Buffer alloc(std::size_t n) override { return inner_.alloc(n); }
    void release(Buffer b) noexcept override { inner_.release(b); }
    void upload(Buffer dst, const float* src, std::size_t n) override {
        inner_.upload(dst, src, n);
    }
    void download(float* dst, Buffer src, std::size_t n) override { inner_.download(dst, src, n); }
    void fill(Buffer dst, float value) override { inner_.fill(dst, value); }
    void synchronize() override { inner_.synchronize(); }
    void embed(Buffer out, std::span<const int32_t> tokens, Buffer table, int dim) override {
        inner_.embed(out, tokens, table, dim);
    }
    void rmsnorm(Buffer out, Buffer x, Buffer weight, int rows, int dim, float eps) override {
        inner_.rmsnorm(out, x, weight, rows, dim, eps);
    }
    void matmul(Buffer out, Buffer x, Buffer w, int m, int n, int k) override {
        inner_.matmul(out, x, w, m, n, k);
    }
    // The bug: the chunk's offset pos0 is dropped, so row i is rotated by
    // position i instead of pos0 + i.
    void rope(Buffer x, int rows, int n_heads, int head_dim, int pos0, Buffer cos,
              Buffer sin) override {
        offsets_seen_.push_back(pos0);
        inner_.rope(x, rows, n_heads, head_dim, 0, cos, sin);
    }
    void kv_append(Buffer k_pool, Buffer v_pool, Buffer k, Buffer v, std::span<const int32_t> slots,
                   int row_size) override {
        inner_.kv_append(k_pool, v_pool, k, v, slots, row_size);
    }
    void attention(Buffer out, Buffer q, Buffer k_pool, Buffer v_pool,
                   std::span<const int32_t> block_table, const AttentionShape& shape) override {
        inner_.attention(out, q, k_pool, v_pool, block_table, shape);
    }
    void attention_probs(Buffer probs, Buffer scores, Buffer q, Buffer k_pool,
                         std::span<const int32_t> block_table, const AttentionShape& shape,
                         int head) override {
        inner_.attention_probs(probs, scores, q, k_pool, block_table, shape, head);
    }
    void swiglu(Buffer out, Buffer gate, Buffer up, std::size_t n) override {
        inner_.swiglu(out, gate, up, n);
    }
    void add(Buffer x, Buffer y, std::size_t n) override { inner_.add(x, y, n); }
    int argmax(Buffer x, std::size_t n) override { return inner_.argmax(x, n); }

    // Every pos0 the forward pass asked for (proves it asked for the real offsets).
    const std::vector<int>& offsets_seen() const { return offsets_seen_; }

private:
    Backend& inner_;
    std::vector<int> offsets_seen_;
};

// Whether a and b have identical bits (float == would call -0 and 0 equal).
bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
               return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
           });
}

}  // namespace

TEST_CASE(
    "rope with positions restarted per chunk breaks bitwise equality, absolute positions keep it",
    "[prefill][rope][equivalence]") {
    // GQA 2:1, even head_dim (every component rotated), 4 chunks of 3,5,2,6.
    const ModelConfig config = test::small_config(48, 2, 4, 2, 12, 96, 97, 64);
    const Weights weights = make_random_weights(config, 15);
    const std::vector<int32_t> tokens = test::random_tokens(16, config.vocab_size, 1515);
    const ChunkPlan plan{{3, 5, 2, 6}};
    const ChunkPlan whole{{16}};

    auto cpu_ref = make_backend("cpu-ref");
    const DeviceModel model(*cpu_ref, weights);
    const PrefillSnapshot full = run_prefill_snapshot(model, tokens, whole);
    test::require_not_all_zero(full.last_logits, "full prefill logits");

    // Correct: the forward pass gives rope the chunk's absolute offset.
    const PrefillSnapshot chunked = run_prefill_snapshot(model, tokens, plan);
    test::require_bitwise_equal(chunked.last_logits, full.last_logits,
                                "logits, chunked with absolute positions");
    for (std::size_t l = 0; l < full.k.size(); ++l) {
        test::require_bitwise_equal(chunked.k[l], full.k[l], "K of layer " + std::to_string(l));
    }

    // Broken on purpose: the same plan with positions restarted at 0 per chunk.
    RestartPositionsPerChunk buggy(*cpu_ref);
    const DeviceModel buggy_model(buggy, weights);
    // One whole chunk starts at 0, so the bug cannot show there: bitwise equal.
    const PrefillSnapshot buggy_full = run_prefill_snapshot(buggy_model, tokens, whole);
    test::require_bitwise_equal(buggy_full.last_logits, full.last_logits,
                                "logits, one chunk (offset 0: the bug is invisible)");
    const PrefillSnapshot broken = run_prefill_snapshot(buggy_model, tokens, plan);
    // The forward pass asked for the real offsets 0, 3, 8, 10 (Q and K of
    // every layer); the wrapper dropped them.
    const std::vector<int>& seen = buggy.offsets_seen();
    CHECK(std::count(seen.begin(), seen.end(), 10) == 2 * config.n_layers);
    INFO("bitwise check against the full prefill must fail when positions restart per chunk");
    CHECK_FALSE(bitwise_equal(broken.last_logits, full.last_logits));
    const std::size_t row = std::size_t(config.n_kv_heads) * std::size_t(config.head_dim);
    for (std::size_t l = 0; l < full.k.size(); ++l) {
        INFO("layer " << l);
        REQUIRE(broken.k[l].size() == full.k[l].size());
        // The first chunk (positions 0..2) really starts at 0: its K is right.
        const std::vector<float> first(broken.k[l].begin(), broken.k[l].begin() + 3 * row);
        const std::vector<float> first_full(full.k[l].begin(), full.k[l].begin() + 3 * row);
        CHECK(bitwise_equal(first, first_full));
        // Position 3, the first token of chunk 1, is rotated as position 0.
        const std::vector<float> p3(broken.k[l].begin() + 3 * row, broken.k[l].begin() + 4 * row);
        const std::vector<float> p3_full(full.k[l].begin() + 3 * row, full.k[l].begin() + 4 * row);
        CHECK_FALSE(bitwise_equal(p3, p3_full));
    }
    // Not a rounding difference: the wrong rotation moves logits by far more
    // than the last bits (cpu-ref's chunked run above differs by exactly 0).
    CHECK(test::max_abs_diff(broken.last_logits, full.last_logits) > 1e-3);
}
