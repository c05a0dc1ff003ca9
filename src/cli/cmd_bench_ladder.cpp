// `plab bench --attention-ladder`: the attention ladder's rungs side by side
// on one seeded attention call of the model's shape (kernels/attention_ladder.h,
// runtime/attention_ladder.h), as text or JSON from one report.
//
// What it prints, per rung: the bytes of K and V it read from global memory
// and the operations it executed, both counted by the emulated run; its
// largest difference from cpu-ref and the tolerance it is held to; whether
// chunks of the call give the whole call's bits; and the time — the
// emulator's (a CPU running threads one after another: it says nothing about
// a GPU) and, on a CUDA device, the GPU's with the speed-up over the rung
// before. Lesson: kernels/README.md, "The attention ladder".
#include "cli/cmd_bench_ladder.h"

#include <cstdio>

#include "cli/common.h"
#include "model/model_io.h"
#include "model/shapes.h"
#include "runtime/attention_ladder.h"

namespace plab::cli {
namespace {

nlohmann::json ladder_json(const LadderReport& r) {
    nlohmann::json j;
    j["queries"] = r.n_queries;
    j["heads"] = r.n_heads;
    j["kv_heads"] = r.n_kv_heads;
    j["head_dim"] = r.head_dim;
    j["chunks"] = r.chunks;
    j["gpu"] = r.gpu_form;
    j["counted_by"] = "the SIMT emulator (the kernels' own counts of an emulated run)";
    j["rungs"] = nlohmann::json::array();
    for (std::size_t i = 0; i < r.rows.size(); ++i) {
        const LadderRow& x = r.rows[i];
        nlohmann::json row = {
            {"rung", x.rung},
            {"kv_bytes", x.kv_bytes},
            {"flops", x.flops},
            {"max_abs_diff_vs_cpu_ref", x.max_abs_diff},
            {"bitwise_cpu_ref", x.bitwise_cpu_ref},
            {"tolerance", x.tolerance.bitwise ? nlohmann::json("bitwise")
                                              : nlohmann::json({{"atol", x.tolerance.atol},
                                                                {"rtol", x.tolerance.rtol}})},
            {"within_tolerance", x.within_tolerance},
            {"chunk_invariant", x.chunk_invariant},
            {"emulated_seconds", x.emulated_seconds}};
        if (x.native_seconds) {
            row["native_seconds"] = *x.native_seconds;
            if (i > 0 && r.rows[i - 1].native_seconds)
                row["speedup_vs_previous"] = *r.rows[i - 1].native_seconds / *x.native_seconds;
        } else {
            row["native_seconds"] = nullptr;
        }
        j["rungs"].push_back(row);
    }
    return j;
}

void print_ladder_text(const LadderReport& r) {
    std::printf(
        "Attention ladder: one causal prefill of %d queries, %d heads over %d K/V heads, Dh %d\n"
        "(kernels/attention_ladder.h; counts made by the emulated run, the kernels' own)\n\n",
        r.n_queries, r.n_heads, r.n_kv_heads, r.head_dim);
    std::printf("  %-7s %14s %10s %14s %10s %14s %8s %12s %10s\n", "rung", "K/V bytes", "vs naive",
                "operations", "max |diff|", "tolerance", "chunked", "emulator s", "GPU ms");
    const double naive_bytes = r.rows.empty() ? 1.0 : double(r.rows[0].kv_bytes);
    for (std::size_t i = 0; i < r.rows.size(); ++i) {
        const LadderRow& x = r.rows[i];
        char tol[32], gpu[32];
        if (x.tolerance.bitwise)
            std::snprintf(tol, sizeof tol, "bitwise");
        else
            std::snprintf(tol, sizeof tol, "%.0e+%.0e|x|", x.tolerance.atol, x.tolerance.rtol);
        if (x.native_seconds)
            std::snprintf(gpu, sizeof gpu, "%.3f", *x.native_seconds * 1e3);
        else
            std::snprintf(gpu, sizeof gpu, "—");
        std::printf("  %-7s %14lld %9.3fx %14lld %10.2g %14s %8s %12.3f %10s%s\n", x.rung.c_str(),
                    x.kv_bytes, x.kv_bytes / naive_bytes, x.flops, x.max_abs_diff, tol,
                    x.chunk_invariant ? "same" : "DIFFER", x.emulated_seconds, gpu,
                    x.within_tolerance ? "" : "  OUT OF TOLERANCE");
    }
    std::string plan;
    for (int n : r.chunks) plan += (plan.empty() ? "" : ",") + std::to_string(n);
    std::printf(
        "\nchunked: the call cut into chunks %s, outputs concatenated, against the whole call, bit "
        "for bit.\nThe emulator's seconds say nothing about a GPU (it runs the threads one after "
        "another on a CPU).\nGPU: %s%s\n",
        plan.c_str(), r.gpu_form.c_str(),
        r.rows.empty() || !r.rows[0].native_seconds ? " — no GPU times" : "");
}

}  // namespace

void run_attention_ladder_bench(const LadderCliOptions& o) {
    const ModelConfig c =
        o.model.empty() ? named_shape(o.shape) : load_model_or_default(o.model).weights.config;
    PLAB_CHECK(o.length >= 1 && o.length <= 4096,
               "--lengths " << o.length
                            << " for --attention-ladder: one length from 1 to 4096 (the emulator "
                               "runs every thread on the CPU)");
    const LadderReport r =
        run_attention_ladder(o.length, c.n_heads, c.n_kv_heads, c.head_dim, o.seed);
    if (o.json)
        print_json(ladder_json(r));
    else
        print_ladder_text(r);
}

}  // namespace plab::cli
