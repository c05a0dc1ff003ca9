// gpu's step graphs (issue 47, part 3; kernels/step_graph.h): a decode step's
// launches recorded, compared with the last step's byte for byte, and
// replayed as one CUDA graph when they match.
//
// What it shows: a graph changes how a step is launched, never a bit. The same
// prompt and decode steps run on gpu with graphs and on gpu with
// PLAB_GPU_GRAPHS=0 (every launch on its own), and every step's logits and
// the whole K/V cache must agree bit for bit, while the counts show that the
// steps were in fact replayed. A replay reuses the first step's arguments, so
// a value a kernel took by value (attention's pos0, RoPE's position) would
// give the first step's answer again: the comparison catches it. And host code
// inside a recorded step (a copy back, a rewritten array) sees every launch
// before it; and `plab bench --json` counts how its decode steps were launched
// (graph_steps). Emulated everywhere; natively where a device is present.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "gpu_test_util.h"
#include "runtime/forward.h"
#include "runtime/kv_cache.h"
#include "simt/simt.h"
#include "step_graph.h"
#include "test_util.h"

namespace plab::test {
namespace {

// gpu's forms with graphs off: PLAB_GPU_GRAPHS is read when a backend is made.
std::vector<std::unique_ptr<Backend>> gpu_forms_without_graphs() {
    setenv("PLAB_GPU_GRAPHS", "0", 1);
    auto forms = gpu_backend_forms(GpuVariant::fast);
    unsetenv("PLAB_GPU_GRAPHS");
    return forms;
}

struct DecodeRun {
    std::vector<std::vector<float>> logits;  // the prompt's last row, then one per decode step
    std::vector<float> kv;                   // every layer's K and V at the end
    StepGraphCounts counts;
};

// A prompt of `prompt` tokens in one chunk, then one token a step.
DecodeRun decode(Backend& be, const Weights& w, const std::vector<int32_t>& tokens, int prompt,
                 int block_size) {
    const ModelConfig& c = w.config;
    const DeviceModel m(be, w);
    KvCache cache(be, c, block_size, (c.max_seq_len + block_size - 1) / block_size);
    Workspace ws(be);
    Sequence seq;
    DecodeRun run;
    const std::span<const int32_t> all(tokens);
    run.logits.push_back(
        forward_chunk(m, cache, seq, all.first(std::size_t(prompt)), ws, {}, nullptr).logits);
    for (std::size_t t = std::size_t(prompt); t < tokens.size(); ++t)
        run.logits.push_back(
            forward_chunk(m, cache, seq, all.subspan(t, 1), ws, {}, nullptr).logits);
    for (int l = 0; l < c.n_layers; ++l) {
        for (KvPart part : {KvPart::K, KvPart::V}) {
            const std::vector<float> layer = cache.storage().read(seq, l, part);
            run.kv.insert(run.kv.end(), layer.begin(), layer.end());
        }
    }
    run.counts = be.step_graph_counts();
    return run;
}

// Every step's logits (none all zero) and the final K/V cache of a run with
// graphs, bit for bit those of the same run launching each kernel.
void require_same_run(const DecodeRun& g, const DecodeRun& plain, int steps) {
    REQUIRE(g.logits.size() == std::size_t(steps) + 1);
    for (std::size_t s = 0; s < g.logits.size(); ++s) {
        INFO("step " << s);
        require_not_all_zero(g.logits[s], "logits");
        require_bitwise_equal(g.logits[s], plain.logits[s], "logits, graph vs launches");
    }
    require_bitwise_equal(g.kv, plain.kv, "the K/V cache, graph vs launches");
}

// x = 2x + a: launches that run out of order, twice or not at all give
// other values.
__global__ void twice_plus_kernel(float* x, float a, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) x[i] = 2.0f * x[i] + a;
}

}  // namespace

TEST_CASE("gpu step graphs: a step that repeats the last builds no record, one that differs all",
          "[gpu][graph]") {
    // StepGraph alone, on the emulator, with a step of 6 launches of one small
    // kernel: launches are compared with the last step's as they come, so a
    // repeated step allocates no record (no closure, no argument bytes); the
    // first launch that differs builds the records before it from the kept
    // ones, and the step runs every launch in order. The host recomputes x.
    const int kN = 40;
    gpu_emulated::gpu_host::StepGraph graph;
    float* x = nullptr;
    PLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&x), kN * sizeof(float)));
    std::vector<float> want(kN);
    for (int i = 0; i < kN; ++i) want[std::size_t(i)] = 0.25f * float(i % 7) - 0.5f;
    PLAB_CUDA_CHECK(cudaMemcpy(x, want.data(), kN * sizeof(float), cudaMemcpyHostToDevice));
    auto step = [&](int launches, float third) {
        std::vector<float> before(kN);
        PLAB_CUDA_CHECK(cudaMemcpy(before.data(), x, kN * sizeof(float), cudaMemcpyDeviceToHost));
        graph.begin();
        for (int l = 0; l < launches; ++l) {
            const float a = l == 3 ? third : 0.125f * float(l);
            PLAB_LAUNCH(twice_plus_kernel, 1, 64, 0, x, a, kN);
            for (float& v : want) v = 2.0f * v + a;
        }
        std::vector<float> during(kN);
        PLAB_CUDA_CHECK(cudaMemcpy(during.data(), x, kN * sizeof(float), cudaMemcpyDeviceToHost));
        require_bitwise_equal(during, before, "nothing runs while a step records");
        graph.end();
        std::vector<float> got(kN);
        PLAB_CUDA_CHECK(cudaMemcpy(got.data(), x, kN * sizeof(float), cudaMemcpyDeviceToHost));
        require_bitwise_equal(got, want, "every launch of the step, in order");
        // Keep x small: scale it back (outside the step, at once).
        for (float& v : want) v *= 0x1p-6f;
        PLAB_CUDA_CHECK(cudaMemcpy(x, want.data(), kN * sizeof(float), cudaMemcpyHostToDevice));
    };
    struct Expect {
        int launches;
        float third;
        long long direct, captured, replayed;
        std::size_t built;
    };
    // clang-format off
    const Expect steps[] = {
        {6, 0.5f,  1, 0, 0, 6},  // nothing kept yet: every launch recorded
        {6, 0.5f,  1, 1, 0, 0},  // the same launches: captured, nothing built
        {6, 0.5f,  1, 1, 1, 0},  // and again: replayed, nothing built
        {6, 0.75f, 2, 1, 1, 6},  // launch 3 differs: 3 copies of kept records, 3 new
        {6, 0.75f, 2, 2, 1, 0},
        {5, 0.75f, 3, 2, 1, 5},  // one launch fewer: the 5 there were, run directly
        {6, 0.75f, 4, 2, 1, 6},  // one more than kept: built from the 6th on
    };
    // clang-format on
    for (const Expect& e : steps) {
        INFO(e.launches << " launches, the fourth adds " << e.third);
        step(e.launches, e.third);
        const StepGraphCounts c = graph.counts();
        CHECK(c.direct == e.direct);
        CHECK(c.captured == e.captured);
        CHECK(c.replayed == e.replayed);
        CHECK(graph.records_built() == e.built);
    }
    PLAB_CUDA_CHECK(cudaFree(x));
}

TEST_CASE("gpu step graphs: decode steps replay one graph with the bits of launching each kernel",
          "[gpu][decode][graph]") {
    // 20 prompt tokens, 30 decode steps: the block table grows from 2 to 4
    // blocks of 16, in device memory; no launch argument changes.
    const int kPrompt = 20, kSteps = 30, kBlock = 16;
    for (const int dh : {48, 64}) {
        const ModelConfig config = small_config(96, 2, 4, 2, dh, 160, 97, 64);
        const Weights weights = make_random_weights(config, 6300 + dh);
        const auto tokens = random_tokens(kPrompt + kSteps, config.vocab_size, 6301 + dh);
        auto with = gpu_backend_forms(GpuVariant::fast);
        auto without = gpu_forms_without_graphs();
        REQUIRE(with.size() == without.size());
        for (std::size_t f = 0; f < with.size(); ++f) {
            INFO(with[f]->name() << " Dh=" << dh);
            const DecodeRun g = decode(*with[f], weights, tokens, kPrompt, kBlock);
            const DecodeRun plain = decode(*without[f], weights, tokens, kPrompt, kBlock);
            require_same_run(g, plain, kSteps);
            // The first step ran launch by launch, the second matched it and
            // was captured, every later one replayed.
            CHECK(g.counts.direct == 1);
            CHECK(g.counts.captured == 1);
            CHECK(g.counts.replayed == kSteps - 2);
            CHECK(plain.counts.direct + plain.counts.captured + plain.counts.replayed == 0);
        }
    }
}

TEST_CASE("gpu step graphs: decode steps past 256 keys split attention, replay, keep the bits",
          "[gpu][decode][graph]") {
    // A 250-token prompt, then 12 decode steps over keys 251 to 262 in blocks
    // of 16. While the table's stride is 16 blocks (256 keys) attention is one
    // block a head; at the 17th block the stride becomes 32 and every step's
    // attention splits over two 256-key segments (kernels.h,
    // kFlashSegmentKeys): its partial results in device memory, a merge
    // launch. One more direct step and capture, the same bits as launching
    // each kernel — and as the whole 262-token prompt's last row, which a
    // prefill block merges its segments for (prefill == decode).
    const int kPrompt = 250, kSteps = 12, kBlock = 16;
    const ModelConfig config = small_config(96, 2, 4, 2, 48, 160, 97, 320);
    const Weights weights = make_random_weights(config, 6350);
    const auto tokens = random_tokens(kPrompt + kSteps, config.vocab_size, 6351);
    auto with = gpu_backend_forms(GpuVariant::fast);
    auto without = gpu_forms_without_graphs();
    REQUIRE(with.size() == without.size());
    for (std::size_t f = 0; f < with.size(); ++f) {
        INFO(with[f]->name());
        const DecodeRun g = decode(*with[f], weights, tokens, kPrompt, kBlock);
        const DecodeRun plain = decode(*without[f], weights, tokens, kPrompt, kBlock);
        const DecodeRun whole = decode(*without[f], weights, tokens, kPrompt + kSteps, kBlock);
        require_same_run(g, plain, kSteps);
        require_bitwise_equal(g.logits.back(), whole.logits.back(),
                              "the last decode step vs the whole prompt's last row");
        require_bitwise_equal(g.kv, whole.kv, "the K/V cache, decode vs the whole prompt");
        // Steps over 251-256 keys: direct, captured, 4 replayed; over 257-262
        // (split): direct, captured, 4 replayed.
        CHECK(g.counts.direct == 2);
        CHECK(g.counts.captured == 2);
        CHECK(g.counts.replayed == kSteps - 4);
    }
}

TEST_CASE("gpu step graphs: batched decode steps replay as a sequence gains blocks",
          "[gpu][decode][graph]") {
    // Three sequences decode side by side, each a step at a time: the step's
    // tables sit at a power-of-two stride, so one gaining a block moves no
    // other's table. Their prompts of 9, 10, 11 tokens and 20 steps in blocks
    // of 8 take the stride from 2 to 4 once: one more direct step and capture.
    const ModelConfig config = small_config(96, 2, 4, 2, 48, 160, 97, 64);
    const Weights weights = make_random_weights(config, 6400);
    const int kSeqs = 3, kPrompt = 9, kSteps = 20, kBlock = 8;
    std::vector<std::vector<int32_t>> tokens;
    for (int s = 0; s < kSeqs; ++s)
        tokens.push_back(random_tokens(kPrompt + s + kSteps, config.vocab_size, 6401 + s));
    auto run = [&](Backend& be) {
        const DeviceModel m(be, weights);
        KvCache cache(be, config, kBlock, 3 * config.max_seq_len / kBlock);
        Workspace ws(be);
        std::vector<Sequence> seqs(kSeqs);
        std::vector<std::vector<float>> logits;
        for (int s = 0; s < kSeqs; ++s) {
            const std::span<const int32_t> t(tokens[std::size_t(s)]);
            forward_chunk(m, cache, seqs[std::size_t(s)], t.first(std::size_t(kPrompt + s)), ws, {},
                          nullptr);
        }
        for (int step = 0; step < kSteps; ++step) {
            std::vector<StepItem> items;
            for (int s = 0; s < kSeqs; ++s) {
                const std::span<const int32_t> t(tokens[std::size_t(s)]);
                items.push_back(
                    {&seqs[std::size_t(s)], t.subspan(std::size_t(kPrompt + s + step), 1), Mask{}});
            }
            logits.push_back(forward_step(m, cache, items, ws, {}, nullptr).logits);
        }
        return std::pair(logits, be.step_graph_counts());
    };
    auto with = gpu_backend_forms(GpuVariant::fast);
    auto without = gpu_forms_without_graphs();
    for (std::size_t f = 0; f < with.size(); ++f) {
        INFO(with[f]->name());
        const auto [g, counts] = run(*with[f]);
        const auto [plain, no_counts] = run(*without[f]);
        for (int step = 0; step < kSteps; ++step) {
            INFO("step " << step);
            require_bitwise_equal(g[std::size_t(step)], plain[std::size_t(step)], "logits");
        }
        CHECK(counts.direct == 2);
        CHECK(counts.captured == 2);
        CHECK(counts.replayed == kSteps - 4);
        CHECK(no_counts.replayed == 0);
    }
}

TEST_CASE("plab bench counts how its decode steps were launched: graphs on gpu, none on gpu-ref",
          "[gpu][graph][cli]") {
    static const CliRandomModel model("plab_step_graph_model", 7);
    const int kSteps = 5;
    const auto b =
        run_cli({"bench", "--model", model.dir, "--backends", "gpu,gpu-ref", "--lengths", "6",
                 "--repeats", "1", "--decode-steps", std::to_string(kSteps), "--json"});
    REQUIRE(b.exit_code == 0);
    const auto j = nlohmann::json::parse(b.out);
    REQUIRE(j["decode"].size() == 2);
    for (const auto& d : j["decode"]) {
        const std::string backend = d["backend"];
        INFO(backend);
        const auto& g = d["graph_steps"];
        const long long direct = g["direct"], captured = g["captured"], replayed = g["replayed"];
        if (backend.rfind("gpu-ref", 0) == 0) {
            // The readable reference launches every kernel on its own.
            CHECK(direct + captured + replayed == 0);
        } else {
            // The first step has nothing to match, the second is captured.
            CHECK(direct == 1);
            CHECK(captured == 1);
            CHECK(replayed == kSteps - 2);
        }
    }
    // The text line under the decode rows: lesson 14 checks it.
}

TEST_CASE("gpu step graphs: PLAB_GPU_GRAPHS other than 0 or 1 is refused with one line",
          "[gpu][graph]") {
    for (const char* bad : {"off", "", "2", "yes"}) {
        INFO("PLAB_GPU_GRAPHS=" << bad);
        setenv("PLAB_GPU_GRAPHS", bad, 1);
        require_error([] { gpu_backend_forms(GpuVariant::fast); },
                      "use 0 (launch every kernel on its own) or 1");
    }
    setenv("PLAB_GPU_GRAPHS", "1", 1);
    auto on = gpu_backend_forms(GpuVariant::fast);
    unsetenv("PLAB_GPU_GRAPHS");
    REQUIRE_FALSE(on.empty());
}

TEST_CASE("gpu step graphs: host code inside a recorded step sees every launch before it",
          "[gpu][graph]") {
    const int dim = 5, vocab = 7;
    const auto table_host = random_floats(std::size_t(vocab) * dim, 6500);
    for (auto& gpu : gpu_backend_forms(GpuVariant::fast)) {
        INFO(gpu->name());
        const DeviceArray table = upload(*gpu, table_host);
        DeviceArray a(*gpu, dim), b(*gpu, dim), c(*gpu, dim);
        const StepGraphCounts before = gpu->step_graph_counts();

        // The token array is rewritten while a recorded launch reads it, and a
        // copy back reads results mid-step: both see the launches before them.
        gpu->begin_step_graph();
        const int32_t three = 3, five = 5;
        gpu->embed(a.buf(), std::span<const int32_t>(&three, 1), table.buf(), dim);
        gpu->embed(b.buf(), std::span<const int32_t>(&five, 1), table.buf(), dim);
        const std::vector<float> a_mid = download(*gpu, a);
        gpu->end_step_graph();
        const std::vector<float> row3(table_host.begin() + 3 * dim, table_host.begin() + 4 * dim);
        const std::vector<float> row5(table_host.begin() + 5 * dim, table_host.begin() + 6 * dim);
        require_bitwise_equal(a_mid, row3, "row 3, read inside the step");
        require_bitwise_equal(download(*gpu, b), row5, "row 5");
        // It ran in parts, so it is not kept for a replay.
        CHECK(gpu->step_graph_counts().direct == before.direct + 1);

        // A cancelled step runs nothing.
        gpu->fill(c.buf(), 1.0f);
        gpu->begin_step_graph();
        gpu->fill(c.buf(), 7.0f);
        gpu->cancel_step_graph();
        require_bitwise_equal(download(*gpu, c), std::vector<float>(dim, 1.0f), "cancelled fill");
    }
}

}  // namespace plab::test
