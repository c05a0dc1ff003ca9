// perf/host_timed_backend.h: the wrapper `plab bench` times the host
// backends' ops through. What must hold: every call reaches the wrapped
// backend's own method (its overrides, not Backend's defaults, so a wrapped
// `cpu` runs its fused and batched paths), the values are the wrapped
// backend's bit for bit, and the op list is exactly what forward.cpp calls,
// in call order, with timing on and nothing with it off.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "backends/cpu_ref.h"
#include "perf/bench.h"
#include "perf/host_timed_backend.h"
#include "runtime/chunk_plan.h"
#include "runtime/device_model.h"
#include "runtime/equivalence.h"
#include "runtime/registry.h"
#include "test_util.h"

namespace plab::test {
namespace {

// cpu-ref that counts the calls of the methods Backend has defaults for.
class CountingBackend final : public CpuRefBackend {
public:
    std::map<std::string, int> calls;

    void matmul_parts(Buffer x, int m, int k, std::span<const MatmulPart> parts) override {
        ++calls["matmul_parts"];
        CpuRefBackend::matmul_parts(x, m, k, parts);
    }
    void prepare_weight(Buffer w, int n, int k) override {
        ++calls["prepare_weight"];
        CpuRefBackend::prepare_weight(w, n, k);
    }
    void prepare_kv_pool(Buffer k_pool, int block_size, int row_size) override {
        ++calls["prepare_kv_pool"];
        CpuRefBackend::prepare_kv_pool(k_pool, block_size, row_size);
    }
    void rope_rows(Buffer x, int rows, int n_heads, int head_dim,
                   std::span<const int32_t> positions, Buffer cos, Buffer sin) override {
        ++calls["rope_rows"];
        CpuRefBackend::rope_rows(x, rows, n_heads, head_dim, positions, cos, sin);
    }
    void attention_batch(Buffer k_pool, Buffer v_pool, std::span<const AttentionCall> c) override {
        ++calls["attention_batch"];
        CpuRefBackend::attention_batch(k_pool, v_pool, c);
    }
    void add_rmsnorm(Buffer x, Buffer y, Buffer out, Buffer weight, int rows, int dim,
                     float eps) override {
        ++calls["add_rmsnorm"];
        CpuRefBackend::add_rmsnorm(x, y, out, weight, rows, dim, eps);
    }
    void argmax_rows(Buffer x, int rows, std::size_t n, std::span<int32_t> out) override {
        ++calls["argmax_rows"];
        CpuRefBackend::argmax_rows(x, rows, n, out);
    }
};

}  // namespace

TEST_CASE("host-timed backend: every call reaches the wrapped backend's own method, same bits",
          "[perf][timing]") {
    const ModelConfig c = small_config(48, 3, 4, 2, 12, 80, 67, 64);
    const Weights weights = make_random_weights(c, 71);
    const auto tokens = random_tokens(13, c.vocab_size, 72);
    const ChunkPlan plan = parse_chunk_plan("5,8", 13);
    const int chunks = 2, L = c.n_layers;

    CountingBackend inner;
    HostTimedBackend timed(inner);
    CHECK(timed.name() == "cpu-ref");
    CHECK(timed.is_reference());
    const DeviceModel model(timed, weights);
    const PrefillSnapshot got = run_prefill_snapshot(model, tokens, plan);
    // The wrapped backend's overrides ran, as forward.cpp calls them: per
    // chunk and layer the fused Q/K/V and gate/up products, RoPE of Q and K,
    // one attention call; one K pool prepared per layer.
    CHECK(inner.calls["matmul_parts"] == chunks * 2 * L);
    CHECK(inner.calls["rope_rows"] == chunks * 2 * L);
    CHECK(inner.calls["attention_batch"] == chunks * L);
    CHECK(inner.calls["add_rmsnorm"] > 0);
    CHECK(inner.calls["prepare_kv_pool"] == L);
    CHECK(inner.calls["prepare_weight"] > 0);
    std::vector<int32_t> best(1, -1);
    DeviceArray x(timed, 5);
    const std::vector<float> five = {0.5f, -1.0f, 3.0f, 3.0f, 2.0f};
    timed.upload(x.buf(), five.data(), five.size());
    timed.argmax_rows(x.buf(), 1, 5, best);
    CHECK(inner.calls["argmax_rows"] == 1);
    CHECK(best[0] == 2);

    // The same bits as the wrapped backend alone; `cpu` too (its own paths).
    for (const std::string name : {"cpu-ref", "cpu"}) {
        INFO(name);
        auto plain = make_backend(name);
        HostTimedBackend wrapped(*plain);
        auto fresh = make_backend(name);
        const PrefillSnapshot a = run_prefill_snapshot(DeviceModel(wrapped, weights), tokens, plan);
        const PrefillSnapshot b = run_prefill_snapshot(DeviceModel(*fresh, weights), tokens, plan);
        CHECK(compare_snapshots(a, b).bitwise());
        if (name == "cpu-ref") CHECK(compare_snapshots(a, got).bitwise());
    }
}

TEST_CASE("host-timed backend: the ops forward.cpp calls, in call order, only while timing is on",
          "[perf][timing]") {
    const ModelConfig c = small_config(48, 2, 4, 2, 12, 80, 67, 64);
    const Weights weights = make_random_weights(c, 73);
    const auto tokens = random_tokens(11, c.vocab_size, 74);
    const ChunkPlan plan = parse_chunk_plan("4", 11);  // chunks of 4, 4, 3
    const int chunks = 3, L = c.n_layers;
    auto cpu = make_backend("cpu");
    HostTimedBackend timed(*cpu);
    REQUIRE(timed.times_device_ops());
    const DeviceModel model(timed, weights);

    run_prefill_snapshot(model, tokens, plan);  // timing off: nothing recorded
    CHECK(timed.take_device_op_times().empty());

    timed.set_device_op_timing(true);
    double wall_us = 0;
    run_prefill_snapshot(model, tokens, plan, {}, &wall_us);
    timed.set_device_op_timing(false);
    const std::vector<DeviceOpTime> ops = timed.take_device_op_times();
    CHECK(timed.take_device_op_times().empty());  // taken once
    REQUIRE(!ops.empty());
    // Per chunk: the embedding; per layer 2 fused products (Q/K/V, gate/up)
    // and 2 single ones (Wo, W_down), RoPE of Q and K, one KV append, one
    // attention call, one SwiGLU; then the classifier, for the last chunk only.
    const std::map<std::string, int> n = count_by_op(ops);
    CHECK(n.at("embed") == chunks);
    CHECK(n.at("matmul_parts") == chunks * 2 * L);
    CHECK(n.at("matmul") == chunks * 2 * L + 1);
    CHECK(n.at("rope_rows") == chunks * 2 * L);
    CHECK(n.at("kv_append") == chunks * L);
    CHECK(n.at("attention_batch") == chunks * L);
    CHECK(n.at("swiglu") == chunks * L);
    // Before the first chunk's embedding, only the new session's KV pools
    // being zeroed (fill); times count from the first op.
    const auto first_embed = std::find_if(ops.begin(), ops.end(),
                                          [](const DeviceOpTime& op) { return op.op == "embed"; });
    for (auto it = ops.begin(); it != first_embed; ++it) CHECK(it->op == "fill");
    CHECK(ops.front().start_ms == 0.0);
    double sum_ms = 0, end_ms = 0;
    for (auto it = ops.begin(); it != ops.end(); ++it) {
        INFO(it->op);
        CHECK(it->ms >= 0.0);
        CHECK(it->start_ms >= end_ms);  // one after the other, in call order
        end_ms = it->start_ms + it->ms;
        if (it >= first_embed) sum_ms += it->ms;
    }
    // The prefill's ops lie within its wall time (the wrapper's clock reads
    // fall inside of it). The fills before them do not: they zero the pools
    // when the Session is made, before prefill() starts its clock (on a fresh
    // CI machine, first touch of the pool's pages: 73 us of fill against a
    // 58 us prefill).
    CHECK(sum_ms <= wall_us * 1e-3);
}

TEST_CASE("bench time by op on the host: the median of 3 prefills, 1 once the budget is spent",
          "[perf][timing]") {
    // plab bench's table for cpu and cpu-ref (perf/bench.h): an untimed
    // prefill, then timed ones until there are 3 or the row's budget has gone
    // by. With no budget it must stop after one (cpu-ref's 2048-token prefill
    // is ~15 s: four of them once made `make bench` a minute longer).
    const ModelConfig c = small_config(48, 2, 4, 2, 12, 80, 67, 64);
    const Weights weights = make_random_weights(c, 75);
    auto cpu = make_backend("cpu");
    HostTimedBackend timed(*cpu);
    const DeviceModel model(timed, weights);
    BenchOptions o;
    o.budget_s = 1e9;
    const DeviceOpBreakdown three = device_op_breakdown(timed, model, 9, o);
    CHECK(three.runs == 3);
    CHECK(three.clock == "host");
    CHECK(three.tokens == 9);
    CHECK(three.ops_ms <= three.wall_ms);
    CHECK(count_by_op(timed.take_device_op_times()).empty());  // each prefill's ops taken
    o.budget_s = 0;
    const DeviceOpBreakdown one = device_op_breakdown(timed, model, 9, o);
    CHECK(one.runs == 1);
    REQUIRE(!one.ops.empty());
    // One prefill's ops, not three prefills' summed: 2 fused products a layer.
    const auto fused = std::find_if(one.ops.begin(), one.ops.end(),
                                    [](const DeviceOpRow& r) { return r.op == "matmul_parts"; });
    REQUIRE(fused != one.ops.end());
    CHECK(fused->launches == 2 * c.n_layers);
}

}  // namespace plab::test
