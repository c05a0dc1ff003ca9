// Batched decode (issue 10): the cost of a step of b decode tokens
// (perf/flops decode_step_cost), the batch from which it is compute-bound, and
// `plab bench --batch`, whose every derived figure is recomputed here from the
// model's shape and the machine figures the same JSON prints. No assertion on
// a measured time beyond "positive": the machine is shared and noisy, so
// nothing here asserts that batching is faster.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "perf/bench.h"
#include "runtime/cost_model.h"
#include "test_util.h"

using namespace plab;
using test::run_cli;

namespace {

// One decode token's FLOPs at context ctx, written out from the architecture:
// every matrix (Q, K, V, O, gate, up, down per layer, and the classifier) once,
// 2 FLOPs per weight, and attention over ctx cached keys and itself.
double token_flops_by_hand(double d, double l, double h, double hkv, double dh, double f, double v,
                           double ctx) {
    return 2 * l * (d * h * dh + 2 * d * hkv * dh + h * dh * d + 3 * d * f) + 2 * d * v +
           4 * dh * h * l * (ctx + 1);
}

}  // namespace

TEST_CASE("a decode step of b tokens does b tokens' FLOPs and reads the weights once",
          "[flops][batch]") {
    ModelConfig c = test::small_config(40, 3, 5, 1, 8, 72, 301, 64);
    const double kv_per_position = 2.0 * c.n_layers * c.n_kv_heads * c.head_dim * 4;
    for (bool tied : {true, false}) {
        c.tied_embeddings = tied;
        for (double ctx : {0.0, 5.0, 17.5, 63.0}) {
            INFO("tied " << tied << ", context " << ctx);
            const DecodeStepCost one = decode_step_cost(c, 1, ctx);
            // Batch 1 is the single-sequence decode the bench's decode row counts.
            // Sums of whole numbers below 2^53: exact in double.
            if (ctx == std::floor(ctx)) {
                REQUIRE(one.bytes() == decode_bytes(c, static_cast<int>(ctx)));
                REQUIRE(one.flops() == prefill_cost(c, 1, static_cast<int>(ctx)).total());
            }
            REQUIRE(one.flops() == token_flops_by_hand(c.dim, c.n_layers, c.n_heads, c.n_kv_heads,
                                                       c.head_dim, c.hidden_dim, c.vocab_size,
                                                       ctx));
            // Each sequence adds its own K/V, and its own row of an untied
            // embedding table (a tied one is read whole by the classifier anyway).
            const double own = ctx * kv_per_position + (tied ? 0.0 : c.dim * 4.0);
            for (int b : {2, 7, 64}) {
                const DecodeStepCost k = decode_step_cost(c, b, ctx);
                REQUIRE(k.flops() == b * one.flops());
                REQUIRE(k.bytes() == one.bytes() + (b - 1) * own);
                REQUIRE(k.weight_bytes == one.weight_bytes);
                // Intensity grows with the batch: the point of batching decode.
                REQUIRE(k.flops_per_byte() > one.flops_per_byte());
            }
        }
    }
}

TEST_CASE("the batch from which decode is compute-bound, worked by hand", "[flops][batch]") {
    // Lesson 2's tiny shape (D=64 L=2 H=4 Hkv=2 Dh=16 F=176 V=258, untied) at
    // context 0: one token does 2·(2·46080 + 64·258) + 4·16·4·2·1 = 217856
    // FLOPs; the shared weights are (125504 − 258·64)·4 = 435968 bytes; each
    // token adds its embedding row, 64·4 = 256 bytes. On a machine with ridge
    // point 4 FLOP/byte: b > 435968 / (217856/4 − 256) = 435968 / 54208 ≈ 8.04
    // (about 2·ridge: 2 FLOPs per 4-byte weight per token).
    ModelConfig c = test::small_config(64, 2, 4, 2, 16, 176, 258, 256);
    c.tied_embeddings = false;
    const DecodeStepCost k = decode_step_cost(c, 1, 0);
    REQUIRE(k.per_token_flops == 217856);
    REQUIRE(k.weight_bytes == 435968);
    REQUIRE(k.per_token_bytes == 256);
    const double b = decode_compute_bound_batch(c, 0, 4.0);
    REQUIRE(b == Approx(435968.0 / 54208.0).epsilon(1e-15));
    // The roofline on either side of it (peak 40 GFLOP/s, 10 GB/s: ridge 4):
    // batch 8 is still bound by bytes, batch 9 by FLOPs.
    const DecodeStepCost k8 = decode_step_cost(c, 8, 0), k9 = decode_step_cost(c, 9, 0);
    REQUIRE(roofline_step_s(k8, 40, 10) == k8.bytes() / 10e9);
    REQUIRE(k8.flops() / 40e9 < k8.bytes() / 10e9);
    REQUIRE(roofline_step_s(k9, 40, 10) == k9.flops() / 40e9);
    REQUIRE(k9.flops() / 40e9 > k9.bytes() / 10e9);
    // A machine so rich in FLOPs that a token's own bytes (its K/V at a long
    // context) keep pace with its FLOPs: no batch is compute-bound there.
    // At ctx 255: F = 217344 + 512·256 = 348416, K = 256 + 255·512 = 130816;
    // F / 1000 < K.
    REQUIRE(std::isinf(decode_compute_bound_batch(c, 255, 1000.0)));
    REQUIRE(std::isfinite(decode_compute_bound_batch(c, 255, 2.0)));
}

TEST_CASE("plab bench --batch 1,4 --json: one decode_batch row per size, every figure consistent",
          "[cli][batch]") {
    static const test::CliRandomModel model("plab_bench_batch_model", 5);
    const auto info = nlohmann::json::parse(run_cli({"info", "--model", model.dir, "--json"}).out);
    const auto& cfg = info["config"];
    const double D = cfg["hidden_size"], L = cfg["num_hidden_layers"],
                 H = cfg["num_attention_heads"], Hkv = cfg["num_key_value_heads"],
                 Dh = cfg["head_dim"], F = cfg["intermediate_size"], V = cfg["vocab_size"];
    const bool tied = cfg["tie_word_embeddings"];
    const double params = info["parameters"];

    const int steps = 4;
    const auto r = run_cli({"bench", "--model", model.dir, "--backends", "cpu", "--lengths", "8",
                            "--repeats", "1", "--decode-steps", std::to_string(steps), "--batch",
                            "1,4", "--peak-size", "256", "--json"});
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    const double peak = j["gemm_peak_gflops"], read_bw = j["read_gb_per_s"];
    REQUIRE(peak > 0);
    REQUIRE(read_bw > 0);
    const auto& rows = j["decode_batch"];
    REQUIRE(rows.size() == 2);
    // The shared weights W and one token's own bytes K at context ctx, by hand.
    const double W = 4 * (params - (tied ? 0 : V * D));
    const auto own_bytes = [&](double ctx) {
        return ctx * 2 * L * Hkv * Dh * 4 + (tied ? 0 : D * 4);
    };
    for (std::size_t i = 0; i < 2; ++i) {
        const auto& row = rows[i];
        const int b = i == 0 ? 1 : 4;
        INFO("batch " << b);
        REQUIRE(row["batch"] == b);
        REQUIRE(row["backend"] == "cpu");
        REQUIRE(row["steps"] == steps);  // the plan's new tokens covered every timed step
        const double tps = row["tokens_per_s"], per_req = row["tokens_per_s_per_request"];
        const double step_ms = row["step_ms_median"];
        REQUIRE(tps > 0);
        REQUIRE(per_req > 0);
        REQUIRE(step_ms > 0);
        // b / median and 1 / median from the same double: equal to rounding
        // (a few ulps; 1e-12 relative is far above it and far below any slip
        // such as b-1 or a mean in place of the median of one of them).
        REQUIRE(tps == Approx(b * per_req).epsilon(1e-12));
        REQUIRE(per_req * step_ms / 1000 == Approx(1.0).epsilon(1e-12));
        // Every request stays in every timed step (no EOS): its context lies
        // between its prompt and its prompt + all its new tokens.
        const double ctx = row["context"];
        const int prompt = row["prompt_tokens"], new_tokens = row["new_tokens"];
        REQUIRE(prompt == 32);
        REQUIRE(ctx >= prompt);
        REQUIRE(ctx < prompt + new_tokens);
        // The pool holds exactly b sequences of prompt + new - 1 positions.
        REQUIRE(row["kv_blocks"] == b * ((prompt + new_tokens - 1 + 15) / 16));
        // FLOPs and bytes of the step at that context, from the shape.
        const double flops = b * token_flops_by_hand(D, L, H, Hkv, Dh, F, V, ctx);
        const double bytes = W + b * own_bytes(ctx);
        REQUIRE(row["flops_per_step"].get<double>() == Approx(flops).epsilon(1e-12));
        REQUIRE(row["bytes_per_step"].get<double>() == Approx(bytes).epsilon(1e-12));
        // The roofline bound from the printed peak and read bandwidth.
        const double bound = b / std::max(flops / (peak * 1e9), bytes / (read_bw * 1e9));
        REQUIRE(row["bound_tokens_per_s"].get<double>() == Approx(bound).epsilon(1e-9));
        REQUIRE(row["fraction_of_bound"].get<double>() == Approx(tps / bound).epsilon(1e-9));
    }
    // Time by op of one step of the largest batch (4), after its timed steps:
    // the median of 5 steps on the host clock, each op called as often as the
    // forward pass of one step calls it — per layer the fused Q/K/V and
    // gate/up products, W_o and W_down, one attention over the 4 sequences,
    // one K/V append; then the classifier and one argmax over the 4 rows.
    const auto& step_ops = j["decode_batch_device_ops"];
    REQUIRE(step_ops.size() == 1);
    const auto& t = step_ops[0];
    REQUIRE(t["backend"] == "cpu");
    REQUIRE(t["clock"] == "host");
    REQUIRE(t["batch"] == 4);
    REQUIRE(t["steps"] == 5);
    const int t_ctx = t["context"];
    REQUIRE(t_ctx >= rows[1]["context"].get<double>());  // after the timed steps
    REQUIRE(t_ctx < rows[1]["prompt_tokens"].get<int>() + rows[1]["new_tokens"].get<int>());
    const auto calls = [&](const std::string& op) {
        for (const auto& row : t["ops"])
            if (row["op"] == op) return row["launches"].get<int>();
        return 0;
    };
    const int layers = static_cast<int>(L);
    REQUIRE(calls("matmul_parts") == 2 * layers);
    REQUIRE(calls("matmul") == 2 * layers + 1);
    REQUIRE(calls("attention_batch") == layers);
    REQUIRE(calls("kv_append") == layers);
    REQUIRE(calls("argmax_rows") == 1);
    double ops_ms = 0;
    for (const auto& row : t["ops"]) ops_ms += row["ms"].get<double>();
    REQUIRE(t["ops_ms"].get<double>() == Approx(ops_ms).epsilon(1e-12));
    // Timed inside the step the engine timed: the ops cannot outlast it.
    REQUIRE(t["ops_ms"].get<double>() > 0);
    REQUIRE(t["ops_ms"].get<double>() <= t["wall_ms"].get<double>());
    // The crossover, recomputed from the JSON's peak and read bandwidth at the
    // context of the largest batch: b·F / peak = (W + b·K) / bandwidth.
    const auto& x = j["decode_crossover"];
    const double ctx = x["context"];
    REQUIRE(ctx == rows[1]["context"].get<double>());
    const double Ft = token_flops_by_hand(D, L, H, Hkv, Dh, F, V, ctx), K = own_bytes(ctx);
    REQUIRE(x["flops_per_token"].get<double>() == Approx(Ft).epsilon(1e-12));
    REQUIRE(x["weight_bytes"].get<double>() == W);
    REQUIRE(x["bytes_per_token"].get<double>() == Approx(K).epsilon(1e-12));
    const double ridge = peak / read_bw;
    REQUIRE(x["ridge_flops_per_byte"].get<double>() == Approx(ridge).epsilon(1e-12));
    REQUIRE(j["ridge_flops_per_byte"].get<double>() == Approx(ridge).epsilon(1e-12));
    if (x["batch"].is_null()) {
        // Never compute-bound: each token's own bytes keep pace with its FLOPs.
        REQUIRE(Ft / ridge <= K);
    } else {
        const double b = x["batch"];
        REQUIRE(b == Approx(W / (Ft / ridge - K)).epsilon(1e-9));
        REQUIRE(b > 0);
        // At that batch the two sides of the roofline meet.
        REQUIRE(b * Ft / (peak * 1e9) == Approx((W + b * K) / (read_bw * 1e9)).epsilon(1e-9));
    }
}

TEST_CASE("plab bench --batch: a bad list or a batch that cannot fit is one line, exit 1",
          "[cli][batch]") {
    static const test::CliRandomModel model("plab_bench_batch_bad", 6);
    const auto bench = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = {"bench", "--model",   model.dir, "--backends",
                                         "cpu",   "--lengths", "8"};
        args.insert(args.end(), extra.begin(), extra.end());
        return run_cli(args);
    };
    test::require_one_line_cli_error(bench({"--batch", ""}), "--batch: empty list");
    test::require_one_line_cli_error(bench({"--batch", "1,,4"}), "empty entry in '1,,4'");
    test::require_one_line_cli_error(bench({"--batch", "1,4,"}), "empty entry in '1,4,'");
    test::require_one_line_cli_error(bench({"--batch", "1,x"}), "'x' is not a whole number");
    test::require_one_line_cli_error(bench({"--batch", "2.5"}), "'2.5' is not a whole number");
    test::require_one_line_cli_error(bench({"--batch", "4,0"}), "batch size 0 must be at least 1");
    test::require_one_line_cli_error(bench({"--batch", "-3"}), "batch size -3 must be at least 1");
    test::require_one_line_cli_error(bench({"--batch", std::to_string(kMaxBenchBatch + 1)}),
                                     "is larger than the bench runs");
    // A pool smaller than b sequences: 4 x 3 blocks of 16 for 32 prompt + 4
    // decode steps (new tokens 1 prefill + 3 warm-up + 4 timed + 5 timed op
    // by op + 1 spare = 14, 45 positions), so 12 blocks.
    test::require_one_line_cli_error(
        bench({"--batch", "4", "--decode-steps", "4", "--kv-blocks", "11"}),
        "--batch 4 needs 12 KV blocks");
    // Sequences longer than the model's max_seq_len (256).
    test::require_one_line_cli_error(bench({"--batch", "2", "--batch-prompt", "250"}),
                                     "but max_seq_len is 256");
    test::require_one_line_cli_error(bench({"--batch", "2", "--batch-prompt", "0"}),
                                     "--batch-prompt 0 must be at least 1");
}
