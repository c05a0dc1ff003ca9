// `plab serve`: replay a workload on the engine and report serving metrics
// (serving/serve.h says where each clock starts and stops). With
// --compare-policies the same workload runs under every scheduling policy in
// one run: the policy experiment of lessons 9 and 10.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <variant>

#include "cli/common.h"
#include "cli/generate_speculative.h"
#include "core/error.h"
#include "perf/machine.h"
#include "serving/machine_preset.h"
#include "serving/presets.h"
#include "serving/roofline.h"
#include "serving/serve.h"
#include "serving/validate_cost.h"
#include "serving/workload_formats.h"

namespace plab::cli {
namespace {

struct ServeCliOptions {
    std::string model;
    std::string backend = "cpu";
    std::string kernels = "invariant";  // core/kernel_choice.h
    std::string workload;
    std::string export_workload;  // --export-workload FILE
    double tokens_per_word = WorkloadFormatOptions{}.tokens_per_word;
    double rate = 4;
    CLI::Option* rate_option = nullptr;  // given on the command line?
    int requests = 16;
    std::uint64_t seed = 1;
    std::string prompt_len = "16,128";
    std::string new_tokens = "8,32";
    int long_prompt = 0;
    std::string policy = "chunked";
    bool compare = false;
    std::string clock = "virtual";
    int token_budget = 64;
    int max_running = 64;
    int block_size = 16;
    int kv_blocks = 0;
    std::string prefix_cache = "on";
    std::string step_cost;
    double ttft_slo_ms = 1000;
    double itl_slo_ms = 100;
    double network_delay_ms = 0;
    bool calibrate = false;
    bool disaggregate = false;
    double link_gb_per_s = 0;
    std::string trace;
    bool json = false;
    // The roofline clock (serving/roofline.h): a card, a model shape, a precision.
    std::string hardware;
    std::string shape = "model";
    std::string dtype;  // bf16 on a card, fp32 on this machine
    double gpu_memory_utilization = 0.9;
    bool list_hardware = false;
    bool list_shapes = false;
    bool validate_cost = false;
    bool simulate = false;  // --simulate (serving/simulate.h)
    int speculate = 0;      // --speculate K (runtime/speculative.h)
    std::string draft;      // --draft SOURCE
    CLI::Option* speculate_opt = nullptr;
    CLI::Option* draft_opt = nullptr;
    CLI::Option* shape_opt = nullptr;
    CLI::Option* dtype_opt = nullptr;
    CLI::Option* kv_blocks_opt = nullptr;
    CLI::Option* util_opt = nullptr;
};

// What a serve report says besides its metrics: which workload ran on which
// backend, and what its clock charged: the coefficients of serving/step_cost.h
// or a roofline (serving/roofline.h).
struct ServeSetup {
    std::string workload;      // Workload::source
    std::size_t requests = 0;  // in the workload
    std::string backend;       // as the engine names it
    std::string clock;         // --clock: virtual or real
    StepCost step_cost;        // the coefficients (the clock without a roofline)
    // --hardware's clock, else null; it charges its own shape for the loaded
    // model's tokens (tokens_from).
    std::shared_ptr<const RooflineCost> roofline;
    std::string tokens_from;
    int kv_blocks = 0;  // the engine's pool
    int block_size = 0;
    double gpu_memory_utilization = 0;
    // "real", or "simulated" (--simulate: no forward pass, every figure modelled).
    std::string compute = "real";
};

// --calibrate: this machine's step cost, to replay with as --step-cost.
struct ServeCalibration {
    std::string backend;
    StepCost cost;
};

// --validate-cost: the roofline clock's errors against this machine's real one.
struct ServeValidation {
    ServeSetup setup;
    std::string policy;  // --policy, as given
    CostValidation errors;
};

// --compare-policies: the same workload under every policy, one summary each.
struct ServeComparison {
    ServeSetup setup;
    std::vector<std::pair<std::string, ServeSummary>> policies;  // in kPolicies' order
    // Tokens a step: the chunked policy's budget; the others', a whole prompt.
    int token_budget = 0;
    int max_seq_len = 0;
    double ttft_slo_ms = 0, itl_slo_ms = 0;
};

// One policy's replay: serving/serve.h's report of every request and step.
struct ServeReplay {
    ServeSetup setup;
    ServeReport report;
    bool disaggregate = false;
};

// What `plab serve` computed, one of its four reports; text and --json are
// both printed from it. (The preset lists are tables printed as they are.)
using ServeResult = std::variant<ServeCalibration, ServeValidation, ServeComparison, ServeReplay>;

// The backend as the engine names it: "cpu-fastest" under --kernels fastest.
std::string backend_label(const ServeCliOptions& o) {
    return backend_name_with(o.backend, parse_kernels(o.kernels));
}

std::pair<int, int> parse_range(const std::string& text, const std::string& what) {
    const std::vector<int> v = parse_int_list(text, what);
    PLAB_CHECK(v.size() == 2, what << " '" << text << "' must be MIN,MAX");
    return {v[0], v[1]};
}

nlohmann::json percentiles_json(const Percentiles& p) {
    return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}};
}

nlohmann::json summary_json(const ServeSummary& s, const std::string& compute) {
    return {{"compute", compute},
            {"queue_ms", percentiles_json(s.queue_ms)},
            {"ttft_ms", percentiles_json(s.ttft_ms)},
            {"itl_ms", percentiles_json(s.itl_ms)},
            {"tpot_ms", percentiles_json(s.tpot_ms)},
            {"e2e_ms", percentiles_json(s.e2e_ms)},
            {"output_tokens_per_s", s.output_tokens_per_s},
            {"goodput", s.goodput},
            {"requests_meeting_slo", s.requests_meeting_slo},
            {"duration_s", s.duration_s},
            {"steps", s.steps},
            {"preemptions", s.preemptions},
            {"kv_transfer_blocks", s.kv_transfer_blocks},
            {"kv_transfer_bytes", s.kv_transfer_bytes},
            {"link_gb_per_s", s.link_gb_per_s},
            {"speculative", s.speculative.k > 0 ? speculative_stats_json(s.speculative)
                                                : nlohmann::json(nullptr)}};
}

nlohmann::json report_json(const ServeReport& r) {
    nlohmann::json reqs = nlohmann::json::array();
    const bool simulated = r.compute == "simulated";
    for (const ServedRequest& s : r.requests) {
        reqs.push_back(
            {{"id", s.id},
             {"compute", r.compute},
             {"arrival_s", s.arrival_s},
             {"prompt_tokens", s.prompt_tokens},
             {"cached_tokens", s.cached_tokens},
             // Simulated: placeholders, no ids worth listing.
             {"new_tokens", simulated ? nlohmann::json(nullptr) : nlohmann::json(s.new_tokens)},
             {"new_token_count", s.new_token_count},
             {"preemptions", s.preemptions},
             {"queue_ms", s.latency.queue_ms},
             {"ttft_ms", s.ttft_client_ms},
             {"itl_ms", s.itl_ms},
             {"tpot_ms", s.latency.tpot_ms},
             {"e2e_ms", s.e2e_client_ms},
             {"kv_transfer_ms", s.kv_transfer_ms},
             {"kv_transfer_bytes", s.kv_transfer_bytes}});
        if (s.speculation.k > 0) reqs.back()["speculative"] = speculative_stats_json(s.speculation);
    }
    return {{"compute", r.compute},
            {"policy", r.policy},
            {"clock", r.clock},
            {"requests", reqs},
            {"summary", summary_json(r.summary, r.compute)}};
}

void print_summary_row(const std::string& name, const ServeSummary& s) {
    std::printf("%-14s %9.2f %9.2f %9.2f %9.2f %9.2f %10.1f %8.2f %6d\n", name.c_str(),
                s.ttft_ms.p50, s.ttft_ms.p99, s.itl_ms.p50, s.itl_ms.p99, s.e2e_ms.p99,
                s.output_tokens_per_s, s.goodput, s.steps);
}

void list_hardware() {
    std::printf("%-12s %8s %8s %8s %8s %9s %7s  %s\n", "hardware", "fp32", "fp16", "bf16", "int8",
                "GB/s", "GB", "(dense TFLOP/s, TOP/s for int8)");
    for (const HardwarePreset& h : hardware_presets()) {
        std::printf("%-12s %8.1f %8.1f %8.1f %8.1f %9.0f %7.0f  %s\n", h.name.c_str(),
                    h.fp32_tflops, h.fp16_tflops, h.bf16_tflops, h.int8_tops, h.bandwidth_gb_per_s,
                    h.memory_gb, h.description.c_str());
    }
    std::printf(
        "%-12s measured when used: plab bench's fp32 GEMM peak and read bandwidth, and the "
        "efficiency, step cost and cold-step cost profiled on the engine (--validate-cost shows "
        "its error)\n",
        "this-machine");
    std::printf(
        "Assumed on every card: %.0f %% of the peak FLOP/s, %.0f %% of the bandwidth, %.0f us "
        "a step.\nSources:\n",
        HardwarePreset{}.compute_efficiency * 100, HardwarePreset{}.bandwidth_efficiency * 100,
        HardwarePreset{}.step_overhead_us);
    for (const HardwarePreset& h : hardware_presets())
        std::printf("  %-12s %s\n", h.name.c_str(), h.source.c_str());
}

void list_shapes() {
    std::printf("%-12s %6s %4s %4s %4s %4s %6s %7s %6s %9s %9s\n", "shape", "D", "L", "H", "Hkv",
                "Dh", "F", "V", "ctx", "params", "bf16 GB");
    for (const ShapePreset& s : shape_presets()) {
        const ModelConfig& c = s.config;
        std::printf("%-12s %6d %4d %4d %4d %4d %6d %7d %6d %8.2fB %9.2f\n", s.name.c_str(), c.dim,
                    c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim, c.vocab_size,
                    c.max_seq_len, double(c.n_params()) / 1e9, double(c.n_params()) * 2 / 1e9);
    }
    std::printf("%-12s the loaded model's own shape (--model)\nSources:\n", "model");
    for (const ShapePreset& s : shape_presets())
        std::printf("  %-12s %s\n", s.name.c_str(), s.source.c_str());
}

// This machine's memory (the KV pool's room with --hardware this-machine).
double physical_memory_gb() {
    return double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE)) / 1e9;
}

// This machine as a preset: the fp32 GEMM peak plab bench measures, the
// bandwidth the weights are read at (the memory level they live in: a sweep
// of a buffer their size; a small model's stay in cache, where DRAM's figure
// would charge a decode step several times too much), and the rest profiled
// on the engine (serving/machine_preset.h).
HardwarePreset this_machine(const Model& model, const EngineOptions& engine) {
    const MachineSpeed m = measure_machine(1024, 3, /*with_blas=*/false);
    const double bytes = weights_bytes(model.weights.config, Dtype::fp32);
    WeightSweep sweep(bytes);
    double best_s = 1e300;
    for (int r = 0; r < 20; ++r) best_s = std::min(best_s, sweep.seconds());
    return profile_this_machine(model, engine, m.gemm_gflops, bytes / best_s / 1e9,
                                physical_memory_gb());
}

// The roofline clock the options ask for (none without --hardware).
std::shared_ptr<const RooflineCost> roofline_of(const ServeCliOptions& o, const Model& model,
                                                const EngineOptions& engine) {
    if (o.hardware.empty()) {
        PLAB_CHECK(
            o.shape_opt->count() == 0 && o.dtype_opt->count() == 0 && o.util_opt->count() == 0,
            "--shape, --dtype and --gpu-memory-utilization charge the clock as a model "
            "on a card: give --hardware too (plab serve --list-hardware)");
        return nullptr;
    }
    PLAB_CHECK(o.step_cost.empty(),
               "give one clock model: --hardware (the roofline) or --step-cost (three "
               "coefficients), not both");
    auto cost = std::make_shared<RooflineCost>();
    const bool here = o.hardware == "this-machine";
    cost->hardware = here ? this_machine(model, engine) : hardware_preset(o.hardware);
    cost->shape_name = o.shape;
    cost->shape = o.shape == "model" ? model.weights.config : shape_preset(o.shape).config;
    cost->dtype = parse_dtype(o.dtype.empty() ? (here ? "fp32" : "bf16") : o.dtype);
    PLAB_CHECK(!here || cost->dtype == Dtype::fp32,
               "this machine's cpu backend computes in fp32: give --dtype fp32 (or a card, "
               "--hardware h100-sxm, for bf16)");
    cost->hardware.peak_tflops(cost->dtype);  // refuses a precision the card lacks
    return cost;
}

// 1. Compute: options -> workload, engine options and clock -> one report.

ServeCalibration calibrate_serve(const ServeCliOptions& o) {
    const Model model = load_model_or_default(o.model);
    EngineOptions eo;
    eo.backend = o.backend;
    eo.kernels = parse_kernels(o.kernels);
    eo.block_size = o.block_size;
    const StepCost cost = calibrate_step_cost(model, eo);
    return {backend_label(o), cost};
}

// A workload file: plab's JSON Lines (arrivals given), or a benchmark's
// lengths (ShareGPT, input_len/output_len lines) arriving at --rate.
Workload serve_workload_file(const ServeCliOptions& o) {
    const std::string text = read_text_file(o.workload, "workload file");
    const bool rate_given = o.rate_option->count() > 0;
    PLAB_CHECK(workload_format(text) != "plab" || !rate_given,
               o.workload << " gives each request's arrival_s; drop --rate (it sets the arrivals "
                             "of ShareGPT and input_len/output_len files, which have none)");
    WorkloadFormatOptions f;
    f.rate = o.rate;
    f.seed = o.seed;
    f.tokens_per_word = o.tokens_per_word;
    return read_workload(text, o.workload, f);
}

// --export-workload: the replayed workload as plab JSON Lines.
void export_workload(const Workload& w, const std::string& path) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    PLAB_CHECK(f.good(), "--export-workload: cannot write " << path);
    f << workload_jsonl(w);
    PLAB_CHECK(f.good(), "--export-workload: writing " << path << " failed");
}

// The workload first: a bad file is reported before a model is loaded.
Workload serve_workload(const ServeCliOptions& o) {
    const bool rate_given = o.rate_option->count() > 0;
    PLAB_CHECK(o.workload.empty() || o.long_prompt == 0,
               "give one workload: --workload FILE, --rate R (generated), or --long-prompt N");
    PLAB_CHECK(!rate_given || o.long_prompt == 0,
               "give one workload: --rate R (generated) or --long-prompt N, not both");
    if (!o.workload.empty()) return serve_workload_file(o);
    if (o.long_prompt > 0) return long_prompt_workload(o.long_prompt, 4, 32);
    WorkloadGenerator g;
    g.rate = o.rate;
    g.requests = o.requests;
    g.seed = o.seed;
    std::tie(g.prompt_min, g.prompt_max) = parse_range(o.prompt_len, "--prompt-len");
    std::tie(g.new_min, g.new_max) = parse_range(o.new_tokens, "--new-tokens");
    return generate_workload(g);
}

void check_serve_engine_flags(const ServeCliOptions& o) {
    PLAB_CHECK(o.clock == "virtual" || o.clock == "real",
               "--clock " << o.clock << " is not a clock; valid: virtual, real");
    PLAB_CHECK(o.prefix_cache == "on" || o.prefix_cache == "off",
               "--prefix-cache " << o.prefix_cache << " must be on or off");
    PLAB_CHECK(o.kv_blocks >= 0, "--kv-blocks " << o.kv_blocks << " must be at least 1");
}

// The engine and the clock it is charged on; with a roofline and no
// --kv-blocks, the pool the card's memory holds.
ServeOptions serve_clock_options(const ServeCliOptions& o, const Model& model,
                                 const Workload& workload) {
    ServeOptions so;
    so.engine.backend = o.backend;
    so.engine.kernels = parse_kernels(o.kernels);
    so.engine.block_size = o.block_size;
    so.engine.kv_blocks = o.kv_blocks;
    so.engine.prefix_cache = o.prefix_cache == "on";
    so.engine.max_running = o.max_running;
    so.virtual_clock = o.clock == "virtual";
    if (!o.step_cost.empty()) so.cost = StepCost::parse(o.step_cost);
    EngineOptions profiled = so.engine;  // this machine is profiled at the chunk size
    profiled.max_step_tokens = o.token_budget;
    so.roofline = roofline_of(o, model, profiled);
    if (so.roofline && o.kv_blocks_opt->count() == 0)
        so.engine.kv_blocks =
            kv_blocks_on_card(*so.roofline, o.gpu_memory_utilization, o.block_size, workload);
    return so;
}

// What a replay is measured against: the seed, the objectives, the network,
// and the disaggregated KV link.
void add_serve_objectives(const ServeCliOptions& o, ServeOptions& so) {
    so.seed = o.seed;
    so.ttft_slo_ms = o.ttft_slo_ms;
    so.itl_slo_ms = o.itl_slo_ms;
    so.network_delay_ms = o.network_delay_ms;
    so.disaggregate = o.disaggregate;
    // The KV link: the given bandwidth, else this machine's copy bandwidth
    // (serving measures nothing itself; perf/machine.h does).
    so.link_gb_per_s = o.disaggregate && o.link_gb_per_s <= 0
                           ? measure_machine(256, 1, /*with_blas=*/false).copy_gb_per_s
                           : o.link_gb_per_s;
}

// A policy's options: --token-budget is the chunked policy's (policy_step_tokens).
ServeOptions serve_options_for(const ServeOptions& so, Policy p, int token_budget,
                               int max_seq_len) {
    ServeOptions s = so;
    s.engine.policy = p;
    s.engine.max_step_tokens = policy_step_tokens(p, token_budget, max_seq_len);
    return s;
}

ServeSetup serve_setup(const ServeCliOptions& o, const Model& model, const Workload& workload,
                       const ServeOptions& so) {
    ServeSetup s;
    s.workload = workload.source;
    s.requests = workload.requests.size();
    s.backend = backend_label(o);
    s.clock = o.clock;
    s.step_cost = so.cost;
    s.roofline = so.roofline;
    s.tokens_from = model.source;
    s.kv_blocks = so.engine.kv_blocks;
    s.block_size = o.block_size;
    if (so.simulate) {
        s.compute = "simulated";
        s.tokens_from = "none: placeholders, no forward pass (--simulate)";
    }
    s.gpu_memory_utilization = o.gpu_memory_utilization;
    return s;
}

// --validate-cost: the roofline clock against this machine's real one, as
// Vidur validates its simulator (serving/validate_cost.h).
ServeValidation validate_serve_cost(const ServeCliOptions& o, const Model& model,
                                    const Workload& workload, ServeOptions so) {
    PLAB_CHECK(o.hardware.empty() || o.hardware == "this-machine",
               "--validate-cost compares the clock with this machine's real one: it uses "
               "--hardware this-machine (leave --hardware out)");
    PLAB_CHECK(o.shape == "model",
               "--validate-cost charges the loaded model's own shape: drop "
               "--shape");
    PLAB_CHECK(!o.disaggregate && !o.compare,
               "--validate-cost replays one colocated policy: drop --disaggregate and "
               "--compare-policies");
    if (!so.roofline) {
        ServeCliOptions here = o;
        here.hardware = "this-machine";
        EngineOptions profiled = so.engine;
        profiled.max_step_tokens = o.token_budget;
        so.roofline = roofline_of(here, model, profiled);
    }
    so = serve_options_for(so, parse_policy(o.policy), o.token_budget,
                           model.weights.config.max_seq_len);
    ServeValidation v;
    v.errors = validate_cost(model, workload, so);
    v.setup = serve_setup(o, model, workload, so);
    v.policy = o.policy;
    return v;
}

ServeComparison compare_serve_policies(const ServeCliOptions& o, const Model& model,
                                       const Workload& workload, const ServeOptions& so) {
    PLAB_CHECK(o.trace.empty(),
               "--trace records one policy's run; drop --compare-policies "
               "or --trace");
    ServeComparison c;
    c.token_budget = o.token_budget;
    c.max_seq_len = model.weights.config.max_seq_len;
    for (const PolicyRow& p : kPolicies) {
        const ServeOptions po = serve_options_for(so, p.policy, c.token_budget, c.max_seq_len);
        c.policies.emplace_back(p.name, serve(model, workload, po).summary);
    }
    c.setup = serve_setup(o, model, workload, so);
    c.ttft_slo_ms = o.ttft_slo_ms;
    c.itl_slo_ms = o.itl_slo_ms;
    return c;
}

ServeReplay replay_serve(const ServeCliOptions& o, const Model& model, const Workload& workload,
                         const ServeOptions& so) {
    const Policy policy = parse_policy(o.policy);
    ServeReplay r;
    r.report =
        serve(model, workload,
              serve_options_for(so, policy, o.token_budget, model.weights.config.max_seq_len));
    if (!o.trace.empty()) serve_trace(r.report).write_chrome_json(o.trace);
    r.setup = serve_setup(o, model, workload, so);
    r.disaggregate = o.disaggregate;
    return r;
}

ServeResult compute_serve(const ServeCliOptions& o) {
    if (o.calibrate) return calibrate_serve(o);
    const Workload workload = serve_workload(o);
    if (!o.export_workload.empty()) export_workload(workload, o.export_workload);
    check_serve_engine_flags(o);
    const Model model = load_model_or_default(o.model);
    ServeOptions so = serve_clock_options(o, model, workload);
    so.simulate = o.simulate;
    PLAB_CHECK(!o.simulate || so.roofline,
               "--simulate charges each step on the roofline clock: give --hardware CARD and "
               "--shape SHAPE (plab serve --list-hardware, --list-shapes)");
    PLAB_CHECK(!o.simulate || !o.validate_cost,
               "--validate-cost compares the roofline clock with a real run; drop --simulate");
    // --speculate: every request verifies its guesses in spans of the steps.
    LoadedDraft draft;
    so.engine.speculative =
        speculative_options(o.speculate_opt->count() > 0, o.speculate, o.draft_opt->count() > 0,
                            o.draft, o.backend, so.engine.kernels, draft);
    if (o.validate_cost) return validate_serve_cost(o, model, workload, so);
    add_serve_objectives(o, so);
    if (o.compare) return compare_serve_policies(o, model, workload, so);
    return replay_serve(o, model, workload, so);
}

// 2. JSON: one object per report.

nlohmann::json cost_model_json(const ServeSetup& s) {
    const RooflineCost* cost = s.roofline.get();
    if (cost == nullptr) {
        return {{"kind", "coefficients"},
                {"hardware", nullptr},
                {"shape", nullptr},
                {"dtype", nullptr},
                {"peak_tflops", nullptr},
                {"bandwidth_gb_per_s", nullptr},
                {"step_cost", s.step_cost.to_string()}};
    }
    return {{"kind", "roofline"},
            {"hardware", cost->hardware.name},
            {"shape", cost->shape_name},
            {"dtype", dtype_name(cost->dtype)},
            {"peak_tflops", cost->hardware.peak_tflops(cost->dtype)},
            {"bandwidth_gb_per_s", cost->hardware.bandwidth_gb_per_s},
            {"compute_efficiency", cost->hardware.compute_efficiency},
            {"bandwidth_efficiency", cost->hardware.bandwidth_efficiency},
            {"step_overhead_us", cost->hardware.step_overhead_us},
            {"cold_step_us", cost->hardware.cold_step_us}};
}

nlohmann::json serve_json(const ServeCalibration& c) {
    return {{"step_us", c.cost.step_us},
            {"per_sequence_us", c.cost.per_sequence_us},
            {"gflops", c.cost.gflops},
            {"step_cost", c.cost.to_string()}};
}

nlohmann::json serve_json(const ServeValidation& v) {
    const CostValidation& e = v.errors;
    return {{"median_step_rel_error", e.median_step_rel_error},
            {"p90_step_rel_error", e.p90_step_rel_error},
            {"median_ttft_rel_error", e.median_ttft_rel_error},
            {"p90_ttft_rel_error", e.p90_ttft_rel_error},
            {"median_itl_rel_error", e.median_itl_rel_error},
            {"p90_itl_rel_error", e.p90_itl_rel_error},
            {"steps", e.steps},
            {"median_step_rel_noise", e.median_step_rel_noise},
            {"p90_step_rel_noise", e.p90_step_rel_noise},
            {"noise_steps", e.noise_steps},
            {"requests", e.requests},
            {"cost_model", cost_model_json(v.setup)}};
}

nlohmann::json serve_json(const ServeComparison& c) {
    nlohmann::json all;
    for (const auto& [name, summary] : c.policies)
        all[name] = summary_json(summary, c.setup.compute);
    return {{"compute", c.setup.compute},
            {"policies", all},
            {"clock", c.setup.clock},
            {"workload", c.setup.workload},
            {"cost_model", cost_model_json(c.setup)}};
}

nlohmann::json serve_json(const ServeReplay& replay) {
    const ServeReport& r = replay.report;
    nlohmann::json j = report_json(r);
    j["cost_model"] = cost_model_json(replay.setup);
    j["steps"] = nlohmann::json::array();
    for (std::size_t i = 0; i < r.steps.size(); ++i) {
        const StepRecord& st = r.steps[i];
        j["steps"].push_back({{"index", st.index},
                              {"start_ms", st.start_us / 1000},
                              {"ms", st.us / 1000},
                              {"predicted_ms", st.predicted_us / 1000},
                              {"prefill_tokens", st.prefill_tokens},
                              {"decode_tokens", st.decode_tokens},
                              {"bound", i < r.step_bounds.size() ? nlohmann::json(r.step_bounds[i])
                                                                 : nlohmann::json(nullptr)}});
        if (r.summary.speculative.k > 0) {  // the guesses its verify spans checked, accepted
            int guesses = 0, accepted = 0;
            for (std::size_t k = 0; k < st.guesses.size(); ++k) {
                guesses += st.guesses[k];
                accepted += st.accepted[k];
            }
            j["steps"].back()["guesses"] = guesses;
            j["steps"].back()["accepted"] = accepted;
        }
    }
    return j;
}

nlohmann::json serve_json(const ServeResult& r) {
    return std::visit([](const auto& report) { return serve_json(report); }, r);
}

// 3. Text: the same reports, as tables for a person.

// One line: what the clock charges, and whose tokens run.
void print_clock_line(const ServeSetup& s) {
    const RooflineCost& cost = *s.roofline;
    std::printf("clock: %s; tokens: %s\n", cost.describe().c_str(), s.tokens_from.c_str());
    std::printf(
        "  %.1f TFLOP/s x %.0f %%, %.0f GB/s x %.0f %%, %.1f us a step; weights %.2f GB; KV pool "
        "%d "
        "blocks of %d (%.0f %% of %.0f GB less the weights, or what the workload can fill)\n",
        cost.hardware.peak_tflops(cost.dtype), cost.hardware.compute_efficiency * 100,
        cost.hardware.bandwidth_gb_per_s, cost.hardware.bandwidth_efficiency * 100,
        cost.hardware.step_overhead_us, weights_bytes(cost.shape, cost.dtype) / 1e9, s.kv_blocks,
        s.block_size, s.gpu_memory_utilization * 100, cost.hardware.memory_gb);
}

void print_serve_text(const ServeCalibration& c) {
    std::printf(
        "step cost on this machine, backend %s: %.1f us per step + %.1f us per sequence "
        "+ its FLOPs at %.2f GFLOP/s\n",
        c.backend.c_str(), c.cost.step_us, c.cost.per_sequence_us, c.cost.gflops);
    std::printf("replay with it: plab serve --step-cost %s ...\n", c.cost.to_string().c_str());
}

void print_serve_text(const ServeValidation& v) {
    const CostValidation& e = v.errors;
    std::printf("workload: %s, %zu requests, policy %s, backend %s\n", v.setup.workload.c_str(),
                v.setup.requests, v.policy.c_str(), v.setup.backend.c_str());
    std::printf("clock under test: %s\n  (%s)\n", v.setup.roofline->describe().c_str(),
                v.setup.roofline->hardware.source.c_str());
    std::printf("%-22s %8s %8s\n", "|predicted - measured|", "median", "p90");
    std::printf("%-22s %7.1f%% %7.1f%%   (%d steps of the real run, each predicted)\n", "step time",
                e.median_step_rel_error * 100, e.p90_step_rel_error * 100, e.steps);
    std::printf("%-22s %7.1f%% %7.1f%%   (%d requests: real clock vs roofline replay)\n", "TTFT",
                e.median_ttft_rel_error * 100, e.p90_ttft_rel_error * 100, e.requests);
    std::printf("%-22s %7.1f%% %7.1f%%   (each request's mean ITL)\n", "ITL",
                e.median_itl_rel_error * 100, e.p90_itl_rel_error * 100);
    std::printf("%-22s %7.1f%% %7.1f%%   (%d steps run twice: the real clock against itself)\n",
                "real run vs real run", e.median_step_rel_noise * 100, e.p90_step_rel_noise * 100,
                e.noise_steps);
    std::printf(
        "errors are relative to the measured value; Vidur reports < 9 %% for vLLM on GPUs; no "
        "model of a step errs less than the machine's own noise\n");
}

// --simulate's line: no figure below was measured.
void print_simulated_line(const ServeSetup& s) {
    if (s.compute != "simulated") return;
    std::printf(
        "compute: simulated - no forward pass; the scheduler, KV pool, prefix cache and "
        "preemption ran for real at %s's sizes, every time below is modelled on the roofline "
        "clock\n",
        s.roofline->shape_name.c_str());
}

// A summary row's name: the policy, marked when nothing was computed.
std::string row_name(const std::string& policy, const ServeSetup& s) {
    return s.compute == "simulated" ? policy + " [sim]" : policy;
}

void print_serve_text(const ServeComparison& c) {
    std::printf("workload: %s, %zu requests, %s clock, backend %s\n", c.setup.workload.c_str(),
                c.setup.requests, c.setup.clock.c_str(), c.setup.backend.c_str());
    print_simulated_line(c.setup);
    std::printf("token budget per step: chunked %d; the others prefill whole prompts (%d)\n",
                c.token_budget, c.max_seq_len);
    std::printf("%-14s %9s %9s %9s %9s %9s %10s %8s %6s\n", "policy", "TTFT p50", "TTFT p99",
                "ITL p50", "ITL p99", "e2e p99", "tokens/s", "goodput", "steps");
    for (const auto& [name, s] : c.policies) print_summary_row(row_name(name, c.setup), s);
    const ServeSummary& cont = c.policies[2].second;
    const ServeSummary& chunk = c.policies[3].second;
    std::printf(
        "chunked prefill vs continuous without it: ITL p99 %.2f ms vs %.2f ms, "
        "TTFT p99 %.2f ms vs %.2f ms\n",
        chunk.itl_ms.p99, cont.itl_ms.p99, chunk.ttft_ms.p99, cont.ttft_ms.p99);
    std::printf(
        "times in ms from each request's arrival at the engine to a token sampled;\n"
        "goodput = requests/s meeting TTFT <= %g ms and mean ITL <= %g ms\n",
        c.ttft_slo_ms, c.itl_slo_ms);
    if (c.setup.roofline) print_clock_line(c.setup);
}

void print_serve_text(const ServeReplay& replay) {
    const ServeReport& r = replay.report;
    std::printf("workload: %s, %zu requests, policy %s, %s clock, backend %s\n",
                replay.setup.workload.c_str(), replay.setup.requests, r.policy.c_str(),
                r.clock.c_str(), replay.setup.backend.c_str());
    print_simulated_line(replay.setup);
    std::printf("%4s %9s %7s %7s %5s %9s %9s %9s %9s\n", "id", "arrival_s", "prompt", "cached",
                "new", "queue_ms", "ttft_ms", "tpot_ms", "e2e_ms");
    // A simulated run may hold tens of thousands of requests: the first rows.
    const std::size_t shown =
        r.compute == "simulated" ? std::min<std::size_t>(r.requests.size(), 20) : r.requests.size();
    for (std::size_t i = 0; i < shown; ++i) {
        const ServedRequest& s = r.requests[i];
        std::printf("%4d %9.4f %7d %7d %5d %9.2f %9.2f %9.2f %9.2f\n", s.id, s.arrival_s,
                    s.prompt_tokens, s.cached_tokens, s.new_token_count, s.latency.queue_ms,
                    s.ttft_client_ms, s.latency.tpot_ms, s.e2e_client_ms);
    }
    if (shown < r.requests.size())
        std::printf("... %zu more requests (--json lists every one)\n", r.requests.size() - shown);
    std::printf("\n%-14s %9s %9s %9s %9s %9s %10s %8s %6s\n", "policy", "TTFT p50", "TTFT p99",
                "ITL p50", "ITL p99", "e2e p99", "tokens/s", "goodput", "steps");
    print_summary_row(row_name(r.policy, replay.setup), r.summary);
    if (r.summary.speculative.k > 0) {
        const SpeculativeStats& s = r.summary.speculative;
        std::printf(
            "speculative decoding, up to %d guesses a verify step, draft %s: %s\n"
            "(a verify span computes its guesses inside the step's token budget, like a "
            "prefill chunk; the tokens are the same, the steps and their times are not;\n"
            "the clock charges the target's steps only%s)\n",
            s.k, s.draft.c_str(), speculative_stats_line(s).c_str(),
            s.draft_forwards > 0 ? ", not the draft model's forwards" : "");
    }
    if (replay.disaggregate) {
        const long long per_block = r.summary.kv_transfer_blocks > 0
                                        ? r.summary.kv_transfer_bytes / r.summary.kv_transfer_blocks
                                        : 0;
        double transfer_ms = 0;
        for (const ServedRequest& s : r.requests) transfer_ms += s.kv_transfer_ms;
        std::printf(
            "KV handed over: %lld blocks x %lld bytes = %lld bytes, %.3f ms in all at "
            "%.2f GB/s\n",
            r.summary.kv_transfer_blocks, per_block, r.summary.kv_transfer_bytes, transfer_ms,
            r.summary.link_gb_per_s);
    }
    std::printf("clocks start at arrival at the engine and stop when a token is sampled%s\n",
                r.network_delay_ms > 0 ? " (TTFT: delivered, network delay added)" : "");
    if (replay.setup.roofline) print_clock_line(replay.setup);
}

void print_serve_text(const ServeResult& r) {
    std::visit([](const auto& report) { print_serve_text(report); }, r);
}

void run(const ServeCliOptions& o) {
    // The presets are reference tables, not a run: printed as they are (text only).
    if (o.list_hardware || o.list_shapes) {
        if (o.list_hardware) list_hardware();
        if (o.list_shapes) list_shapes();
        return;
    }
    const ServeResult r = compute_serve(o);
    if (o.json) {
        print_json(serve_json(r));
    } else {
        print_serve_text(r);
    }
}

// Where the requests come from: a file, a generated Poisson stream, or the
// long-prompt experiment.
void add_serve_workload_options(CLI::App* cmd, ServeCliOptions& o) {
    cmd->add_option("--workload", o.workload,
                    "JSON Lines (arrival_s, prompt or prompt_tokens, max_new_tokens), a ShareGPT "
                    "JSON array, or input_len/output_len lines (arrivals at --rate)");
    cmd->add_option("--tokens-per-word", o.tokens_per_word,
                    "ShareGPT turns without a \"tokens\" count: their length in tokens per word")
        ->capture_default_str();
    cmd->add_option("--export-workload", o.export_workload,
                    "write the replayed workload here as plab JSON Lines (arrival_s, "
                    "prompt_tokens, max_new_tokens): the same arrivals for another engine");
    o.rate_option =
        cmd->add_option("--rate", o.rate, "generated workload: Poisson arrivals per second")
            ->capture_default_str();
    cmd->add_option("--requests", o.requests, "generated workload: how many")
        ->capture_default_str();
    cmd->add_option("--seed", o.seed, "arrivals, lengths and random prompt ids")
        ->capture_default_str();
    cmd->add_option("--prompt-len", o.prompt_len, "generated: prompt tokens MIN,MAX")
        ->capture_default_str();
    cmd->add_option("--new-tokens", o.new_tokens, "generated: new tokens MIN,MAX")
        ->capture_default_str();
    cmd->add_option("--long-prompt", o.long_prompt,
                    "the chunked-prefill experiment: 4 short requests decode, then a prompt of "
                    "N tokens arrives");
}

// The roofline clock (serving/roofline.h): a card, a shape, a precision, and
// how far the clock is from this machine's.
void add_serve_roofline_options(CLI::App* cmd, ServeCliOptions& o) {
    cmd->add_option(
        "--hardware", o.hardware,
        "charge the virtual clock as a roofline on this card: h100-sxm, a100-80gb, h200, "
        "l4, t4, rtx-4090, or this-machine (measured); see --list-hardware");
    o.shape_opt = cmd->add_option("--shape", o.shape,
                                  "with --hardware: the model shape charged (llama3-8b, ...; "
                                  "model: the loaded one); see --list-shapes")
                      ->capture_default_str();
    o.dtype_opt = cmd->add_option("--dtype", o.dtype,
                                  "with --hardware: bf16, fp16, fp32 or int8 (default bf16; "
                                  "fp32 on this-machine)");
    o.util_opt = cmd->add_option("--gpu-memory-utilization", o.gpu_memory_utilization,
                                 "with --hardware: share of the card's memory for weights and "
                                 "the KV pool (vLLM's default 0.9)")
                     ->capture_default_str();
    cmd->add_flag("--list-hardware", o.list_hardware, "print the hardware presets and exit");
    cmd->add_flag("--list-shapes", o.list_shapes, "print the model-shape presets and exit");
    cmd->add_flag("--simulate", o.simulate,
                  "with --hardware and --shape: no forward pass - the scheduler, KV pool, prefix "
                  "cache and preemption at the shape's sizes (contexts to 128K, thousands of "
                  "requests), placeholder tokens, every time modelled");
    cmd->add_flag("--validate-cost", o.validate_cost,
                  "replay on the real clock and on the roofline clock of this machine; print "
                  "the clock's errors");
}

}  // namespace

void add_serve_command(CLI::App& app) {
    auto o = std::make_shared<ServeCliOptions>();
    CLI::App* cmd = app.add_subcommand("serve", "replay a workload on the engine: serving metrics");
    add_model_option(cmd, o->model);
    cmd->add_option("--backend", o->backend, "cpu-ref, cpu, ...")->capture_default_str();
    cmd->add_option("--kernels", o->kernels,
                    "invariant, or fastest (cpu: the library's kernel for each product's shape; "
                    "lesson 16)")
        ->capture_default_str();
    add_serve_workload_options(cmd, *o);
    cmd->add_option("--policy", o->policy, policy_names())->capture_default_str();
    cmd->add_flag("--compare-policies", o->compare, "run the workload under every policy");
    cmd->add_option("--clock", o->clock, "virtual (deterministic) or real")->capture_default_str();
    cmd->add_option("--token-budget", o->token_budget, "tokens per step (chunked policy)")
        ->capture_default_str();
    cmd->add_option("--max-running", o->max_running, "sequences per step at most")
        ->capture_default_str();
    cmd->add_option("--block-size", o->block_size, "KV block size")->capture_default_str();
    o->kv_blocks_opt = cmd->add_option(
        "--kv-blocks", o->kv_blocks,
        "blocks in the pool (default: 4 full sequences; with --hardware: the card's memory)");
    cmd->add_option("--prefix-cache", o->prefix_cache, "on or off")->capture_default_str();
    cmd->add_option("--step-cost", o->step_cost,
                    "virtual clock: STEP_US,PER_SEQUENCE_US,GFLOPS (default 20,1,30)");
    cmd->add_option("--ttft-slo-ms", o->ttft_slo_ms, "goodput: TTFT objective")
        ->capture_default_str();
    cmd->add_option("--itl-slo-ms", o->itl_slo_ms, "goodput: mean ITL objective")
        ->capture_default_str();
    cmd->add_option("--network-delay-ms", o->network_delay_ms,
                    "one-way client network delay added to TTFT and e2e")
        ->capture_default_str();
    o->speculate_opt = cmd->add_option(
        "--speculate", o->speculate,
        "speculative decoding: each decoding request verifies up to K (1-8) guesses a step, in "
        "one span of K+1 positions inside the token budget (lesson 18)");
    o->draft_opt = cmd->add_option(
        "--draft", o->draft,
        "with --speculate: ngram[:N] (prompt lookup) or a draft model file with the target's "
        "vocabulary");
    cmd->add_flag("--disaggregate", o->disaggregate,
                  "a prefill engine and a decode engine, KV blocks handed over a link");
    cmd->add_option("--link-gbps", o->link_gb_per_s,
                    "disaggregated: KV link bandwidth in GB/s (default: measured copy bandwidth)");
    cmd->add_option("--trace", o->trace,
                    "write a Chrome trace: one track per request, one for the engine's steps");
    cmd->add_flag("--calibrate", o->calibrate,
                  "measure this machine's step cost (for --step-cost) and exit");
    add_serve_roofline_options(cmd, *o);
    cmd->add_flag("--json", o->json, "machine-readable output");
    cmd->callback([o] { run(*o); });
}

}  // namespace plab::cli
