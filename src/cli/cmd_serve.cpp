// `plab serve`: replay a workload on the engine and report serving metrics
// (serving/serve.h says where each clock starts and stops). With
// --compare-policies the same workload runs under every scheduling policy in
// one run: the chunked-prefill experiment of issue 11.
#include <cstdio>
#include <memory>

#include "cli/common.h"
#include "core/error.h"
#include "perf/machine.h"
#include "serving/serve.h"

namespace plab::cli {
namespace {

struct ServeCliOptions {
    std::string model;
    std::string backend = "cpu";
    std::string workload;
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
};

std::pair<int, int> parse_range(const std::string& text, const std::string& what) {
    const std::vector<int> v = parse_int_list(text, what);
    PLAB_CHECK(v.size() == 2, what << " '" << text << "' must be MIN,MAX");
    return {v[0], v[1]};
}

nlohmann::json percentiles_json(const Percentiles& p) {
    return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}};
}

nlohmann::json summary_json(const ServeSummary& s) {
    return {{"queue_ms", percentiles_json(s.queue_ms)},
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
            {"link_gb_per_s", s.link_gb_per_s}};
}

nlohmann::json report_json(const ServeReport& r) {
    nlohmann::json reqs = nlohmann::json::array();
    for (const ServedRequest& s : r.requests) {
        reqs.push_back({{"id", s.id},
                        {"arrival_s", s.arrival_s},
                        {"prompt_tokens", s.prompt_tokens},
                        {"cached_tokens", s.cached_tokens},
                        {"new_tokens", s.new_tokens},
                        {"preemptions", s.preemptions},
                        {"queue_ms", s.latency.queue_ms},
                        {"ttft_ms", s.ttft_client_ms},
                        {"itl_ms", s.itl_ms},
                        {"tpot_ms", s.latency.tpot_ms},
                        {"e2e_ms", s.e2e_client_ms},
                        {"kv_transfer_ms", s.kv_transfer_ms},
                        {"kv_transfer_bytes", s.kv_transfer_bytes}});
    }
    return {{"policy", r.policy},
            {"clock", r.clock},
            {"requests", reqs},
            {"summary", summary_json(r.summary)}};
}

void print_summary_row(const std::string& name, const ServeSummary& s) {
    std::printf("%-14s %9.2f %9.2f %9.2f %9.2f %9.2f %10.1f %8.2f %6d\n", name.c_str(),
                s.ttft_ms.p50, s.ttft_ms.p99, s.itl_ms.p50, s.itl_ms.p99, s.e2e_ms.p99,
                s.output_tokens_per_s, s.goodput, s.steps);
}

void run_calibrate(const ServeCliOptions& o) {
    const Model model = load_model_arg(o.model);
    EngineOptions eo;
    eo.backend = o.backend;
    eo.block_size = o.block_size;
    const StepCost cost = calibrate_step_cost(model, eo);
    if (o.json) {
        print_json({{"step_us", cost.step_us},
                    {"per_sequence_us", cost.per_sequence_us},
                    {"gflops", cost.gflops},
                    {"step_cost", cost.to_string()}});
        return;
    }
    std::printf(
        "step cost on this machine, backend %s: %.1f us per step + %.1f us per sequence "
        "+ its FLOPs at %.2f GFLOP/s\n",
        o.backend.c_str(), cost.step_us, cost.per_sequence_us, cost.gflops);
    std::printf("replay with it: plab serve --step-cost %s ...\n", cost.to_string().c_str());
}

void run(const ServeCliOptions& o) {
    if (o.calibrate) {
        run_calibrate(o);
        return;
    }
    // The workload first: a bad file is reported before a model is loaded.
    const bool rate_given = o.rate_option->count() > 0;
    PLAB_CHECK(o.workload.empty() || (!rate_given && o.long_prompt == 0),
               "give one workload: --workload FILE, --rate R (generated), or --long-prompt N");
    PLAB_CHECK(!rate_given || o.long_prompt == 0,
               "give one workload: --rate R (generated) or --long-prompt N, not both");
    Workload workload;
    if (!o.workload.empty()) {
        workload = parse_workload(read_text_file(o.workload, "workload file"), o.workload);
    } else if (o.long_prompt > 0) {
        workload = long_prompt_workload(o.long_prompt, 4, 32);
    } else {
        WorkloadGenerator g;
        g.rate = o.rate;
        g.requests = o.requests;
        g.seed = o.seed;
        std::tie(g.prompt_min, g.prompt_max) = parse_range(o.prompt_len, "--prompt-len");
        std::tie(g.new_min, g.new_max) = parse_range(o.new_tokens, "--new-tokens");
        workload = generate_workload(g);
    }
    PLAB_CHECK(o.clock == "virtual" || o.clock == "real",
               "--clock " << o.clock << " is not a clock; valid: virtual, real");
    PLAB_CHECK(o.prefix_cache == "on" || o.prefix_cache == "off",
               "--prefix-cache " << o.prefix_cache << " must be on or off");
    PLAB_CHECK(o.kv_blocks >= 0, "--kv-blocks " << o.kv_blocks << " must be at least 1");

    const Model model = load_model_arg(o.model);
    ServeOptions so;
    so.engine.backend = o.backend;
    so.engine.block_size = o.block_size;
    so.engine.kv_blocks = o.kv_blocks;
    so.engine.prefix_cache = o.prefix_cache == "on";
    so.engine.max_running = o.max_running;
    so.virtual_clock = o.clock == "virtual";
    if (!o.step_cost.empty()) so.cost = StepCost::parse(o.step_cost);
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
    const int max_seq = model.weights.config.max_seq_len;
    // --token-budget is the chunked policy's (policy_step_tokens).
    auto options_for = [&](Policy p) {
        ServeOptions s = so;
        s.engine.policy = p;
        s.engine.max_step_tokens = policy_step_tokens(p, o.token_budget, max_seq);
        return s;
    };

    if (o.compare) {
        PLAB_CHECK(o.trace.empty(),
                   "--trace records one policy's run; drop --compare-policies "
                   "or --trace");
        nlohmann::json all;
        std::vector<std::pair<std::string, ServeSummary>> rows;
        for (Policy p :
             {Policy::one_at_a_time, Policy::static_batch, Policy::continuous, Policy::chunked}) {
            const ServeReport r = serve(model, workload, options_for(p));
            all[policy_name(p)] = summary_json(r.summary);
            rows.emplace_back(policy_name(p), r.summary);
        }
        if (o.json) {
            print_json({{"policies", all}, {"clock", o.clock}, {"workload", workload.source}});
            return;
        }
        std::printf("workload: %s, %zu requests, %s clock, backend %s\n", workload.source.c_str(),
                    workload.requests.size(), o.clock.c_str(), o.backend.c_str());
        std::printf("token budget per step: chunked %d; the others prefill whole prompts (%d)\n",
                    o.token_budget, max_seq);
        std::printf("%-14s %9s %9s %9s %9s %9s %10s %8s %6s\n", "policy", "TTFT p50", "TTFT p99",
                    "ITL p50", "ITL p99", "e2e p99", "tokens/s", "goodput", "steps");
        for (const auto& [name, s] : rows) print_summary_row(name, s);
        const ServeSummary& cont = rows[2].second;
        const ServeSummary& chunk = rows[3].second;
        std::printf(
            "chunked prefill vs continuous without it: ITL p99 %.2f ms vs %.2f ms, "
            "TTFT p99 %.2f ms vs %.2f ms\n",
            chunk.itl_ms.p99, cont.itl_ms.p99, chunk.ttft_ms.p99, cont.ttft_ms.p99);
        std::printf(
            "times in ms from each request's arrival at the engine to a token sampled;\n"
            "goodput = requests/s meeting TTFT <= %g ms and mean ITL <= %g ms\n",
            o.ttft_slo_ms, o.itl_slo_ms);
        return;
    }

    const Policy policy = parse_policy(o.policy);
    const ServeReport r = serve(model, workload, options_for(policy));
    if (!o.trace.empty()) serve_trace(r).write_chrome_json(o.trace);
    if (o.json) {
        print_json(report_json(r));
        return;
    }
    std::printf("workload: %s, %zu requests, policy %s, %s clock, backend %s\n",
                workload.source.c_str(), workload.requests.size(), r.policy.c_str(),
                r.clock.c_str(), o.backend.c_str());
    std::printf("%4s %9s %7s %7s %5s %9s %9s %9s %9s\n", "id", "arrival_s", "prompt", "cached",
                "new", "queue_ms", "ttft_ms", "tpot_ms", "e2e_ms");
    for (const ServedRequest& s : r.requests) {
        std::printf("%4d %9.4f %7d %7d %5zu %9.2f %9.2f %9.2f %9.2f\n", s.id, s.arrival_s,
                    s.prompt_tokens, s.cached_tokens, s.new_tokens.size(), s.latency.queue_ms,
                    s.ttft_client_ms, s.latency.tpot_ms, s.e2e_client_ms);
    }
    std::printf("\n%-14s %9s %9s %9s %9s %9s %10s %8s %6s\n", "policy", "TTFT p50", "TTFT p99",
                "ITL p50", "ITL p99", "e2e p99", "tokens/s", "goodput", "steps");
    print_summary_row(r.policy, r.summary);
    if (o.disaggregate) {
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
                o.network_delay_ms > 0 ? " (TTFT: delivered, network delay added)" : "");
}

}  // namespace

void add_serve_command(CLI::App& app) {
    auto o = std::make_shared<ServeCliOptions>();
    CLI::App* cmd = app.add_subcommand("serve", "replay a workload on the engine: serving metrics");
    add_model_option(cmd, o->model);
    cmd->add_option("--backend", o->backend, "cpu-ref, cpu, ...")->capture_default_str();
    cmd->add_option("--workload", o->workload,
                    "JSON Lines: arrival_s, prompt or prompt_tokens, "
                    "max_new_tokens");
    o->rate_option =
        cmd->add_option("--rate", o->rate, "generated workload: Poisson arrivals per second")
            ->capture_default_str();
    cmd->add_option("--requests", o->requests, "generated workload: how many")
        ->capture_default_str();
    cmd->add_option("--seed", o->seed, "arrivals, lengths and random prompt ids")
        ->capture_default_str();
    cmd->add_option("--prompt-len", o->prompt_len, "generated: prompt tokens MIN,MAX")
        ->capture_default_str();
    cmd->add_option("--new-tokens", o->new_tokens, "generated: new tokens MIN,MAX")
        ->capture_default_str();
    cmd->add_option("--long-prompt", o->long_prompt,
                    "the chunked-prefill experiment: 4 short requests decode, then a prompt of "
                    "N tokens arrives");
    cmd->add_option("--policy", o->policy, "one-at-a-time, static, continuous, chunked")
        ->capture_default_str();
    cmd->add_flag("--compare-policies", o->compare, "run the workload under every policy");
    cmd->add_option("--clock", o->clock, "virtual (deterministic) or real")->capture_default_str();
    cmd->add_option("--token-budget", o->token_budget, "tokens per step (chunked policy)")
        ->capture_default_str();
    cmd->add_option("--max-running", o->max_running, "sequences per step at most")
        ->capture_default_str();
    cmd->add_option("--block-size", o->block_size, "KV block size")->capture_default_str();
    cmd->add_option("--kv-blocks", o->kv_blocks, "blocks in the pool (default: 4 full sequences)");
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
    cmd->add_flag("--disaggregate", o->disaggregate,
                  "a prefill engine and a decode engine, KV blocks handed over a link");
    cmd->add_option("--link-gbps", o->link_gb_per_s,
                    "disaggregated: KV link bandwidth in GB/s (default: measured copy bandwidth)");
    cmd->add_option("--trace", o->trace,
                    "write a Chrome trace: one track per request, one for the engine's steps");
    cmd->add_flag("--calibrate", o->calibrate,
                  "measure this machine's step cost (for --step-cost) and exit");
    cmd->add_flag("--json", o->json, "machine-readable output");
    cmd->callback([o] { run(*o); });
}

}  // namespace plab::cli
