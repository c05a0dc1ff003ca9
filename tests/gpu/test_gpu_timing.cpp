// Timing that measures kernels (issue 14 item 2): the GPU backends time every
// op on the device (a CUDA event before and after it), keep the small integer
// arrays resident between ops, and copy the KV slots and the block table once
// per chunk rather than once per layer.
//
// What it shows: the op list of one prefill is exactly what forward.cpp
// launches (counted here from the model's shape, not hard-coded), in launch
// order; timing changes no bit of the result; an unchanged array is not copied
// again, and a changed one is (a stale block table would give other logits).
// Emulated everywhere (the events then read the host clock); natively too
// where a CUDA device is present.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/rope.h"
#include "gpu_test_util.h"
#include "model/model_io.h"
#include "runtime/engine.h"
#include "runtime/equivalence.h"
#include "runtime/registry.h"
#include "runtime/session.h"
#include "test_util.h"

namespace plab::test {

TEST_CASE("gpu backends time every op of a prefill on the device, in launch order",
          "[gpu][timing]") {
    const ModelConfig c = small_config(48, 3, 4, 2, 16, 80, 67, 64);
    const Weights weights = make_random_weights(c, 31);
    const auto tokens = random_tokens(13, c.vocab_size, 32);
    const ChunkPlan plan = parse_chunk_plan("5,8", 13);
    const int chunks = 2, L = c.n_layers;

    auto cpu = make_backend("cpu");
    CHECK_FALSE(cpu->times_device_ops());
    CHECK(cpu->take_device_op_times().empty());

    for (GpuVariant variant : {GpuVariant::reference, GpuVariant::fast}) {
        for (auto& gpu : gpu_backend_forms(variant)) {
            INFO(gpu->name());
            REQUIRE(gpu->times_device_ops());
            const DeviceModel model(*gpu, weights);
            // KV blocks of 4 positions: the block table grows from 2 to 4 blocks
            // between the chunks (5 then 13 positions), so it changes too.
            SessionOptions options;
            options.block_size = 4;
            const PrefillSnapshot untimed = run_prefill_snapshot(model, tokens, plan, options);

            Session s(model, options);
            gpu->take_device_op_times();
            gpu->set_device_op_timing(true);
            const PrefillResult r = s.prefill(tokens, plan);
            gpu->set_device_op_timing(false);
            const std::vector<DeviceOpTime> ops = gpu->take_device_op_times();

            // Exactly the launches of runtime/forward.cpp, per chunk; then, for
            // the last chunk only (the first new token's logits), the final
            // RMSNorm, the classifier and the logits' copy back.
            const std::map<std::string, int> n = count_by_op(ops);
            if (variant == GpuVariant::reference) {
                // gpu-ref launches every op alone. Per layer 7 projections,
                // 2 RMSNorms, 2 RoPEs (Q, K), one KV append, one attention,
                // one SwiGLU, 2 residual adds.
                CHECK(n.at("matmul") == chunks * 7 * L + 1);
                CHECK(n.at("rmsnorm") == chunks * 2 * L + 1);
                CHECK(n.at("rope") == chunks * 2 * L);
                CHECK(n.at("kv_append") == chunks * L);
                CHECK(n.at("swiglu") == chunks * L);
                CHECK(n.at("add") == chunks * 2 * L);
            } else {
                // gpu fuses (chunks of 5 and 8 rows: matmul_rows, decode's
                // kernels). Per layer: Q|K|V as one product, W_o and down
                // (3), gate|up with SwiGLU (1), RoPE of Q and K with the KV
                // append (1), each residual add with the norm after it (2;
                // the last layer's second add has no norm after it).
                CHECK(n.at("matmul") == chunks * 3 * L + 1);
                CHECK(n.at("matmul_swiglu") == chunks * L);
                CHECK(n.at("rope_kv_append") == chunks * L);
                CHECK(n.at("add_rmsnorm") == chunks * (2 * L - 1));
                CHECK(n.at("add") == chunks);
                CHECK(n.at("rmsnorm") == chunks + 1);  // the first norm; the final one
                for (const char* fused_away : {"rope", "kv_append", "swiglu"})
                    CHECK(n.count(fused_away) == 0);
                // 16 launches a layer (gpu-ref's) became 8; a chunk adds its
                // embedding and first norm, the last one the final norm and
                // the classifier.
                int per_chunk = 0;
                for (const auto& [op, count] : n)
                    if (op != "upload" && op != "download") per_chunk += count;
                CHECK(per_chunk == chunks * (8 * L + 2) + 2);
            }
            CHECK(n.at("attention") == chunks * L);
            CHECK(n.at("embed") == chunks);
            CHECK(n.at("download") == 1);
            // Token ids, KV slots and the block table change between the two
            // chunks and are copied once each per chunk: 3 per chunk, where
            // copying the slots and the table for every layer would be 2L+1.
            CHECK(n.at("upload") == 3 * chunks);

            REQUIRE(!ops.empty());
            CHECK(ops.front().start_ms == 0);
            CHECK(ops.front().op == "upload");  // the first chunk's token ids, before embed
            for (std::size_t i = 0; i < ops.size(); ++i) {
                CHECK(ops[i].ms >= 0);
                if (i > 0) CHECK(ops[i].start_ms >= ops[i - 1].start_ms);
            }
            // Timing is observation only: every bit of the result is unchanged.
            CHECK(compare_snapshots(snapshot_of(s, r), untimed).bitwise());

            // Off again: nothing is recorded.
            Session quiet(model, SessionOptions{});
            quiet.prefill(tokens, plan);
            CHECK(gpu->take_device_op_times().empty());
        }
    }
}

TEST_CASE("gpu backends copy an unchanged array once and a changed one again", "[gpu][timing]") {
    const ModelConfig c = small_config(48, 2, 4, 2, 12, 80, 67, 64);
    const Weights weights = make_random_weights(c, 41);
    const auto a = random_tokens(11, c.vocab_size, 42);
    const auto b = random_tokens(11, c.vocab_size, 43);
    REQUIRE(a != b);
    const ChunkPlan full = parse_chunk_plan("full", 11);

    for (auto& gpu : gpu_backend_forms(GpuVariant::reference)) {
        INFO(gpu->name());
        const DeviceModel model(*gpu, weights);
        run_prefill_snapshot(model, a, full);  // a's tokens, slots and table now on the device

        // Same length, other tokens, a fresh session in the same pool layout:
        // only the token ids differ, so only they are copied.
        gpu->set_device_op_timing(true);
        const PrefillSnapshot sb = run_prefill_snapshot(model, b, full);
        gpu->set_device_op_timing(false);
        CHECK(count_by_op(gpu->take_device_op_times()).at("upload") == 1);

        // And what was not copied again was right: b's result equals that of
        // a backend that never saw a (a stale copy would change the logits).
        auto fresh = make_backend("cpu-ref");
        const DeviceModel ref(*fresh, weights);
        CHECK(compare_snapshots(sb, run_prefill_snapshot(ref, b, full)).bitwise());

        // Other KV blocks (a block size of 4 instead of 16): the table changes
        // ([0] -> [0, 1, 2]) but not the slots: a slot is block * B + offset, and
        // with blocks handed out in order positions 0..10 land in slots 0..10
        // whatever B is. So one copy, the table's.
        SessionOptions small_blocks;
        small_blocks.block_size = 4;
        gpu->set_device_op_timing(true);
        const PrefillSnapshot s4 = run_prefill_snapshot(model, b, full, small_blocks);
        gpu->set_device_op_timing(false);
        CHECK(count_by_op(gpu->take_device_op_times()).at("upload") == 1);
        CHECK(compare_snapshots(s4, run_prefill_snapshot(ref, b, full, small_blocks)).bitwise());
    }
}

TEST_CASE("plab prefill --trace on gpu has a device track with every op, plab bench its sums",
          "[gpu][timing][cli]") {
    static const CliRandomModel model("plab_gpu_timing_model", 5);
    const ModelConfig c = load_model(model.dir).weights.config;
    const std::filesystem::path trace = process_temp_dir("gpu_timing") / "trace.json";
    const auto p = run_cli({"prefill", "--model", model.dir, "--backend", "gpu", "--chunks", "4",
                            "--trace", trace.string(), "--json"});
    REQUIRE(p.exit_code == 0);
    std::ifstream f(trace);
    const auto t = nlohmann::json::parse(f);
    int device_matmuls = 0, host_device_events = 0;
    bool named_track = false;
    for (const auto& e : t["traceEvents"]) {
        if (e["ph"] == "M" && e["tid"] == 2) named_track = true;
        if (e.value("cat", "") != "device") continue;
        CHECK(e["tid"] == 2);
        if (e["name"] == "matmul") ++device_matmuls;
        ++host_device_events;
    }
    CHECK(named_track);
    const int prompt = nlohmann::json::parse(p.out)["tokens"].size();
    const int chunks = (prompt + 3) / 4;
    // Chunks of 4 rows take gpu's decode kernels (matmul_rows): Q|K|V as one
    // product, W_o and down a layer in every chunk (gate|up with SwiGLU is
    // matmul_swiglu); the classifier in the last chunk only.
    CHECK(device_matmuls == chunks * 3 * c.n_layers + 1);
    CHECK(host_device_events > device_matmuls);

    const auto b =
        run_cli({"bench", "--model", model.dir, "--backends", "gpu-ref,cpu-ref", "--lengths", "6",
                 "--repeats", "1", "--decode-steps", "1", "--batch", "2", "--json"});
    REQUIRE(b.exit_code == 0);
    const auto j = nlohmann::json::parse(b.out);
    // gpu-ref's ops timed on the device, cpu-ref's on the host clock.
    REQUIRE(j["device_ops"].size() == 2);
    CHECK(j["device_ops"][0]["backend"].get<std::string>().rfind("gpu-ref", 0) == 0);
    CHECK(j["device_ops"][0]["clock"] == "device");
    CHECK(j["device_ops"][1]["backend"] == "cpu-ref");
    CHECK(j["device_ops"][1]["clock"] == "host");
    // The device table is one prefill; the host one the median of three (a
    // 6-token prefill is far inside the row's time budget).
    CHECK(j["device_ops"][0]["prefills"] == 1);
    CHECK(j["device_ops"][1]["prefills"] == 3);
    // Each row is a fraction of its own machine's peak: CPU rows of the host's
    // GEMM, GPU rows of the device's cuBLAS SGEMM, measured only where the GPU
    // backends run natively (on the H200, gpu once read "381% of peak" against
    // the host's 1054 GFLOP/s; emulated, a GPU row has no peak to be held to).
    const bool device_peak = !j["device_gemm_peak_gflops"].is_null();
    CHECK(device_peak ==
          (j["device_ops"][0]["backend"].get<std::string>().find("(native)") != std::string::npos));
    for (const auto& p : j["prefill"]) {
        const bool cpu_row = p["backend"].get<std::string>().rfind("cpu", 0) == 0;
        INFO(p["backend"]);
        if (cpu_row || device_peak) {
            const double peak = j[cpu_row ? "gemm_peak_gflops" : "device_gemm_peak_gflops"];
            CHECK(p["fraction_of_peak"].get<double>() ==
                  Approx(p["gflops"].get<double>() / peak).epsilon(1e-9));
        } else {
            CHECK(p["fraction_of_peak"].is_null());
        }
    }
    // Likewise each decode row's bound is its own machine's copy bandwidth:
    // the host's for CPU rows, the device's (measured with the device peak,
    // natively only) for GPU rows. The read bandwidth is a host figure.
    CHECK(j["device_copy_gb_per_s"].is_null() == !device_peak);
    for (const auto& d : j["decode"]) {
        const bool cpu_row = d["backend"].get<std::string>().rfind("cpu", 0) == 0;
        INFO(d["backend"]);
        CHECK(d["bound_tokens_per_s"].is_null() == !(cpu_row || device_peak));
        CHECK(d["fraction_of_read_bound"].is_null() == !cpu_row);
        if (!cpu_row && device_peak) {
            const double bytes = d["bytes_per_token"];
            CHECK(d["bound_tokens_per_s"].get<double>() ==
                  Approx(j["device_copy_gb_per_s"].get<double>() * 1e9 / bytes).epsilon(1e-9));
            CHECK(d["fraction_of_bound"].get<double>() ==
                  Approx(d["tokens_per_s"].get<double>() / d["bound_tokens_per_s"].get<double>())
                      .epsilon(1e-9));
        }
    }
    const auto& row = j["device_ops"][0];
    CHECK(row["tokens"] == 6);
    double sum = 0;
    int matmuls = 0;
    for (const auto& op : row["ops"]) {
        sum += op["ms"].get<double>();
        if (op["op"] == "matmul") matmuls = op["launches"];
    }
    CHECK(matmuls == 7 * c.n_layers + 1);
    CHECK(sum == Approx(row["ops_ms"].get<double>()).epsilon(1e-9));
    CHECK(row["wall_ms"].get<double>() > 0);
    // And one decode step per backend, the same way: a step's products are
    // one-row products of every weight (Q, K, V, W_o, gate, up, down a layer)
    // and the classifier. gpu-ref launches each as a matmul; the host clock
    // times the calls, Q/K/V and gate/up one matmul_parts call each.
    // context = the prompt plus one untimed step.
    // What both kinds of step table share: the host clock for cpu-ref only,
    // 5 steps on the host and 1 on the device, the products as above, the
    // ops' sum. Returns the calls (launches) per op.
    const auto check_step = [&](const nlohmann::json& step) {
        const bool host = step["clock"] == "host";
        CHECK(host == (step["backend"] == "cpu-ref"));
        CHECK(step["steps"] == (host ? 5 : 1));
        double step_sum = 0;
        std::map<std::string, int> step_calls;
        for (const auto& op : step["ops"]) {
            step_sum += op["ms"].get<double>();
            step_calls[op["op"]] = op["launches"];
        }
        CHECK(step_calls["matmul"] == (host ? 2 : 7) * c.n_layers + 1);
        CHECK(step_calls["matmul_parts"] == (host ? 2 * c.n_layers : 0));
        CHECK(step_sum == Approx(step["ops_ms"].get<double>()).epsilon(1e-9));
        CHECK(step["ops_ms"].get<double>() > 0);
        return step_calls;
    };
    REQUIRE(j["decode_device_ops"].size() == 2);
    for (const auto& step : j["decode_device_ops"]) {
        INFO(step["backend"]);
        check_step(step);
        CHECK(step["context"].get<int>() > 1);
        CHECK(step["wall_ms"].get<double>() > 0);
    }
    // One step of the batch of 2 per backend, op by op, the same way: on the
    // device one step, its products launched as gpu-ref's matmuls; on the
    // host the median of 5, the fused ones as matmul_parts calls.
    REQUIRE(j["decode_batch_device_ops"].size() == 2);
    for (const auto& step : j["decode_batch_device_ops"]) {
        const bool host = step["clock"] == "host";
        INFO(step["backend"]);
        std::map<std::string, int> step_calls = check_step(step);
        CHECK(step["batch"] == 2);
        // Attention: one host call a layer for both sequences; gpu-ref
        // launches one kernel a sequence.
        if (host)
            CHECK(step_calls["attention_batch"] == c.n_layers);
        else
            CHECK(step_calls["attention"] == 2 * c.n_layers);
        CHECK(step["ops_ms"].get<double>() > 0);
        CHECK(step["ops_ms"].get<double>() <= step["wall_ms"].get<double>());
    }
    // cpu-ref's row names the methods forward.cpp called on it (fused
    // products as matmul_parts: 2 a layer), its ops within its wall time.
    const auto& host = j["device_ops"][1];
    CHECK(host["tokens"] == 6);
    std::map<std::string, int> calls;
    for (const auto& op : host["ops"]) calls[op["op"]] = op["launches"];
    CHECK(calls.at("matmul_parts") == 2 * c.n_layers);
    CHECK(calls.at("matmul") == 2 * c.n_layers + 1);
    CHECK(calls.at("attention_batch") == c.n_layers);
    CHECK(host["ops_ms"].get<double>() <= host["wall_ms"].get<double>());
}

TEST_CASE("gpu backends rotate a batched step's rows and pick its greedy tokens in one launch each",
          "[gpu][timing]") {
    // A batched decode step's rows sit at their own sequences' positions and
    // each needs its own greedy token. Launched per run of positions and per
    // row (Backend's defaults), a 64-sequence step would be ~128 RoPE launches
    // and 64 copies back, each copy waiting for the device. (Their values:
    // tests/gpu/test_kernels.cpp, rope_rows and argmax_rows, cpu-ref's bits.)
    const int head_dim = 8, n_heads = 2;
    const RopeTable table = make_rope_table(64, head_dim, 10000.0);
    const std::vector<int32_t> scattered = {5, 6, 7, 40, 0, 1, 2, 63, 63, 12, 11, 10, 3};
    std::vector<int32_t> chunk(13);
    for (int i = 0; i < 13; ++i) chunk[std::size_t(i)] = 20 + i;  // one sequence's chunk
    const int rows = 13, n = 1000;
    const auto x = random_floats(std::size_t(rows) * n_heads * head_dim, 61);
    const auto logits = random_floats(std::size_t(rows) * n, 62);
    for (GpuVariant variant : {GpuVariant::reference, GpuVariant::fast}) {
        for (auto& gpu : gpu_backend_forms(variant)) {
            INFO(gpu->name());
            DeviceArray cos(*gpu, table.cos.size()), sin(*gpu, table.sin.size());
            DeviceArray q(*gpu, x.size()), l(*gpu, logits.size());
            gpu->upload(cos.buf(), table.cos.data(), table.cos.size());
            gpu->upload(sin.buf(), table.sin.data(), table.sin.size());
            gpu->upload(q.buf(), x.data(), x.size());
            gpu->upload(l.buf(), logits.data(), logits.size());
            const auto rope = [&](const std::vector<int32_t>& positions) {
                return ops_while(*gpu, [&] {
                    gpu->rope_rows(q.buf(), rows, n_heads, head_dim, positions, cos.buf(),
                                   sin.buf());
                });
            };
            // Scattered positions: one launch, the positions copied once;
            // the next layer's call (the same positions) copies nothing.
            CHECK(rope(scattered) == std::map<std::string, int>{{"rope", 1}, {"upload", 1}});
            CHECK(rope(scattered) == std::map<std::string, int>{{"rope", 1}});
            // One sequence's chunk: rotated from its first position, no array at all.
            CHECK(rope(chunk) == std::map<std::string, int>{{"rope", 1}});
            std::vector<int32_t> tokens(std::size_t(rows), -1);
            CHECK(ops_while(*gpu, [&] { gpu->argmax_rows(l.buf(), rows, n, tokens); }) ==
                  std::map<std::string, int>{{"argmax", 1}});
            for (int r = 0; r < rows; ++r) {  // each row's own argmax
                const auto row = logits.begin() + std::ptrdiff_t(r) * n;
                CHECK(tokens[std::size_t(r)] == std::max_element(row, row + n) - row);
            }
        }
    }
}

TEST_CASE(
    "a batched decode step on gpu: one RoPE and KV append launch a layer, one argmax, at most 4 "
    "copies to the device",
    "[gpu][timing]") {
    // The engine's side of the case above: three sequences of different
    // lengths decoding together (each row at its own position).
    const ModelConfig c = small_config(48, 2, 4, 2, 16, 80, 67, 64);
    const Weights weights = make_random_weights(c, 63);
    EngineOptions eo;
    eo.backend = "gpu";
    eo.block_size = 4;
    Engine e(weights, eo);
    for (int len : {5, 9, 14}) {
        RequestOptions ro;
        ro.max_new_tokens = 6;
        e.add_request(random_tokens(len, c.vocab_size, 64 + len), ro);
    }
    // Until a step holds only the three decode tokens (all prompts done).
    for (int i = 0; i < 8 && (e.steps().empty() || e.steps().back().decode_tokens != 3 ||
                              e.steps().back().prefill_tokens != 0);
         ++i)
        e.step();
    REQUIRE(e.steps().back().decode_tokens == 3);
    Backend& gpu = e.backend();
    REQUIRE(gpu.times_device_ops());
    gpu.take_device_op_times();
    gpu.set_device_op_timing(true);
    const StepRecord& step = e.step();
    gpu.set_device_op_timing(false);
    REQUIRE(step.decode_tokens == 3);
    const std::map<std::string, int> n = count_by_op(gpu.take_device_op_times());
    CHECK(n.at("rope_kv_append") == c.n_layers);  // Q and K of all 3 rows, at their positions
    CHECK(n.count("rope") == 0);
    CHECK(n.at("argmax") == 1);
    // One attention launch per sequence and layer, but the block tables
    // cross the bus once at most: the step's copies are its 3 tokens
    // (embed), their 3 KV slots, their 3 positions and the 3 tables end to
    // end — each only if it changed since the step before (the tables when
    // a sequence took a new block; tokens would not if all three repeat).
    // Per sequence, the tables alone were 3 copies a layer.
    CHECK(n.at("attention") == 3 * c.n_layers);
    CHECK(n.at("upload") <= 4);
}

}  // namespace plab::test
